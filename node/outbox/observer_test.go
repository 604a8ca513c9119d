package outbox

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// countObserver counts what the outbox tells its Observer.
type countObserver struct {
	mu sync.Mutex
	counts
}

// counts are what a countObserver counted.
type counts struct {
	ok, failed, delivered    int
	deadRefused, deadExpired int
}

func (c *countObserver) Attempt(ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.ok++
	} else {
		c.failed++
	}
}

func (c *countObserver) Delivered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delivered++
}

func (c *countObserver) DeadLettered(refused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if refused {
		c.deadRefused++
	} else {
		c.deadExpired++
	}
}

func (c *countObserver) get() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// TestObserver: the observer hears of each attempt, delivery and dead
// letter, with its cause.
func TestObserver(t *testing.T) {
	st, clk, tr, a, b := newMemStore(), newFakeClock(), newFakeTransport(), newPeer(t), newPeer(t)
	good, bad, skewed := enqueue(t, st, "good", a, t0.Add(time.Hour)), enqueue(t, st, "bad", a, t0.Add(time.Hour)), enqueue(t, st, "skewed", a, t0.Add(time.Hour))
	tr.set(a, func(p *fakePeer) {
		p.refuse = func(raw []byte) *protocol.CallError {
			switch string(raw) {
			case string(bad.Raw):
				return &protocol.CallError{Code: protocol.CodeRefused, Message: "bad", Reason: "bad_signature"}
			case string(skewed.Raw):
				return &protocol.CallError{Code: protocol.CodeRefused, Message: "skewed", Reason: "clock_skew"}
			}
			return nil
		}
	})
	tr.set(b, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
	late := enqueue(t, st, "late", b, t0.Add(500*time.Millisecond))
	obs := &countObserver{}
	o, err := New(st, tr, WithClock(clk), WithRand(half), WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	start(t, o)
	waitQueued(t, st, skewed.ID, "the skewed message retried", func(o store.Outgoing) bool { return o.Attempts == 1 })
	waitQueued(t, st, late.ID, "the late message tried", func(o store.Outgoing) bool { return o.Attempts == 1 })
	waitIdle(t, o)
	clk.AdvanceTo(t0.Add(500 * time.Millisecond))
	o.Wake()
	waitFor(t, "the late message dead", func() bool {
		_, ok := deadLetter(t, st, late.ID)
		return ok
	})
	if _, dead := deadLetter(t, st, good.ID); !gone(t, st, good.ID) || dead {
		t.Fatal("good message not delivered")
	}
	got := obs.get()
	if got.delivered != 1 || got.deadRefused != 1 || got.deadExpired != 1 || got.failed < 2 {
		t.Fatalf("observed %+v; want 1 delivered, 1 dead refused, 1 dead expired, at least 2 failed attempts (a's refusal for now, b unreachable)", got)
	}
}
