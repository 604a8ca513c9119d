package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// End-to-end tests of A2A: the official A2A CLI (`a2a`, built from the
// pinned a2a-go) drives weft handlers on another daemon through the local
// daemon's loopback listener.

const a2aCLIPackage = "github.com/a2aproject/a2a-go/v2/cmd/a2a"

// a2aCLI builds the official A2A CLI, or skips the test if it cannot be
// built here.
func a2aCLI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	bin := filepath.Join(t.TempDir(), "a2a")
	if out, err := exec.Command("go", "build", "-o", bin, a2aCLIPackage).CombinedOutput(); err != nil {
		t.Skipf("cannot build the official A2A CLI (%s): %v\n%s", a2aCLIPackage, err, out)
	}
	return bin
}

// a2aRun runs the A2A CLI and returns its stdout; a failure fails the test.
func a2aRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, errs, err := a2aTry(bin, args...)
	if err != nil {
		t.Fatalf("a2a %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errs)
	}
	return out
}

func a2aTry(bin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// jsonValues decodes the JSON values printed one after another.
func jsonValues(t *testing.T, out string) []map[string]any {
	t.Helper()
	var vs []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var v map[string]any
		if err := dec.Decode(&v); err == io.EOF {
			return vs
		} else if err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		vs = append(vs, v)
	}
}

