package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// End-to-end tests: the real weft binary, real daemons as separate
// processes on 127.0.0.1, driven only through the CLI as the README shows.

func TestMain(m *testing.M) { testbed.Main(m) }

// cli runs weft commands on one home; the methods below read their output.
type cli struct{ testbed.CLI }

// newCLI returns a cli of the weft binary on a new home.
func newCLI(t *testing.T) cli { return cli{testbed.NewCLI(t)} }

// startDaemon starts `weft daemon --no-mdns ARGS…` on c's home and waits
// until it answers.
func startDaemon(t *testing.T, c cli, args ...string) *testbed.Daemon {
	t.Helper()
	return testbed.StartIn(t, c.Home, append([]string{"--no-mdns"}, args...)...)
}

func (c cli) id() (string, []string) {
	c.T.Helper()
	var out struct {
		ID    string   `json:"id"`
		Addrs []string `json:"addrs"`
	}
	if err := json.Unmarshal([]byte(c.OK("id", "--json")), &out); err != nil {
		c.T.Fatal(err)
	}
	return out.ID, out.Addrs
}

// readJSON runs `weft read NAME --json` and decodes one message per line.
func (c cli) readJSON(space string) []api.Message {
	c.T.Helper()
	var ms []api.Message
	for _, line := range strings.Split(strings.TrimSpace(c.OK("read", space, "--json")), "\n") {
		if line == "" {
			continue
		}
		var m api.Message
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			c.T.Fatalf("read --json line %q: %v", line, err)
		}
		ms = append(ms, m)
	}
	return ms
}

