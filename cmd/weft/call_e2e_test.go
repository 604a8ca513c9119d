package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// End-to-end tests of calls: `weft handle NAME --exec CMD` serving on one
// daemon process, `weft invoke` (and the Go client) calling from another.

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// envScript is a handler that answers with the call's environment as JSON.
// It also reports whether the value secret appears anywhere in it.
func envScript(t *testing.T, dir, secret string) string {
	return script(t, dir, "env.sh", `
leak=false
if env | grep -q '`+secret+`'; then leak=true; fi
printf '{"traceparent":"%s","session":"%s","correlation":"%s","caller":"%s","name":"%s","call_id":"%s","leak":%s}\n' \
  "$WEFT_TRACEPARENT" "$WEFT_SESSION" "$WEFT_CORRELATION" "$WEFT_CALLER" "$WEFT_CALL_NAME" "$WEFT_CALL_ID" "$leak"
`)
}

// handlerEnv is what envScript prints.
type handlerEnv struct {
	Traceparent string `json:"traceparent"`
	Session     string `json:"session"`
	Correlation string `json:"correlation"`
	Caller      string `json:"caller"`
	Name        string `json:"name"`
	CallID      string `json:"call_id"`
	Leak        bool   `json:"leak"`
}

// TestInvokeHandleExec: `weft handle NAME --exec CMD` on b serves
// `weft invoke` from a: the output comes back, and so do the trace, the
// session and the caller's local meta, which the handler never sees.
func TestInvokeHandleExec(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	dir := t.TempDir()
	const secret = "local-secret-7f3a"
	b.OK("trust", "add", aID, "--name", "a")

	startHandler(t, b, "echo", "--exec", "cat", "--description", "echoes its input")
	startHandler(t, b, "env", "--exec", envScript(t, dir, secret))
	testbed.Poll(t, 10*time.Second, "b's card to list the handlers", func() (bool, string) {
		out := b.OK("card", "--json")
		return strings.Contains(out, `"echo"`) && strings.Contains(out, `"env"`) && strings.Contains(out, "echoes its input"), out
	})

	out, errs, code, took := a.RunWithin(20*time.Second, "invoke", bID, "echo", "--data", `{"x":1}`)
	if code != 0 || strings.TrimSpace(out) != `{"x":1}` {
		t.Fatalf("invoke echo: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	t.Logf("invoke echo took %v (a whole weft process)", took.Round(time.Millisecond))

	out, errs, code, _ = a.RunWithin(20*time.Second, "invoke", bID, "env", "--data", `{}`,
		"--meta", "session=s1", "--meta", "local.k="+secret, "--meta-out")
	if code != 0 {
		t.Fatalf("invoke env: exit %d, stderr %q", code, errs)
	}
	var env handlerEnv
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("invoke env printed %q: %v", out, err)
	}
	var meta map[string]string
	if err := json.Unmarshal([]byte(errs), &meta); err != nil {
		t.Fatalf("--meta-out printed %q to stderr: %v", errs, err)
	}
	if meta["session"] != "s1" || meta["local.k"] != secret || meta["traceparent"] == "" {
		t.Errorf("response meta %v: want the session s1, the caller's local.k and a traceparent", meta)
	}
	if env.Session != "s1" || env.Caller != aID || env.Name != "env" || env.CallID == "" {
		t.Errorf("handler env %+v: want session s1, caller a, name env, a call ID", env)
	}
	if traceID(t, env.Traceparent) != traceID(t, meta["traceparent"]) {
		t.Errorf("handler ran in trace %s, the response is of trace %s", env.Traceparent, meta["traceparent"])
	}
	if env.Leak {
		t.Error("the handler's environment holds the caller's local meta")
	}

	// A Go handler sees the whole request meta: no local keys.
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		served <- b.goClient().Serve(ctx, api.HandlerRequest{Names: []string{"meta"}},
			func(_ context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
				out, err := json.Marshal(c.Meta)
				return out, map[string]string{"handler": "go", "local.h": "kept home"}, err
			}, func() { close(ready) })
	}()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the Go handler did not register")
	}
	res, err := a.goClient().Invoke(t.Context(), api.InvokeRequest{Peer: bID, Name: "meta",
		Meta: map[string]string{"session": "s2", "tenant": "t1", "local.k": secret}})
	if err != nil {
		t.Fatal(err)
	}
	var seen map[string]string
	if err := json.Unmarshal(res.Output, &seen); err != nil {
		t.Fatalf("meta handler answered %s: %v", res.Output, err)
	}
	if _, ok := seen["local.k"]; ok || seen["session"] != "s2" || seen["tenant"] != "t1" || seen["traceparent"] == "" {
		t.Errorf("the handler saw meta %v: want session, tenant and traceparent, no local.k", seen)
	}
	if res.Meta["local.k"] != secret || res.Meta["handler"] != "go" || res.Meta["session"] != "s2" {
		t.Errorf("response meta %v: want the caller's local.k, the handler's meta and the session", res.Meta)
	}
	if _, ok := res.Meta["local.h"]; ok {
		t.Errorf("response meta %v holds the handler's local meta", res.Meta)
	}
}

