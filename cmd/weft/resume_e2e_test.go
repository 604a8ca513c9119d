package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// TestFollowAcrossRestart: `weft read --follow`, `weft inbox --follow` and
// `weft handle` keep going across a restart of their daemon: they say so
// on stderr, wait, and resume from their cursor (nothing lost, nothing
// repeated) or register again.
func TestFollowAcrossRestart(t *testing.T) {
	a, b := newCLI(t), newCLI(t)
	aListen := testbed.FreeListen(t)
	da := startDaemon(t, a, "--listen", aListen)
	aID := da.ID
	aAddr := aListen + "/p2p/" + aID
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddr)
	bID, _ := b.id()
	a.waitConnected(bID)
	a.OK("trust", "add", bID)

	a.OK("join", "s")
	m1 := strings.TrimSpace(a.OK("send", "s", "--text", "m1"))
	m2 := strings.TrimSpace(a.OK("send", "s", "--text", "m2"))
	follower := a.Start("read", "s", "--follow", "--json")
	inbox := a.Start("inbox", "--follow", "--json")
	handler := startHandler(t, a, "echo", "--exec", "cat")
	follower.WaitOutput(20*time.Second, m2)
	b.OK("dm", aID, "--text", "d1")
	inbox.WaitOutput(30*time.Second, `"d1"`)
	if out := b.OK("invoke", aID, "echo", "--data", `{"n":1}`); !strings.Contains(out, `"n":1`) {
		t.Fatalf("invoke before the restart printed %q", out)
	}

	if err := da.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*testbed.Proc{follower, inbox, handler} {
		p.WaitStderr(20*time.Second, "waiting for it to come back")
	}
	// While a is down: a DM waits in b's outbox.
	b.OK("dm", aID, "--text", "d2")

	startDaemon(t, a, "--listen", aListen)
	for _, p := range []*testbed.Proc{follower, inbox, handler} {
		p.WaitStderr(20*time.Second, "the daemon is back")
		if p.Exited() {
			t.Fatalf("%s exited across the restart; stderr:\n%s", p.Name, p.Stderr)
		}
	}
	m3 := strings.TrimSpace(a.OK("send", "s", "--text", "m3"))
	follower.WaitOutput(20*time.Second, m3)
	testbed.Poll(t, 30*time.Second, "b reconnected to a", func() (bool, string) {
		_, errs, code := b.Run("connect", aAddr)
		return code == 0, errs
	})
	inbox.WaitOutput(60*time.Second, `"d2"`)
	testbed.Poll(t, 30*time.Second, "the handler registered again", func() (bool, string) {
		return strings.Count(handler.Stderr.String(), "serving echo") == 2, handler.Stderr.String()
	})
	if out := b.OK("invoke", aID, "echo", "--data", `{"n":2}`); !strings.Contains(out, `"n":2`) {
		t.Fatalf("invoke after the restart printed %q", out)
	}

	once := func(what, out string, want []string, key func(api.Message) string) {
		t.Helper()
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var m api.Message
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %q: %v", what, line, err)
			}
			got = append(got, key(m))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s printed %v, want each of %v once, in order", what, got, want)
		}
	}
	byID := func(m api.Message) string { return m.ID }
	byText := func(m api.Message) string {
		var c struct{ Text string }
		_ = json.Unmarshal(m.Content, &c)
		return c.Text
	}
	once("read --follow", follower.Stdout.String(), []string{m1, m2, m3}, byID)
	once("inbox --follow", inbox.Stdout.String(), []string{"d1", "d2"}, byText)
}