func (c cli) waitFor(what string, cond func() bool) {
	c.T.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.T.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSpacePeers waits until the node's one space has at least k peers.
func (c cli) waitSpacePeers(k int) {
	c.T.Helper()
	c.waitFor("space peers", func() bool {
		var sps api.Spaces
		return json.Unmarshal([]byte(c.OK("spaces", "--json")), &sps) == nil && len(sps.Spaces) == 1 && sps.Spaces[0].Peers >= k
	})
}

// nextFollowed checks that the next message `read --follow` printed is want.
func nextFollowed(t *testing.T, followed <-chan api.Message, want string) {
	t.Helper()
	select {
	case m := <-followed:
		if m.ID != want {
			t.Fatalf("read --follow printed %s, want %s", m.ID, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("read --follow did not print %s", want)
	}
}

func hasText(ms []api.Message, text string) (api.Message, bool) {
	for _, m := range ms {
		var c struct{ Text string }
		if json.Unmarshal(m.Content, &c) == nil && c.Text == text {
			return m, true
		}
	}
	return api.Message{}, false
}

func TestEndToEnd(t *testing.T) {
	a := newCLI(t)
	b := newCLI(t)
	c := newCLI(t)

	// Client commands without a daemon fail with a clear one-line error.
	_, errs, code := a.Run("id")
	if code == 0 || !strings.Contains(errs, "daemon not running (no socket at") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("id without daemon: exit %d, stderr %q", code, errs)
	}

	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	aID, aAddrs := a.id()
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddrs[0])
	dc := startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddrs[0])

	for _, n := range []cli{a, b, c} {
		n.OK("join", "research")
		n.OK("join", "research") // idempotent
	}
	if out := a.OK("spaces"); !strings.Contains(out, "research") {
		t.Fatalf("spaces: %q", out)
	}

	// Follow on B before anything is sent: replay, then live.
	follow := b.Command("read", "research", "--follow", "--json")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan api.Message, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m api.Message
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				followed <- m
			}
		}
		close(followed)
	}()
	t.Cleanup(func() { follow.Process.Signal(syscall.SIGTERM); follow.Wait() })

	// Wait until every node has both others as direct topic peers: a
	// sender's own messages then reach every member without relaying.
	for _, n := range []cli{a, b, c} {
		n.waitSpacePeers(2)
	}

	helloID := strings.TrimSpace(a.OK("send", "research", "--text", "hello"))
	b.waitFor("hello on b", func() bool { _, ok := hasText(b.readJSON("research"), "hello"); return ok })
	m, _ := hasText(b.readJSON("research"), "hello")
	if m.ID != helloID || m.From != aID {
		t.Fatalf("b read %+v, want id %s from %s", m, helloID, aID)
	}
	nextFollowed(t, followed, helloID)

	replyID := strings.TrimSpace(c.OK("send", "research", "--text", "hi a", "--ref", helloID, "--meta", "session=s1"))
	for _, n := range []cli{a, b} {
		n.waitFor("reply everywhere", func() bool { _, ok := hasText(n.readJSON("research"), "hi a"); return ok })
	}
	if show := a.OK("show", replyID, "--json"); !strings.Contains(show, helloID) || !strings.Contains(show, `"session":"s1"`) {
		t.Fatalf("show reply: %s", show)
	}
	if th := a.OK("thread", replyID, "--json"); !strings.Contains(th, `"depth":1`) || !strings.Contains(th, helloID) {
		t.Fatalf("thread of the reply: %s", th)
	}
	if th := a.OK("thread", helloID, "--down"); !strings.Contains(th, "hi a") {
		t.Fatalf("replies to hello: %s", th)
	}
	nextFollowed(t, followed, replyID)

	// kill -TERM c, restart it on the same home: it still has its messages,
	// is still in the space, and rejoins the mesh by itself.
	if err := dc.Stop(); err != nil {
		t.Fatalf("c did not exit cleanly on SIGTERM: %v\n%s", err, dc.Log.String())
	}
	if _, err := os.Stat(filepath.Join(c.Home, "weft.sock")); !os.IsNotExist(err) {
		t.Errorf("socket left behind after SIGTERM: %v", err)
	}
	startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0")
	after := c.readJSON("research")
	if len(after) != 2 || after[0].ID != helloID || after[1].ID != replyID {
		t.Fatalf("after restart c reads %d messages", len(after))
	}
	c.waitSpacePeers(2)
	a.OK("send", "research", "--text", "welcome back")
	c.waitFor("live message after restart", func() bool { _, ok := hasText(c.readJSON("research"), "welcome back"); return ok })

	// CLI errors: one line on stderr, non-zero exit.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"read", "nowhere"}, "unknown space"},
		{[]string{"send", "nowhere", "--text", "x"}, "unknown space"},
		{[]string{"connect", "/ip4/999.0.0.1/tcp/1"}, "bad multiaddr"},
		{[]string{"send", "research", "--data", "[1,2]"}, "content must be a JSON object"},
		{[]string{"show", "nope"}, "bad id"},
		{[]string{"read", "research", "--after", "!!"}, "bad cursor"},
	} {
		_, errs, code := a.Run(tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("weft %v: exit %d, stderr %q, want one line containing %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestEndToEndBadInputAPI: a daemon process answers bad requests on its
// socket with 4xx JSON errors and keeps serving.
func TestEndToEndBadInputAPI(t *testing.T) {
	a := newCLI(t)
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	a.OK("join", "lab")
	sock := filepath.Join(a.Home, "weft.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed JSON", "POST", "/v1/spaces/lab/messages", `{"content":`, 400},
		{"oversized body", "POST", "/v1/spaces/lab/messages", `{"content":{"t":"` + strings.Repeat("x", 2<<20) + `"}}`, 413},
		{"unknown space", "GET", "/v1/spaces/nope/messages", ``, 404},
		{"bad cursor", "GET", "/v1/spaces/lab/messages?after=garbage", ``, 400},
	} {
		req, _ := http.NewRequest(tc.method, "http://weft"+tc.path, strings.NewReader(tc.body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.Error
		if resp.StatusCode != tc.status || json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			t.Errorf("%s: %d %s, want %d with a JSON error", tc.name, resp.StatusCode, b, tc.status)
		}
	}
	a.OK("send", "lab", "--text", "still here")
	if ms := a.readJSON("lab"); len(ms) != 1 {
		t.Fatalf("lab holds %d messages, want 1", len(ms))
	}
}

// TestDemo runs `weft demo` as a newcomer would and checks it ends well and
// leaves nothing behind.
func TestDemo(t *testing.T) {
	bin := testbed.Weft(t)
	tmp := testbed.Home(t) // the demo's homes are made in it: short socket paths
	cmd := exec.Command(bin, "demo")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weft demo: %v\n%s", err, out)
	}
	for _, want := range []string{"node-3  started", "every node holds all 3 messages", "stopped 3 daemons"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("demo left %d entries in its temp dir", len(left))
	}
}
