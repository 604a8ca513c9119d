package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// End-to-end tests of who may reach a node: `weft handle`'s call policy
// and `weft trust`, `weft daemon --dm-policy`, with real processes.

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// invokeForbidden runs `weft invoke PEER NAME` on c, which must fail with
// forbidden.
func (c cli) invokeForbidden(peer, name string) {
	c.T.Helper()
	out, errs, code, _ := c.RunWithin(20*time.Second, "invoke", peer, name, "--data", `{"x":1}`)
	if code == 0 || !strings.Contains(errs, "takes calls only from peers this node trusts") {
		c.T.Fatalf("invoke %s: exit %d, stdout %q, stderr %q; want a refusal (forbidden)", name, code, out, errs)
	}
}

// TestHandleExecStranger: `weft handle NAME --exec CMD` without --allow
// serves trusted peers only. A stranger's call is refused with forbidden
// and CMD never runs (it would leave a marker file); after `weft trust add`
// of the caller it runs, after `weft trust remove` it is refused again.
// --allow PEER and --allow anyone open a handler without trust, and the
// card tells callers which handlers are open to anyone.
func TestHandleExecStranger(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	run := script(t, dir, "run.sh", "touch '"+marker+"'\ncat\n")

	h := startHandler(t, b, "run", "--exec", run)
	if !strings.Contains(h.Stderr.String(), "to trusted peers only") {
		t.Errorf("weft handle does not say who may call: %q", h.Stderr.String())
	}
	a.invokeForbidden(bID, "run")
	_, err := a.goClient().Invoke(t.Context(), api.InvokeRequest{Peer: bID, Name: "run"})
	if !client.IsCode(err, "forbidden") {
		t.Fatalf("Go client: %v, want forbidden", err)
	}
	if exists(marker) {
		t.Fatal("a stranger's call ran the handler's command")
	}

	if out := b.OK("trust", "add", aID, "--name", "alice"); !strings.Contains(out, "trusted "+aID+"  (alice)") {
		t.Fatalf("trust add printed %q", out)
	}
	var list api.TrustList
	if err := json.Unmarshal([]byte(b.OK("trust", "list", "--json")), &list); err != nil ||
		len(list.Peers) != 1 || list.Peers[0].Peer != aID || list.Peers[0].Name != "alice" {
		t.Fatalf("trust list --json: %+v, %v", list, err)
	}
	if out, errs, code, _ := a.RunWithin(20*time.Second, "invoke", bID, "run", "--data", `{"x":1}`); code != 0 || strings.TrimSpace(out) != `{"x":1}` {
		t.Fatalf("invoke as a trusted peer: exit %d, %q, %q", code, out, errs)
	}
	if !exists(marker) {
		t.Fatal("the trusted call did not run the command")
	}
	os.Remove(marker)

	if out := b.OK("trust", "remove", aID); !strings.Contains(out, "no longer trusted") {
		t.Fatalf("trust remove printed %q", out)
	}
	a.invokeForbidden(bID, "run")
	if exists(marker) {
		t.Fatal("the command ran for a peer no longer trusted")
	}

	startHandler(t, b, "run_listed", "--exec", run, "--allow", aID)
	if out, errs, code, _ := a.RunWithin(20*time.Second, "invoke", bID, "run_listed"); code != 0 {
		t.Fatalf("invoke a handler that lists the caller: exit %d, %q, %q", code, out, errs)
	}
	os.Remove(marker)
	startHandler(t, b, "run_open", "--exec", run, "--allow", "anyone")
	if out, errs, code, _ := a.RunWithin(20*time.Second, "invoke", bID, "run_open"); code != 0 {
		t.Fatalf("invoke a handler open to anyone: exit %d, %q, %q", code, out, errs)
	}
	if _, errs, code := b.Run("handle", "x", "--exec", "cat", "--allow", "everyone"); code == 0 || !strings.Contains(errs, "everyone") {
		t.Fatalf("--allow everyone: exit %d, %q; want a refusal", code, errs)
	}

	var card api.Card
	if err := json.Unmarshal([]byte(a.OK("card", bID, "--json")), &card); err != nil {
		t.Fatal(err)
	}
	access := make(map[string]string)
	for _, c := range card.Capabilities {
		access[c.Name] = c.Access
	}
	if access["run"] != "restricted" || access["run_listed"] != "restricted" || access["run_open"] != "anyone" {
		t.Fatalf("card access %v: want run and run_listed restricted, run_open anyone", access)
	}
}

// TestDaemonDMPolicyTrusted: `weft daemon --dm-policy trusted` refuses a
// stranger's direct message for good (the sender's outbox dead-letters it,
// saying why) and takes a trusted peer's.
func TestDaemonDMPolicyTrusted(t *testing.T) {
	a, b := newCLI(t), newCLI(t)
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0", "--dm-policy", "trusted")
	aID, aAddrs := a.id()
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddrs[0])
	bID, _ := b.id()
	a.waitConnected(bID)
	if _, errs, _ := a.Run("trust", "list"); !strings.Contains(errs, "trusted peers only") {
		t.Errorf("trust list does not tell the DM policy: %q", errs)
	}

	if out := b.OK("dm", aID, "--text", "let me in"); !strings.HasSuffix(strings.TrimSpace(out), "queued") {
		t.Fatalf("a stranger's DM: %q, want queued (refused)", out)
	}
	testbed.Poll(t, 20*time.Second, "the refused DM in the dead letters", func() (bool, string) {
		dead := b.outbox(true)
		return len(dead) == 1 && strings.Contains(dead[0].Reason, "forbidden"), b.OK("outbox", "--dead", "--json")
	})
	if in := a.inbox(); len(in) != 0 {
		t.Fatalf("a's inbox holds %d messages from a stranger", len(in))
	}

	a.OK("trust", "add", bID)
	if out := b.OK("dm", aID, "--text", "trusted now"); !strings.HasSuffix(strings.TrimSpace(out), "delivered") {
		t.Fatalf("a trusted peer's DM: %q, want delivered", out)
	}
	if in := a.inbox(); len(in) != 1 || in[0].From != bID {
		t.Fatalf("a's inbox: %+v", in)
	}
}
