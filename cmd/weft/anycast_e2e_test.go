package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// provider is a Go handler of "work" on one daemon: it answers with its
// daemon's ID after a pause, counting the calls it serves and has in
// flight. Calls with input "hold" wait until release is closed.
type provider struct {
	d        *testbed.Daemon
	served   atomic.Int64
	inflight atomic.Int64
	release  chan struct{}
}

func serveWork(t *testing.T, d *testbed.Daemon, pause time.Duration) *provider {
	t.Helper()
	p := &provider{d: d, release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Client.Serve(ctx, api.HandlerRequest{Names: []string{"work"}, Allow: []string{"anyone"}},
			func(ctx context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
				p.inflight.Add(1)
				defer p.inflight.Add(-1)
				if string(c.Input) == `"hold"` {
					select {
					case <-p.release:
					case <-ctx.Done():
					}
				} else {
					select {
					case <-time.After(pause):
					case <-ctx.Done():
						return nil, nil, ctx.Err()
					}
				}
				p.served.Add(1)
				out, _ := json.Marshal(d.ID)
				return out, nil, nil
			}, func() { close(ready) })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case <-done:
		t.Fatalf("the handler on %s did not register", d.ID)
	case <-time.After(20 * time.Second):
		t.Fatalf("the handler on %s did not register in time", d.ID)
	}
	return p
}

// callWork makes one call by capability from c and checks that the peer
// it says answered is the one whose handler answered.
func callWork(ctx context.Context, c *client.Client, input string) (api.InvokeResult, error) {
	res, err := c.Invoke(ctx, api.InvokeRequest{Capability: "work", Input: json.RawMessage(input), Timeout: "20s"})
	if err != nil {
		return res, err
	}
	var who string
	if err := json.Unmarshal(res.Output, &who); err != nil || who != res.Peer {
		return res, &client.Error{Code: "test", Message: "answer " + string(res.Output) + " but peer " + res.Peer}
	}
	return res, nil
}

// TestInvokeByCapability: five daemons, three of them providers of
// "work". Calls by capability from the first spread over the providers
// and avoid a loaded one; when a provider is killed with calls in flight
// those calls fail over and every call still succeeds; with no provider
// left a call fails with a clear error.
func TestInvokeByCapability(t *testing.T) {
	ds := testbed.Mesh(t, 5)
	caller := ds[0].Client
	ps := []*provider{serveWork(t, ds[2], 20*time.Millisecond), serveWork(t, ds[3], 20*time.Millisecond), serveWork(t, ds[4], 20*time.Millisecond)}
	testbed.Poll(t, 30*time.Second, "the caller to discover the three providers", func() (bool, string) {
		d, err := caller.Discover(t.Context(), "work", 0, 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		return len(d) == 3, strings.Repeat("*", len(d))
	})

	// Spread by load: the first provider holds 8 calls from another
	// daemon; sequential calls from the caller go to the other two, both.
	var held sync.WaitGroup
	for range 8 {
		held.Go(func() {
			ds[1].Client.Invoke(context.Background(), api.InvokeRequest{Peer: ds[2].ID, Name: "work", Input: json.RawMessage(`"hold"`), Timeout: "60s"})
		})
	}
	testbed.Poll(t, 20*time.Second, "8 calls held on the first provider", func() (bool, string) {
		return ps[0].inflight.Load() == 8, ""
	})
	by := map[string]int{}
	for range 16 {
		res, err := callWork(t.Context(), caller, `"x"`)
		if err != nil {
			t.Fatalf("call by capability: %v", err)
		}
		if len(res.Attempts) != 0 {
			t.Errorf("a call with every provider up tried %v first", res.Attempts)
		}
		by[res.Peer]++
	}
	if by[ds[2].ID] != 0 || by[ds[3].ID] == 0 || by[ds[4].ID] == 0 {
		t.Fatalf("16 calls with the first provider loaded went %v: want none to %s, some to each other", by, ds[2].ID)
	}
	close(ps[0].release)
	held.Wait()
	t.Logf("with %s loaded: %v", ds[2].ID, by)

	// The CLI says which peer answered.
	out, errs, code := ds[0].CLI(t).Run("invoke", "--capability", "work", "--data", `"y"`)
	if code != 0 || !strings.Contains(errs, "answered by 12D3") || !strings.Contains(out, "12D3") {
		t.Fatalf("weft invoke --capability: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// Failover: calls run all the time (slow ones, so some are in flight
	// on each provider); one provider is killed with calls in flight.
	for _, p := range ps {
		p.served.Store(0)
	}
	ctx, stop := context.WithCancel(t.Context())
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		overs    []api.Attempt
		calls    atomic.Int64
	)
	for range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := callWork(context.Background(), caller, `"x"`)
				calls.Add(1)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				}
				overs = append(overs, res.Attempts...)
				mu.Unlock()
			}
		})
	}
	victim := ps[1]
	testbed.Poll(t, 20*time.Second, "calls in flight on "+victim.d.ID, func() (bool, string) {
		return victim.inflight.Load() > 0, ""
	})
	victim.d.Kill()
	before := calls.Load()
	testbed.Poll(t, 30*time.Second, "40 more calls after the kill", func() (bool, string) {
		return calls.Load() >= before+40, ""
	})
	stop()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed across the kill, e.g. %v", len(failures), calls.Load(), failures[0])
	}
	failedOver := false
	for _, a := range overs {
		if a.Peer == victim.d.ID && a.Code == "unreachable" {
			failedOver = true
		}
	}
	if !failedOver {
		t.Fatalf("no call failed over from the killed %s (attempts %v)", victim.d.ID, overs)
	}
	t.Logf("%d calls across the kill, none failed; failed over: %v", calls.Load(), overs)

	// None left: a clear error.
	ps[0].d.Kill()
	ps[2].d.Kill()
	_, err := callWork(t.Context(), caller, `"x"`)
	if !client.IsCode(err, "unreachable") && !client.IsCode(err, "no_handler") {
		t.Fatalf("a call with every provider gone: %v, want unreachable or no_handler", err)
	}
	out, errs, code = ds[0].CLI(t).Run("invoke", "--capability", "work")
	if code != 1 || !strings.Contains(errs, `"work"`) || !(strings.Contains(errs, "no provider") || strings.Contains(errs, "no peer offers")) {
		t.Fatalf("weft invoke --capability with none left: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	t.Logf("none left: %s", strings.TrimSpace(errs))
}

// TestInvokeCapabilityUsage: a call by capability named wrongly is a usage
// error, before any daemon is asked.
func TestInvokeCapabilityUsage(t *testing.T) {
	c := testbed.NewCLI(t)
	for _, args := range [][]string{
		{"invoke", "--capability"},
		{"invoke", "--capability", ""},
		{"invoke", "--capability", "work", "12D3KooWGRUVh5nWUfQ1UhCF5A2ojYUJ4DqYyhZ3WmcWqpbbPEKY", "work"},
		{"invoke", "--capability", "work", "--json", "{"},
	} {
		if _, errs, code := c.Run(args...); code != 2 || !strings.Contains(errs, "usage: weft invoke") {
			t.Errorf("weft %v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
}