// jpath returns the value at a dotted path of nested JSON objects.
func jpath(v any, keys string) any {
	for _, k := range strings.Split(keys, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// a2aHandlers serves "echo" (unary: the input back; stream: five deltas
// {"n":i}, then "done") and "wait" (a stream that sends one delta, then
// waits to be cancelled, which it reports on cancelled) on d, to anyone.
type a2aHandlers struct {
	mu        sync.Mutex
	seen      []api.IncomingCall
	cancelled chan string
}

func serveA2AHandlers(t *testing.T, d *testbed.Daemon) *a2aHandlers {
	t.Helper()
	h := &a2aHandlers{cancelled: make(chan string, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Client.Serve(ctx, api.HandlerRequest{Names: []string{"echo", "wait"}, Allow: []string{"anyone"},
			Capabilities: []api.Capability{{Name: "echo", Description: "echoes its input"}}},
			func(ctx context.Context, c api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
				h.mu.Lock()
				h.seen = append(h.seen, c)
				h.mu.Unlock()
				switch {
				case c.Name == "echo" && !c.Stream:
					return c.Input, map[string]string{"handled-by": "echo"}, nil
				case c.Name == "echo":
					for i := range 5 {
						if err := send(json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
							return nil, nil, err
						}
					}
					return json.RawMessage(`"done"`), nil, nil
				default:
					if err := send(json.RawMessage(`"waiting"`)); err != nil {
						return nil, nil, err
					}
					<-ctx.Done()
					h.cancelled <- c.ID
					return nil, nil, ctx.Err()
				}
			}, func() { close(ready) })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case <-done:
		t.Fatal("the handlers did not register")
	case <-time.After(20 * time.Second):
		t.Fatal("the handlers did not register in time")
	}
	return h
}

func (h *a2aHandlers) last() api.IncomingCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[len(h.seen)-1]
}

// weftA2A runs `weft a2a ARGS --json` on d and returns what it printed.
func weftA2A(t *testing.T, d *testbed.Daemon, args ...string) a2aAgent {
	t.Helper()
	var ag a2aAgent
	testbed.Poll(t, 30*time.Second, "weft a2a "+strings.Join(args, " "), func() (bool, string) {
		out, errs, code := d.CLI(t).Run(append(args, "--json")...)
		if code != 0 {
			return false, errs
		}
		if err := json.Unmarshal([]byte(out), &ag); err != nil {
			t.Fatalf("weft a2a --json printed %q: %v", out, err)
		}
		return true, ""
	})
	return ag
}

func bearer(t *testing.T, ag a2aAgent) string {
	t.Helper()
	b, err := os.ReadFile(ag.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + strings.TrimSpace(string(b))
}

// TestA2ACLI: the official A2A CLI reaches a weft handler on another
// daemon through the local one: discover, send (unary), send --stream
// (every delta, in order), cancel (the handler sees it), and get task,
// also after the local daemon restarts. Without the token it gets nothing.
func TestA2ACLI(t *testing.T) {
	a2a := a2aCLI(t)
	da := testbed.Start(t)
	db := testbed.Start(t, "--bootstrap", da.Addrs[0])
	da.WaitConnected(db.ID)
	h := serveA2AHandlers(t, db)

	ag := weftA2A(t, da, "a2a", db.ID, "--skill", "echo")
	auth := bearer(t, ag)
	if !strings.HasPrefix(ag.URL, "http://127.0.0.1:") || !strings.HasSuffix(ag.URL, "/a2a/peer/"+db.ID+"/skill/echo") || len(ag.Skills) != 1 || ag.Skills[0] != "echo" {
		t.Fatalf("weft a2a: %+v", ag)
	}

	// Bad input: a clear error, nothing else happens.
	for _, bad := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"a2a"}, 2, "give a PEER"},
		{[]string{"a2a", db.ID, "--capability", "echo"}, 2, "give a PEER"},
		{[]string{"a2a", "not-a-peer"}, 1, "not a peer ID"},
		{[]string{"a2a", db.ID, "--skill", "nope"}, 1, "does not offer"},
		{[]string{"a2a", "--capability", "nobody-offers-this"}, 1, "no peer offers"},
	} {
		if _, errs, code := da.CLI(t).Run(bad.args...); code != bad.code || !strings.Contains(errs, bad.msg) {
			t.Errorf("weft %v: exit %d, %q; want exit %d and %q", bad.args, code, errs, bad.code, bad.msg)
		}
	}

	// No token, a wrong token: refused.
	if out, errs, err := a2aTry(a2a, "discover", ag.URL); err == nil || !strings.Contains(errs+out, "401") {
		t.Fatalf("discover without the token: err %v, %s %s", err, out, errs)
	}
	if _, errs, err := a2aTry(a2a, "send", ag.URL, "--auth", "Bearer "+strings.Repeat("0", 64), "hi"); err == nil || !strings.Contains(errs, "401") {
		t.Fatalf("send with a wrong token: err %v, %s", err, errs)
	}

	// discover: the card, with the skill, streaming and the bearer scheme.
	card := jsonValues(t, a2aRun(t, a2a, "discover", ag.URL, "--auth", auth, "-o", "json"))[0]
	if jpath(card, "capabilities.streaming") != true || !strings.Contains(fmt.Sprint(card["skills"]), "echoes its input") ||
		jpath(card, "securitySchemes.weftToken.httpAuthSecurityScheme.scheme") != "Bearer" {
		t.Fatalf("agent card: %v", card)
	}

	// send: a unary invoke; the text is the input, the output the artifact.
	task := jsonValues(t, a2aRun(t, a2a, "send", ag.URL, "--auth", auth, "-o", "json", "hello weft"))[0]
	unaryID, _ := task["id"].(string)
	if jpath(task, "status.state") != "TASK_STATE_COMPLETED" || !strings.Contains(fmt.Sprint(task["artifacts"]), "text:hello weft") {
		t.Fatalf("send: %v", task)
	}
	if c := h.last(); c.Stream || string(c.Input) != `"hello weft"` || c.Meta["session"] != task["contextId"] || c.Meta["traceparent"] == "" {
		t.Fatalf("the handler got %+v: want a unary call of \"hello weft\" in session %v, with a trace", c, task["contextId"])
	}

	// send --stream: a stream invoke, every delta in order.
	events := jsonValues(t, a2aRun(t, a2a, "send", ag.URL, "--stream", "--auth", auth, "-o", "json", "count"))
	var deltas []string
	var states []any
	for _, ev := range events {
		if a := ev["artifactUpdate"]; a != nil && jpath(a, "artifact.artifactId") == "weft-deltas" {
			parts, _ := jpath(a, "artifact.parts").([]any)
			for _, p := range parts {
				b, _ := json.Marshal(p)
				deltas = append(deltas, string(b))
			}
		}
		if s := jpath(ev, "statusUpdate.status.state"); s != nil {
			states = append(states, s)
		}
	}
	want := []string{}
	for i := range 5 {
		want = append(want, fmt.Sprintf(`{"data":{"n":%d}}`, i))
	}
	if strings.Join(deltas, ",") != strings.Join(want, ",") {
		t.Fatalf("stream deltas %v, want %v (events %v)", deltas, want, events)
	}
	if fmt.Sprint(states) != "[TASK_STATE_WORKING TASK_STATE_COMPLETED]" || !h.last().Stream {
		t.Fatalf("stream states %v (want working, completed); stream call %v", states, h.last().Stream)
	}

	// The agent of a capability: whichever peer offers it answers, and
	// the stream's working status names it.
	capAgent := weftA2A(t, da, "a2a", "--capability", "echo")
	if !strings.HasSuffix(capAgent.URL, "/a2a/capability/echo") {
		t.Fatalf("weft a2a --capability: %+v", capAgent)
	}
	events = jsonValues(t, a2aRun(t, a2a, "send", capAgent.URL, "--stream", "--auth", auth, "-o", "json", "by capability"))
	var answeredBy any
	for _, ev := range events {
		if jpath(ev, "statusUpdate.status.state") == "TASK_STATE_WORKING" {
			if m, ok := jpath(ev, "statusUpdate.metadata").(map[string]any); ok {
				answeredBy = m["weft.peer"]
			}
		}
	}
	if answeredBy != db.ID || jpath(events[len(events)-1], "statusUpdate.status.state") != "TASK_STATE_COMPLETED" {
		t.Fatalf("send to the capability's agent: answered by %v (want %s), events %v", answeredBy, db.ID, events)
	}

	// cancel: a stream that waits is cancelled with a2a cancel; the
	// handler sees it.
	wait := weftA2A(t, da, "a2a", db.ID, "--skill", "wait")
	p := testbed.Run(t, nil, nil, a2a, "send", wait.URL, "--stream", "--auth", auth, "-o", "json", "wait for it")
	out := p.WaitOutput(30*time.Second, "waiting")
	waitID, _ := jpath(jsonValues(t, out[:strings.Index(out, "}\n{")+2])[0], "task.id").(string)
	if waitID == "" {
		t.Fatalf("no task ID in %q", out)
	}
	cancelled := a2aRun(t, a2a, "cancel", wait.URL, waitID, "--auth", auth, "-o", "json")
	if !strings.Contains(cancelled, "TASK_STATE_CANCELED") {
		t.Fatalf("a2a cancel printed %s", cancelled)
	}
	select {
	case <-h.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not see the cancel")
	}
	if err := p.Wait(20 * time.Second); err != nil {
		t.Logf("the cancelled stream's a2a send ended with %v", err)
	}

	// get task, then again after the local daemon restarts (on a new
	// port): the tasks are kept. The CLI is told the transport, so it
	// reads the task without the remote peer.
	got := jsonValues(t, a2aRun(t, a2a, "get", "task", ag.URL, unaryID, "--auth", auth, "-o", "json"))[0]
	if jpath(got, "status.state") != "TASK_STATE_COMPLETED" {
		t.Fatalf("get task: %v", got)
	}
	if err := da.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	db.Stop() // the peer is gone too: the task is read from the store
	da = testbed.StartIn(t, da.Home, "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0")
	info, err := os.ReadFile(filepath.Join(da.Home, "a2a.json"))
	if err != nil {
		t.Fatal(err)
	}
	var root struct{ URL string }
	json.Unmarshal(info, &root)
	url2 := strings.TrimRight(root.URL, "/") + "/peer/" + db.ID + "/skill/echo"
	wait2 := strings.TrimRight(root.URL, "/") + "/peer/" + db.ID + "/skill/wait"
	if url2 == ag.URL {
		t.Logf("the restarted daemon has the same web port")
	}
	auth2 := bearer(t, a2aAgent{TokenFile: ag.TokenFile})
	if auth2 == auth {
		t.Error("the token did not change across the restart")
	}
	for _, tc := range []struct{ url, id, state string }{{url2, unaryID, "TASK_STATE_COMPLETED"}, {wait2, waitID, "TASK_STATE_CANCELED"}} {
		got = jsonValues(t, a2aRun(t, a2a, "get", "task", tc.url, tc.id, "--auth", auth2, "--transport", "jsonrpc", "-o", "json"))[0]
		if jpath(got, "status.state") != tc.state || got["id"] != tc.id {
			t.Fatalf("get task %s after the restart: %v, want %s", tc.id, got, tc.state)
		}
	}
	if !strings.Contains(fmt.Sprint(got["history"]), "wait for it") {
		t.Errorf("the task's history after the restart: %v", got["history"])
	}
	if _, errs, err := a2aTry(a2a, "get", "task", url2, "no-such-task", "--auth", auth2, "--transport", "jsonrpc"); err == nil {
		t.Fatalf("get of a task that does not exist succeeded: %s", errs)
	}
}

