package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// TestStatus: `weft status` shows the node, its peers, spaces with their
// message counts, the outbox, the handlers and the version; --json has the
// same; global flags go before the command; the daemon logs peers joining
// and leaving, and spaces by name.
func TestStatus(t *testing.T) {
	a, b, _, db := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	a.OK("join", "lab")
	a.OK("send", "lab", "--text", "one")
	a.OK("send", "lab", "--text", "two")
	startHandler(t, a, "review", "--exec", "cat")

	var st api.Status
	if err := json.Unmarshal([]byte(a.OK("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.ID != aID || len(st.Peers) != 1 || st.Peers[0].ID != bID || st.Version == "" || st.StartedAt.IsZero() {
		t.Errorf("status: %+v", st)
	}
	if len(st.Spaces) != 1 || st.Spaces[0].Name != "lab" || st.Spaces[0].Messages != 2 {
		t.Errorf("status spaces: %+v", st.Spaces)
	}
	if strings.Join(st.Handlers, ",") != "review" {
		t.Errorf("status handlers: %v", st.Handlers)
	}
	// Global --home before the command, from a directory with no WEFT_HOME.
	cmd := testbed.CLI{T: t, Bin: a.Bin, Home: testbed.Home(t)}
	out, errs, code := cmd.Run("--home", a.Home, "status")
	if code != 0 {
		t.Fatalf("weft --home H status: exit %d: %s", code, errs)
	}
	for _, want := range []string{"id        " + aID, "1 peer (1 direct, 0 relayed)", bID, "lab  2 messages", "handlers  review", "0 direct messages waiting"} {
		if !strings.Contains(out, want) {
			t.Errorf("weft status lacks %q:\n%s", want, out)
		}
	}
	testbed.Poll(t, 10*time.Second, "b logs a as connected", func() (bool, string) {
		return logHas(db.Log.String(), `msg="peer connected"`, "peer="+aID), db.Log.String()
	})
	b.OK("join", "lab")
	testbed.Poll(t, 10*time.Second, "b logs the space by name", func() (bool, string) {
		return logHas(db.Log.String(), `msg="joined space"`, "name=lab"), db.Log.String()
	})
}

// TestVersionFlag: weft --version is weft version.
func TestVersionFlag(t *testing.T) {
	c := newCLI(t)
	if a, b := c.OK("--version"), c.OK("version"); a != b || !strings.HasPrefix(a, "weft ") {
		t.Errorf("weft --version printed %q, weft version %q", a, b)
	}
}

// logHas reports whether one line of log holds all of parts.
func logHas(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestLogFormatJSON: --log-format json makes every line the daemon logs a
// JSON object (libp2p's and zeroconf's included); a bad format is refused.
func TestLogFormatJSON(t *testing.T) {
	d := testbed.Start(t, "--log-format", "json")
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(d.Log.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("log: %q", d.Log)
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["msg"] == nil {
			t.Errorf("not a JSON log line: %q", l)
		}
	}
	c := newCLI(t)
	_, errs, code := c.Run("daemon", "--log-format", "yaml")
	if code != 2 || !strings.Contains(errs, "want text or json") {
		t.Errorf("--log-format yaml: exit %d, %q", code, errs)
	}
}

// TestStatusSpaceSync: `weft status` says per space what sync does: a
// space joined with no peer is not synced yet; once a member with history
// joins, its space reads "in sync" with the time of the last session, and
// the messages are there.
func TestStatusSpaceSync(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	start := time.Now().Add(-time.Second)
	b.OK("join", "solo")
	a.OK("join", "lab")
	for _, text := range []string{"one", "two", "three"} {
		a.OK("send", "lab", "--text", text)
	}
	spaceOf := func(st api.Status, name string) api.Space {
		for _, sp := range st.Spaces {
			if sp.Name == name {
				return sp
			}
		}
		return api.Space{}
	}
	status := func(c cli) api.Status {
		var st api.Status
		if err := json.Unmarshal([]byte(c.OK("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if sp := spaceOf(status(b), "solo"); sp.Sync == nil || sp.Sync.State != api.SyncNone || !sp.Sync.LastEnd.IsZero() {
		t.Errorf("a space with no other member: sync %+v, want not synced", sp.Sync)
	}
	b.OK("join", "lab")
	var sp api.Space
	testbed.Poll(t, 20*time.Second, "b's lab in sync with its 3 messages", func() (bool, string) {
		sp = spaceOf(status(b), "lab")
		return sp.Messages == 3 && sp.Sync != nil && sp.Sync.State == api.SyncInSync, fmt.Sprintf("%+v %+v", sp, sp.Sync)
	})
	if s := sp.Sync; s.Left != 0 || s.Running || s.LastEnd.Before(start) || s.LastEnd.After(time.Now()) || s.LastPeer == "" || s.LastError != "" {
		t.Errorf("b's lab sync: %+v, want in sync just now with a, nothing left", s)
	}
	if txt := b.OK("status"); !strings.Contains(txt, "lab  3 messages, 1 peer, in sync (last sync ") ||
		!strings.Contains(txt, "solo  0 messages, 0 peers, not synced yet") {
		t.Errorf("weft status:\n%s", txt)
	}
}