// TestInvokeConcurrent: 20 calls at once to a 100 ms handler that serves 20
// at once end in well under 2 s.
func TestInvokeConcurrent(t *testing.T) {
	const calls = 20
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	startHandler(t, b, "slow", "--exec", "sleep 0.1; cat", "--concurrency", strconv.Itoa(calls), "--allow", aID)
	ca := a.goClient()
	if _, err := ca.Invoke(t.Context(), api.InvokeRequest{Peer: bID, Name: "slow"}); err != nil {
		t.Fatalf("warm-up call: %v", err)
	}

	run := func(what string, call func(ctx context.Context, i int) (string, error)) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, calls)
		start := time.Now()
		for i := range calls {
			wg.Go(func() {
				out, err := call(ctx, i)
				if err == nil && !jsonEqual(t, out, fmt.Sprintf(`{"i":%d}`, i)) {
					err = fmt.Errorf("answered %s", out)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		took := time.Since(start)
		t.Logf("%d concurrent calls of 100 ms (%s): %v", calls, what, took.Round(time.Millisecond))
		if ctx.Err() != nil {
			t.Fatalf("%s: %d calls of 100 ms took over 2s", what, calls)
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s: call %d: %v", what, i, err)
			}
		}
	}
	run("Go client", func(ctx context.Context, i int) (string, error) {
		res, err := ca.Invoke(ctx, api.InvokeRequest{Peer: bID, Name: "slow", Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		return string(res.Output), err
	})
	run("weft invoke processes", func(ctx context.Context, i int) (string, error) {
		cmd := exec.CommandContext(ctx, a.Bin, "invoke", bID, "slow", "--data", fmt.Sprintf(`{"i":%d}`, i))
		cmd.Env = append(os.Environ(), a.Env())
		out, err := cmd.Output()
		return string(out), err
	})
}

// randomPeer returns a valid peer ID nobody uses.
func randomPeer(t *testing.T) string {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// TestInvokeErrors: an unknown name and an unreachable peer fail fast with
// typed errors, from the CLI and the Go client.
func TestInvokeErrors(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	bID, _ := b.id()
	_, aAddrs := a.id()
	startHandler(t, b, "echo", "--exec", "cat")

	// c was a peer of a, and is stopped.
	c := newCLI(t)
	dc := startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddrs[0])
	cID, _ := c.id()
	a.waitConnected(cID)
	if err := dc.Stop(); err != nil {
		t.Fatalf("c did not stop cleanly: %v", err)
	}
	testbed.Poll(t, 10*time.Second, "a to see c gone", func() (bool, string) {
		out := a.OK("peers", "--json")
		return !strings.Contains(out, cID), out
	})
	stranger := randomPeer(t)

	for _, tc := range []struct {
		name, peer, call, code string
		stderr                 []string // one of these
		within                 time.Duration
	}{
		{"unknown name", bID, "nosuch", "no_handler", []string{"no handler"}, 5 * time.Second},
		{"stopped peer", cID, "echo", "unreachable", []string{"cannot reach", "unreachable"}, 5 * time.Second},
		{"never-seen peer", stranger, "echo", "unreachable", []string{"cannot reach", "unreachable"}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := cli{testbed.CLI{T: t, Bin: a.Bin, Home: a.Home}}
			out, errs, code, took := a.RunWithin(tc.within, "invoke", tc.peer, tc.call, "--data", `{"x":1}`)
			t.Logf("weft invoke: exit %d in %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(errs))
			if code == 0 || out != "" {
				t.Errorf("exit %d, stdout %q: want a failure", code, out)
			}
			found := false
			for _, s := range tc.stderr {
				found = found || strings.Contains(errs, s)
			}
			if !found || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("stderr %q: want one line containing one of %q", errs, tc.stderr)
			}

			ctx, cancel := context.WithTimeout(t.Context(), tc.within)
			defer cancel()
			start := time.Now()
			_, err := a.goClient().Invoke(ctx, api.InvokeRequest{Peer: tc.peer, Name: tc.call})
			if ctx.Err() != nil {
				t.Fatalf("Go client: the call did not fail within %v", tc.within)
			}
			var e *client.Error
			if !client.IsCode(err, tc.code) || !errors.As(err, &e) {
				t.Fatalf("Go client: %v (%T), want code %s", err, err, tc.code)
			}
			t.Logf("Go client: %s (%d) in %v", e.Code, e.Status, time.Since(start).Round(time.Millisecond))

			// The same from a stream call.
			err = a.goClient().InvokeStream(ctx, api.InvokeRequest{Peer: tc.peer, Name: tc.call}, func(f api.Frame) error {
				if f.Kind != "started" {
					return fmt.Errorf("unexpected frame %+v", f)
				}
				return nil
			})
			if !client.IsCode(err, tc.code) {
				t.Errorf("Go client stream: %v, want code %s", err, tc.code)
			}
		})
	}
}

// TestInvokeStream: a handler printing 10,000 lines streams them as 10,000
// deltas, in order, to `weft invoke --stream` and to the Go client.
func TestInvokeStream(t *testing.T) {
	const lines = 10000
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	bID, _ := b.id()
	startHandler(t, b, "count", "--exec", fmt.Sprintf("seq 1 %d", lines), "--allow", "anyone")

	out, errs, code, took := a.RunWithin(60*time.Second, "invoke", bID, "count", "--stream")
	if code != 0 {
		t.Fatalf("invoke --stream: exit %d: %s", code, errs)
	}
	t.Logf("weft invoke --stream: %d bytes in %v", len(out), took.Round(time.Millisecond))
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != lines {
		t.Fatalf("invoke --stream printed %d lines, want %d", len(got), lines)
	}
	for i, l := range got {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d is %q, want %d", i+1, l, i+1)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var frames []api.Frame
	err := a.goClient().InvokeStream(ctx, api.InvokeRequest{Peer: bID, Name: "count"}, func(f api.Frame) error {
		frames = append(frames, f)
		return nil
	})
	if err != nil {
		t.Fatalf("InvokeStream: %v", err)
	}
	if len(frames) < lines+1 {
		t.Fatalf("%d frames, want at least %d deltas and a final", len(frames), lines)
	}
	deltas := 0
	for i, f := range frames {
		if i > 0 && f.Seq <= frames[i-1].Seq {
			t.Fatalf("frame %d: seq %d after %d", i, f.Seq, frames[i-1].Seq)
		}
		switch {
		case f.Kind == "started":
			if i != 0 {
				t.Errorf("frame %d is started", i)
			}
		case f.Kind == "delta":
			deltas++
			if string(f.Data) != strconv.Itoa(deltas) {
				t.Fatalf("delta %d is %s", deltas, f.Data)
			}
		case f.Kind == "final" && i == len(frames)-1:
			if f.Meta["traceparent"] == "" {
				t.Errorf("final frame without a traceparent: %+v", f)
			}
		default:
			t.Fatalf("frame %d of %d: %+v", i, len(frames), f)
		}
	}
	if deltas != lines {
		t.Errorf("%d deltas, want %d", deltas, lines)
	}
}

// TestInvokeStreamCancel: cancelling a stream call stops the handler
// process on the serving side, whether the caller cancels its ctx (Go
// client) or the `weft invoke` process is killed.
func TestInvokeStreamCancel(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	bID, _ := b.id()
	dir := t.TempDir()
	// Each call writes its PID, then a tick to a file and a delta every 50 ms.
	loop := script(t, dir, "loop.sh", `
echo $$ > '`+dir+`'/"$WEFT_CALL_ID.pid"
while :; do
  echo tick >> '`+dir+`'/"$WEFT_CALL_ID.ticks"
  echo '{"tick":1}'
  sleep 0.05
done
`)
	h := startHandler(t, b, "loop", "--exec", "exec "+loop, "--allow", "anyone")

	// handlerStopped waits until the one call's handler process is gone and
	// its file stopped growing, and returns how many calls were stopped.
	stopped := 0
	handlerStopped := func(how string) {
		t.Helper()
		var pidFile string
		testbed.Poll(t, 10*time.Second, "the call's pid file", func() (bool, string) {
			m, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
			for _, f := range m {
				if !strings.HasSuffix(f, ".done.pid") {
					pidFile = f
					return true, ""
				}
			}
			return false, fmt.Sprint(m)
		})
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid := strings.TrimSpace(string(raw))
		if _, err := strconv.Atoi(pid); err != nil {
			t.Fatalf("pid file holds %q", raw)
		}
		testbed.Poll(t, 10*time.Second, how+": the handler process to end", func() (bool, string) {
			_, err := os.Stat("/proc/" + pid)
			return os.IsNotExist(err), fmt.Sprint(err)
		})
		ticks := strings.TrimSuffix(pidFile, ".pid") + ".ticks"
		size := func() int64 {
			fi, err := os.Stat(ticks)
			if err != nil {
				t.Fatal(err)
			}
			return fi.Size()
		}
		prev, prevAt := size(), time.Now()
		testbed.Poll(t, 10*time.Second, how+": the ticks file to stop growing", func() (bool, string) {
			if time.Since(prevAt) < 300*time.Millisecond {
				return false, "too soon"
			}
			cur := size()
			same := cur == prev
			prev, prevAt = cur, time.Now()
			return same, fmt.Sprintf("%d bytes", cur)
		})
		stopped++
		testbed.Poll(t, 10*time.Second, how+": weft handle to log the cancellation", func() (bool, string) {
			return strings.Count(h.Stderr.String(), "handler stopped") == stopped, h.Stderr.String()
		})
		os.Rename(pidFile, strings.TrimSuffix(pidFile, ".pid")+".done.pid")
	}

	// The Go client cancels its ctx after 5 deltas.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	deltas := 0
	start := time.Now()
	err := a.goClient().InvokeStream(ctx, api.InvokeRequest{Peer: bID, Name: "loop"}, func(f api.Frame) error {
		if f.Kind == "delta" {
			deltas++
			if deltas == 5 {
				cancel()
			}
		}
		if time.Since(start) > 20*time.Second {
			return errors.New("not cancelled after 20s")
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("InvokeStream after cancel: %v, want context.Canceled", err)
	}
	cancelled := time.Now()
	handlerStopped("Go client cancel")
	t.Logf("handler stopped %v after the Go client cancelled", time.Since(cancelled).Round(time.Millisecond))

	// weft invoke --stream, killed after it printed a few deltas.
	p := a.Start("invoke", bID, "loop", "--stream")
	testbed.Poll(t, 20*time.Second, "deltas from weft invoke --stream", func() (bool, string) {
		return strings.Count(p.Stdout.String(), `{"tick":1}`) >= 5, p.Stderr.String()
	})
	p.Kill()
	if err := p.Wait(10 * time.Second); err == nil {
		t.Fatal("the killed weft invoke exited 0")
	}
	killed := time.Now()
	handlerStopped("weft invoke killed")
	t.Logf("handler stopped %v after weft invoke was killed", time.Since(killed).Round(time.Millisecond))

	// The handler still serves.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel2()
	n := 0
	err = a.goClient().InvokeStream(ctx2, api.InvokeRequest{Peer: bID, Name: "loop"}, func(f api.Frame) error {
		if f.Kind == "delta" {
			n++
			if n == 2 {
				return errors.New("enough")
			}
		}
		return nil
	})
	if err == nil || err.Error() != "enough" {
		t.Fatalf("third call: %v", err)
	}
	handlerStopped("fn returned an error")
}

// TestInvokeNested: a handler that calls another peer's handler passes the
// trace and the session on: the caller, outer (on b) and inner (on a)
// share one trace ID, and the caller's session reaches inner.
func TestInvokeNested(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	dir := t.TempDir()
	a.OK("trust", "add", bID)
	b.OK("trust", "add", aID)
	startHandler(t, a, "inner", "--exec", envScript(t, dir, "no-secret-here"))
	outer := script(t, dir, "outer.sh", fmt.Sprintf(`
inner=$(%q invoke %s inner --json '{"from":"outer"}') || exit 1
printf '{"traceparent":"%%s","session":"%%s","call_id":"%%s","inner":%%s}\n' "$WEFT_TRACEPARENT" "$WEFT_SESSION" "$WEFT_CALL_ID" "$inner"
`, a.Bin, aID))
	startHandler(t, b, "outer", "--exec", outer)

	out, errs, code, took := a.RunWithin(30*time.Second, "invoke", bID, "outer", "--meta", "session=s1", "--meta-out")
	if code != 0 {
		t.Fatalf("invoke outer: exit %d: %s", code, errs)
	}
	t.Logf("nested call took %v", took.Round(time.Millisecond))
	var res struct {
		handlerEnv
		Inner handlerEnv `json:"inner"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("outer answered %q: %v", out, err)
	}
	var meta map[string]string
	if err := json.Unmarshal([]byte(errs), &meta); err != nil {
		t.Fatalf("--meta-out printed %q: %v", errs, err)
	}
	trace := traceID(t, meta["traceparent"])
	if got := traceID(t, res.Traceparent); got != trace {
		t.Errorf("outer ran in trace %s, the caller's is %s", got, trace)
	}
	if got := traceID(t, res.Inner.Traceparent); got != trace {
		t.Errorf("inner ran in trace %s, the caller's is %s", got, trace)
	}
	if res.Inner.Traceparent == res.Traceparent {
		t.Errorf("inner has outer's span (%s): want a child span", res.Traceparent)
	}
	if res.Session != "s1" || res.Inner.Session != "s1" || meta["session"] != "s1" {
		t.Errorf("session: outer %q, inner %q, response %q; want s1", res.Session, res.Inner.Session, meta["session"])
	}
	if res.Inner.Caller != bID {
		t.Errorf("inner was called by %s, want b", res.Inner.Caller)
	}
}