// TestA2AServeBridged: `a2a serve --echo` (the official CLI's A2A
// server) bridged onto the mesh by `weft handle echo-a2a --a2a URL` on one
// daemon is invoked from a third daemon: unary and streamed with `weft
// invoke`, and through MCP; a bad URL is refused at once.
func TestA2AServeBridged(t *testing.T) {
	a2a := a2aCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	srv := testbed.Run(t, nil, nil, a2a, "serve", "--echo", "--host", "127.0.0.1", "--port", port, "--name", "echo agent")
	agentURL := "http://127.0.0.1:" + port
	testbed.Poll(t, 20*time.Second, "a2a serve --echo to answer", func() (bool, string) {
		resp, err := http.Get(agentURL + "/.well-known/agent-card.json")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})

	ds := testbed.Mesh(t, 3)
	b, c := ds[1], ds[2]
	if out, errs, code := b.CLI(t).Run("handle", "x", "--a2a", "http://127.0.0.1:1", "--allow", "anyone"); code == 0 || !strings.Contains(errs, "A2A agent") {
		t.Fatalf("handle --a2a of nothing: exit %d, %s %s", code, out, errs)
	}
	if _, errs, code := b.CLI(t).Run("handle", "x", "--a2a", agentURL, "--exec", "cat"); code != 2 || !strings.Contains(errs, "not both") {
		t.Fatalf("handle --a2a and --exec: exit %d, %s", code, errs)
	}
	h := b.CLI(t).Start("handle", "echo-a2a", "--a2a", agentURL, "--allow", "anyone")
	h.WaitStderr(30*time.Second, "serving echo-a2a")
	cc := c.CLI(t)
	testbed.Poll(t, 30*time.Second, "c to see b's card with echo-a2a", func() (bool, string) {
		out, _, _ := cc.Run("card", b.ID, "--json")
		return strings.Contains(out, "echo agent"), out
	})

	out, errs, code := cc.Run("invoke", b.ID, "echo-a2a", "--data", `"hello over the mesh"`)
	if code != 0 || strings.TrimSpace(out) != `"hello over the mesh"` {
		t.Fatalf("invoke: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = cc.Run("invoke", b.ID, "echo-a2a", "--stream", "--frames", "--data", `"streamed"`)
	frames := jsonLines[api.Frame](t, out)
	if code != 0 || len(frames) < 3 || frames[0].Kind != "started" || frames[1].Kind != "delta" || string(frames[1].Data) != `"streamed"` || frames[len(frames)-1].Kind != "final" {
		t.Fatalf("invoke --stream: exit %d, frames %q, stderr %q", code, out, errs)
	}

	ms := mcpStdio(t, cli{cc})
	var res struct {
		Output json.RawMessage `json:"output"`
	}
	mcpOK(t, ms, "invoke", map[string]any{"peer": b.ID, "name": "echo-a2a", "input": "hello from mcp"}, &res)
	if string(res.Output) != `"hello from mcp"` {
		t.Fatalf("MCP invoke answered %s", res.Output)
	}
	if err := h.Stop(); err != nil {
		t.Logf("weft handle --a2a ended with %v", err)
	}
	srv.Stop()
}
