package call

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// Close cancels the calls being served and waits for their handlers; once
// the hosts are closed too, no goroutine of the package is left, and the
// goroutine count returns to where it was. Not parallel: it counts
// goroutines.
func TestCloseEndsCallsAndLeaksNothing(t *testing.T) {
	// A first pair of hosts starts whatever libp2p starts once per process.
	{
		a, b := newHost(t), newHost(t)
		connect(t, a, b)
		a.Close()
		b.Close()
	}
	settle(t)
	before := runtime.NumGoroutine()

	func() {
		const calls = 5
		handlerCtx := make(chan error, calls)
		p := newPair(t, HandlerFunc(func(ctx context.Context, c *Call) {
			if c.Request.Name == "warm" {
				c.Final(nil, nil)
				return
			}
			c.Started()
			c.Flush()
			<-ctx.Done()
			handlerCtx <- context.Cause(ctx)
		}))
		connectWarm(t, p)
		ctx := callCtx(t, 10*time.Second)
		var streams []*Stream
		for range calls {
			cs, err := p.caller.Call(ctx, p.b.ID(), protocol.CallRequest{Name: "wait", Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if f, err := cs.Next(); err != nil || f.Kind != protocol.FrameStarted {
				t.Fatalf("first frame %+v, %v", f, err)
			}
			streams = append(streams, cs)
		}
		waitFor(t, 5*time.Second, "the calls to be served", func() bool { return p.callee.Active() == calls })
		closed := make(chan error, 1)
		go func() { closed <- p.callee.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return while calls were being served")
		}
		for range calls {
			if cause := <-handlerCtx; !errors.Is(cause, context.Canceled) {
				t.Errorf("handler ctx cause %v, want canceled", cause)
			}
		}
		if n := p.callee.Active(); n != 0 {
			t.Errorf("%d active calls after Close", n)
		}
		// Each call ends: with a reset (a CallError from Next) or, if the
		// handler's answer beat it, an error frame.
		for i, cs := range streams {
			f, err := cs.Next()
			var ce *protocol.CallError
			if err == nil && f.Kind != protocol.FrameError || err != nil && !errors.As(err, &ce) {
				t.Errorf("call %d after the callee closed: %+v, %v; want it failed", i, f, err)
			}
		}
		// A closed service turns new calls away.
		if _, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "late"}); err == nil {
			t.Error("a call to a closed service succeeded")
		}
		p.caller.Close()
		p.a.Close()
		p.b.Close()
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		ours := goroutines("mesh/call.(*Service)", "mesh/call.(*Stream)", "mesh/call.(*Call)")
		n := runtime.NumGoroutine()
		if len(ours) == 0 && n <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before; of this package:\n%s\n\nall:\n%s",
				n, before, strings.Join(ours, "\n\n"), strings.Join(goroutines(""), "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until the goroutine count stops falling.
func settle(tb testing.TB) {
	tb.Helper()
	last, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if n := runtime.NumGoroutine(); n < last {
			last, since = n, time.Now()
		} else if time.Since(since) > 200*time.Millisecond {
			return
		}
	}
}

// Close may come while calls are arriving: it returns, every call ends,
// and (under -race) the service's bookkeeping is not raced.
func TestCloseWhileCallsArrive(t *testing.T) {
	t.Parallel()
	for range 5 {
		p := newPair(t, HandlerFunc(func(ctx context.Context, c *Call) {
			c.Final(nil, nil)
		}))
		connectWarm(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "x"}); err != nil {
						return // the callee is gone
					}
				}
			})
		}
		waitFor(t, 5*time.Second, "calls in flight", func() bool { return p.callee.Active() > 0 })
		p.callee.Close()
		wg.Wait()
		cancel()
		if n := p.callee.Active(); n != 0 {
			t.Fatalf("%d active calls after Close", n)
		}
	}
}
