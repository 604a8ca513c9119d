package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// *store.Store is an outbox Store.
var _ Store = (*store.Store)(nil)

func TestNew(t *testing.T) {
	st, tr := newMemStore(), newFakeTransport()
	for _, tc := range []struct {
		name string
		st   Store
		tr   Transport
		opts []Option
		ok   bool
	}{
		{"defaults", st, tr, nil, true},
		{"nil logger discards", st, tr, []Option{WithLogger(nil)}, true},
		{"nil store", nil, tr, nil, false},
		{"nil transport", st, nil, nil, false},
		{"nil clock", st, tr, []Option{WithClock(nil)}, false},
		{"nil rand", st, tr, []Option{WithRand(nil)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := New(tc.st, tc.tr, tc.opts...)
			if (err == nil) != tc.ok || (o != nil) != tc.ok {
				t.Fatalf("New: %v, %v; want ok %v", o, err, tc.ok)
			}
		})
	}
}

// The wait after a failed attempt doubles from 1 s to a cap of 1 min and
// is jittered by ±20%.
func TestBackoff(t *testing.T) {
	bases := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60, 60, 60}
	for attempts, base := range bases {
		base *= time.Second
		for _, tc := range []struct {
			r    float64
			want time.Duration
		}{
			{0, base * 8 / 10},
			{0.5, base},
			{0.75, base * 11 / 10},
			{0.999999, base * 12 / 10},
		} {
			got := backoff(attempts, tc.r)
			if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("backoff(%d, %v) = %v, want %v", attempts, tc.r, got, tc.want)
			}
		}
	}
	if got := backoff(1000, 0.5); got != time.Minute {
		t.Errorf("backoff(1000, 0.5) = %v, want 1m", got)
	}
}

// A message to a peer that cannot be reached is retried on the backoff
// schedule, each wait jittered by the random source, and the error is
// recorded.
func TestRetrySchedule(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		tr.set(a, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
		rnd := &seqRand{vals: []float64{0, 0.5, 0.75, 0.25}} // ×0.8, ×1, ×1.1, ×0.9
		o := newTestOutbox(t, st, tr, clk, rnd.Float64)
		e := enqueue(t, st, "m", a, t0.Add(time.Hour))
		start(t, o)
		want := []time.Duration{
			800 * time.Millisecond, 2 * time.Second, 4400 * time.Millisecond, 7200 * time.Millisecond,
			12800 * time.Millisecond, 32 * time.Second, 66 * time.Second, 54 * time.Second, 48 * time.Second, time.Minute,
		}
		at := t0
		for i, w := range want {
			if i > 0 {
				clk.AdvanceTo(at)
				o.Wake()
			}
			got := waitQueued(t, st, e.ID, "a failed attempt", func(o store.Outgoing) bool { return o.Attempts == i+1 })
			waitIdle(t, o)
			if d := time.UnixMilli(got.NextTry).Sub(at) - w; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("attempt %d at %v: next try %v later, want %v", i+1, at.Sub(t0), time.UnixMilli(got.NextTry).Sub(at), w)
			}
			if got.LastError != "no route to peer" {
				t.Errorf("attempt %d: last error %q", i+1, got.LastError)
			}
			at = time.UnixMilli(got.NextTry)
		}
		if got := tr.get(a).dials; got != len(want) {
			t.Errorf("%d dials, want %d", got, len(want))
		}
	})
}

// The loop sleeps until the earliest retry, at least 100 ms and at most
// 5 s, then tries what is due.
func TestLoopWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		next time.Duration // the queued message's next try after t0; -1: none
		busy bool          // its recipient's delivery hangs
		want time.Duration // the loop's wake-up after t0
	}{
		{"nothing queued", -1, false, pollWait},
		{"due in 1.5 s", 1500 * time.Millisecond, false, 1500 * time.Millisecond},
		{"due in an hour", time.Hour, false, pollWait},
		{"due now, recipient busy", 0, true, minWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, clk, tr, a := newMemStore(), newFakeClock(), newFakeTransport(), newPeer(t)
			if tc.busy {
				gate := make(chan struct{})
				defer close(gate)
				tr.set(a, func(p *fakePeer) { p.gate = gate })
			}
			if tc.next >= 0 {
				e := enqueue(t, st, "m", a, t0.Add(2*time.Hour))
				if err := st.Retry(e.ID, 0, t0.Add(tc.next).UnixMilli(), ""); err != nil {
					t.Fatal(err)
				}
			}
			o := newTestOutbox(t, st, tr, clk, half)
			start(t, o)
			want := []time.Time{t0.Add(tc.want)}
			waitFor(t, "the loop's timer", func() bool { return slices.Equal(clk.Timers(), want) })
			if tc.next > 0 && tc.next <= pollWait {
				clk.AdvanceTo(want[0])
				waitFor(t, "delivery", func() bool { return len(tr.get(a).got) == 1 })
			}
		})
	}
}

// A failed Send wakes the loop to plan the retry, which it makes on its
// own when the time comes.
func TestLoopRetries(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		tr.set(a, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
		o := newTestOutbox(t, st, tr, clk, half)
		start(t, o)
		timers := func(want ...time.Time) {
			t.Helper()
			waitFor(t, fmt.Sprintf("the loop's timer at %v", want), func() bool { return slices.Equal(clk.Timers(), want) })
		}
		timers(t0.Add(pollWait)) // nothing queued
		m := dm(t, a, 0)
		if ok, err := o.Send(t.Context(), a, m, time.Time{}); ok || err != nil {
			t.Fatalf("Send: %v, %v", ok, err)
		}
		timers(t0.Add(time.Second))
		clk.AdvanceTo(t0.Add(time.Second))
		waitQueued(t, st, m.ID, "the retry", func(o store.Outgoing) bool { return o.Attempts == 2 })
		waitIdle(t, o)
		// The loop may look again 100 ms later, if it planned before the
		// attempt recorded its outcome; it wakes by the retry in any case.
		waitFor(t, "the loop's timer by the next retry", func() bool {
			ts := clk.Timers()
			return len(ts) == 1 && !ts[0].Before(t0.Add(time.Second+minWait)) && !ts[0].After(t0.Add(3*time.Second))
		})
		tr.set(a, func(p *fakePeer) { p.dialErr = nil })
		clk.AdvanceTo(t0.Add(3 * time.Second))
		waitFor(t, "delivery", func() bool { return gone(t, st, m.ID) })
	})
}

// A message that is not delivered by its deadline becomes a dead letter
// whose reason names the last error and the attempts; the last retry is
// at the deadline.
func TestDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		tr.set(a, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
		o := newTestOutbox(t, st, tr, clk, half)
		deadline := t0.Add(2500 * time.Millisecond)
		e := enqueue(t, st, "m", a, deadline)
		start(t, o)
		waitQueued(t, st, e.ID, "attempt 1", func(o store.Outgoing) bool { return o.Attempts == 1 })
		waitIdle(t, o)
		clk.AdvanceTo(t0.Add(time.Second))
		o.Wake()
		got := waitQueued(t, st, e.ID, "attempt 2", func(o store.Outgoing) bool { return o.Attempts == 2 })
		waitIdle(t, o)
		if got.NextTry != deadline.UnixMilli() {
			t.Errorf("next try %v, want the deadline %v", time.UnixMilli(got.NextTry).Sub(t0), deadline.Sub(t0))
		}
		clk.AdvanceTo(deadline)
		o.Wake()
		var d store.DeadLetter
		waitFor(t, "a dead letter", func() bool {
			var ok bool
			d, ok = deadLetter(t, st, e.ID)
			return ok
		})
		if want := "deadline passed before delivery; last error: no route to peer (after 2 attempts)"; d.Reason != want {
			t.Errorf("reason %q, want %q", d.Reason, want)
		}
		if d.DeadAt != deadline.UnixMilli() {
			t.Errorf("dead at %v, want %v", time.UnixMilli(d.DeadAt).Sub(t0), deadline.Sub(t0))
		}
		if !gone(t, st, e.ID) {
			t.Error("still queued")
		}
		if n := tr.get(a).dials; n != 2 {
			t.Errorf("%d dials, want 2: none after the deadline", n)
		}
	})
}

// A refusal whose reason may change (clock_skew), and a failure of the
// recipient (internal, a bad ack), is retried; any other refusal kills the
// message. The text of a refusal does not matter.
func TestRefusal(t *testing.T) {
	cases := []struct {
		name    string
		refusal *protocol.CallError
		retried bool
	}{
		{"clock skew", &protocol.CallError{Code: protocol.CodeRefused, Message: "clock_skew: message created in the future", Reason: "clock_skew"}, true},
		{"clock skew, other text", &protocol.CallError{Code: protocol.CodeRefused, Message: "created ahead of the recipient's clock", Reason: "clock_skew"}, true},
		{"bad signature", &protocol.CallError{Code: protocol.CodeRefused, Message: "bad_signature: bad signature", Reason: "bad_signature"}, false},
		{"bad signature, text like clock skew", &protocol.CallError{Code: protocol.CodeRefused, Message: "clock_skew or not, the signature is bad", Reason: "bad_signature"}, false},
		{"expired", &protocol.CallError{Code: protocol.CodeRefused, Message: "expired: message expired", Reason: "expired"}, false},
		{"no reason", &protocol.CallError{Code: protocol.CodeRefused, Message: "clock_skew: message created in the future"}, false},
		{"storage failure", &protocol.CallError{Code: protocol.CodeInternal, Message: "recipient could not store the message"}, true},
		{"bad ack", &protocol.CallError{Code: protocol.CodeBadRequest, Message: "empty ack"}, true},
	}
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr := newFakeClock(), newFakeTransport()
		o := newTestOutbox(t, st, tr, clk, half)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				a := newPeer(t)
				tr.set(a, func(p *fakePeer) { p.refuse = func([]byte) *protocol.CallError { return tc.refusal } })
				m := dm(t, a, 0)
				if ok, err := o.Send(t.Context(), a, m, time.Time{}); ok || err != nil {
					t.Fatalf("Send: %v, %v; want not delivered", ok, err)
				}
				q, isQueued := queued(t, st, m.ID)
				d, isDead := deadLetter(t, st, m.ID)
				switch {
				case tc.retried && (!isQueued || isDead):
					t.Fatalf("queued %v, dead %v (%s); want it retried", isQueued, isDead, d.Reason)
				case tc.retried:
					if q.Attempts != 1 || q.LastError != tc.refusal.Error() || q.NextTry != t0.Add(time.Second).UnixMilli() {
						t.Errorf("queued after %d attempts, error %q, next try %v; want 1, %q, 1s",
							q.Attempts, q.LastError, time.UnixMilli(q.NextTry).Sub(t0), tc.refusal.Error())
					}
				case isQueued || !isDead:
					t.Fatalf("queued %v (%s), dead %v; want it dead", isQueued, q.LastError, isDead)
				default:
					if want := "refused by recipient: " + tc.refusal.Error() + " (after 0 attempts)"; d.Reason != want {
						t.Errorf("reason %q, want %q", d.Reason, want)
					}
				}
			})
		}
	})
}

// In one batch, each message meets its own fate: delivered, dead, or
// retried.
func TestMixedBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
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
		o := newTestOutbox(t, st, tr, clk, half)
		start(t, o)
		waitQueued(t, st, skewed.ID, "the skewed message retried", func(o store.Outgoing) bool { return o.Attempts == 1 })
		if _, dead := deadLetter(t, st, good.ID); !gone(t, st, good.ID) || dead {
			t.Error("good message not delivered")
		}
		if _, dead := deadLetter(t, st, bad.ID); !dead {
			t.Error("bad message not dead")
		}
		if got := tr.get(a); len(got.sends) != 1 || len(got.got) != 1 || string(got.got[0]) != string(good.Raw) {
			t.Errorf("sends %v, accepted %q; want one send and the good message", got.sends, got.got)
		}
	})
}

// A scan does not try a message again that an attempt which ended since
// the scan read it has put off.
func TestScanSeesRetry(t *testing.T) {
	st, clk, tr, a := newMemStore(), newFakeClock(), newFakeTransport(), newPeer(t)
	tr.set(a, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
	o := newTestOutbox(t, st, tr, clk, half)
	e := enqueue(t, st, "m", a, t0.Add(time.Hour))
	var once sync.Once
	st.afterDue = func() { once.Do(func() { o.flush(t.Context(), a) }) }
	start(t, o)
	waitFor(t, "the scan's end", func() bool { ts := clk.Timers(); return len(ts) > 0 && !ts[0].After(t0.Add(time.Second)) })
	waitIdle(t, o)
	if q, _ := queued(t, st, e.ID); q.Attempts != 1 || tr.get(a).dials != 1 {
		t.Fatalf("%d attempts, %d dials; want 1", q.Attempts, tr.get(a).dials)
	}
}

// A recipient whose delivery hangs holds up no other.
func TestSlowRecipient(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, slow, fast := newFakeClock(), newFakeTransport(), newPeer(t), newPeer(t)
		gate := make(chan struct{})
		defer close(gate)
		tr.set(slow, func(p *fakePeer) { p.gate = gate })
		o := newTestOutbox(t, st, tr, clk, half)
		enqueue(t, st, "to slow", slow, t0.Add(time.Hour))
		start(t, o)
		waitFor(t, "a send to the slow peer", func() bool { return tr.get(slow).inflight == 1 })
		e := enqueue(t, st, "to fast", fast, t0.Add(time.Hour))
		o.Wake()
		waitFor(t, "delivery to the fast peer", func() bool { return gone(t, st, e.ID) })
		if got := tr.get(slow); got.inflight != 1 {
			t.Errorf("slow peer: %d sends in flight, want still 1", got.inflight)
		}
	})
}

// At most one delivery attempt per recipient is in flight, whatever asks
// for more meanwhile; those wait their turn.
func TestOneAttemptPerPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, clk, tr, a := newMemStore(), newFakeClock(), newFakeTransport(), newPeer(t)
		gate := make(chan struct{})
		tr.set(a, func(p *fakePeer) { p.gate = gate })
		o := newTestOutbox(t, st, tr, clk, half)
		first := enqueue(t, st, "first", a, t0.Add(time.Hour))
		start(t, o)
		synctest.Wait()
		if got := tr.get(a); got.inflight != 1 {
			t.Fatalf("%d sends in flight, want 1", got.inflight)
		}
		second := enqueue(t, st, "second", a, t0.Add(time.Hour))
		o.PeerConnected(a)
		o.Wake()
		clk.Advance(time.Second)
		third := dm(t, a, 0)
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			// Another attempt may deliver it, and Send then reports false.
			o.Send(t.Context(), a, third, time.Time{})
		}()
		synctest.Wait()
		if got := tr.get(a); got.maxInflight != 1 || len(got.sends) != 1 {
			t.Fatalf("%d sends, at most %d at once; want 1 while the first hangs", len(got.sends), got.maxInflight)
		}
		close(gate)
		<-sent
		synctest.Wait()
		if !gone(t, st, first.ID) || !gone(t, st, second.ID) || !gone(t, st, third.ID) {
			t.Error("not all delivered")
		}
		if got := tr.get(a); got.maxInflight != 1 {
			t.Errorf("%d sends at once", got.maxInflight)
		}
	})
}

// A recipient that connects gets what is queued for it at once, due or
// not.
func TestPeerConnected(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		tr.set(a, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
		o := newTestOutbox(t, st, tr, clk, half)
		start(t, o)
		waitFor(t, "the loop asleep", func() bool { return slices.Equal(clk.Timers(), []time.Time{t0.Add(pollWait)}) })
		m := dm(t, a, 0)
		if ok, err := o.Send(t.Context(), a, m, time.Time{}); ok || err != nil {
			t.Fatalf("Send: %v, %v", ok, err)
		}
		waitFor(t, "the loop asleep until the retry", func() bool { return slices.Equal(clk.Timers(), []time.Time{t0.Add(time.Second)}) })
		tr.set(a, func(p *fakePeer) { p.dialErr = nil })
		o.PeerConnected(a)
		waitFor(t, "delivery", func() bool { return gone(t, st, m.ID) })
		if got := tr.get(a); len(got.got) != 1 || string(got.got[0]) != string(m.Encode()) {
			t.Errorf("recipient got %d messages", len(got.got))
		}
		if !clk.Now().Equal(t0) {
			t.Errorf("clock moved to %v", clk.Now().Sub(t0))
		}
	})
}

// Send queues the message until its deadline (its TTL, else a day) and
// reports whether the first attempt delivered it.
func TestSend(t *testing.T) {
	cases := []struct {
		name      string
		reachable bool
		ttl       time.Duration
		deadline  time.Time // passed to Send
		want      time.Time // deadline queued
	}{
		{"delivered", true, 0, time.Time{}, time.Time{}},
		{"unreachable", false, 0, time.Time{}, t0.Add(DefaultDeadline)},
		{"unreachable with ttl", false, time.Minute, time.Time{}, t0.Add(time.Minute)},
		{"unreachable with deadline", false, time.Minute, t0.Add(time.Hour), t0.Add(time.Hour)},
	}
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr := newFakeClock(), newFakeTransport()
		o := newTestOutbox(t, st, tr, clk, half)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				a := newPeer(t)
				if !tc.reachable {
					tr.set(a, func(p *fakePeer) { p.dialErr = errors.New("no route to peer") })
				}
				m := dm(t, a, tc.ttl)
				ok, err := o.Send(t.Context(), a, m, tc.deadline)
				if err != nil || ok != tc.reachable {
					t.Fatalf("Send: %v, %v; want %v", ok, err, tc.reachable)
				}
				q, isQueued := queued(t, st, m.ID)
				if tc.reachable {
					if isQueued {
						t.Error("delivered but still queued")
					}
					return
				}
				if !isQueued || q.Deadline != tc.want.UnixMilli() || q.Attempts != 1 || q.To != a.String() || string(q.Raw) != string(m.Encode()) {
					t.Errorf("queued %v: %+v; want deadline %v, 1 attempt", isQueued, q, tc.want.Sub(t0))
				}
			})
		}
	})
}

// Reaching a recipient is given a few seconds in each attempt.
func TestDialTimeout(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		tr.set(a, func(p *fakePeer) { p.dialHang = true })
		o := newTestOutbox(t, st, tr, clk, half)
		e := enqueue(t, st, "m", a, t0.Add(time.Hour))
		start(t, o)
		waitFor(t, "a dial", func() bool { return tr.get(a).dials == 1 })
		clk.Advance(dialWait)
		got := waitQueued(t, st, e.ID, "a failed attempt", func(o store.Outgoing) bool { return o.Attempts == 1 })
		if got.LastError != context.Canceled.Error() || got.NextTry != t0.Add(dialWait+time.Second).UnixMilli() {
			t.Errorf("last error %q, next try %v; want %q, 6s", got.LastError, time.UnixMilli(got.NextTry).Sub(t0), context.Canceled)
		}
	})
}

// Send waits a few seconds at most for the first attempt; a recipient that
// takes longer gets the message later.
func TestSendWait(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		gate := make(chan struct{})
		defer close(gate)
		tr.set(a, func(p *fakePeer) { p.gate = gate })
		o := newTestOutbox(t, st, tr, clk, half)
		m := dm(t, a, 0)
		type result struct {
			ok  bool
			err error
		}
		res := make(chan result, 1)
		go func() {
			ok, err := o.Send(t.Context(), a, m, time.Time{})
			res <- result{ok, err}
		}()
		waitFor(t, "the send", func() bool { return tr.get(a).inflight == 1 })
		clk.Advance(sendWait)
		var r result
		waitFor(t, "Send to return", func() bool {
			select {
			case r = <-res:
				return true
			default:
				return false
			}
		})
		if r.ok || r.err != nil {
			t.Fatalf("Send: %v, %v; want not delivered", r.ok, r.err)
		}
		if q, ok := queued(t, st, m.ID); !ok || q.Attempts != 1 {
			t.Fatalf("queued %v after %d attempts, want 1", ok, q.Attempts)
		}
	})
}

// One attempt sends at most 64 messages on a stream, and goes on with the
// next batch while the recipient acks.
func TestBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, st testStore) {
		clk, tr, a := newFakeClock(), newFakeTransport(), newPeer(t)
		o := newTestOutbox(t, st, tr, clk, half)
		var es []store.Outgoing
		for i := range 130 {
			es = append(es, enqueue(t, st, "m"+string(rune('A'+i/26))+string(rune('a'+i%26)), a, t0.Add(time.Hour)))
		}
		start(t, o)
		waitFor(t, "delivery", func() bool { return len(tr.get(a).got) == len(es) })
		if got := tr.get(a).sends; !slices.Equal(got, []int{64, 64, 2}) {
			t.Errorf("sends of %v messages, want [64 64 2]", got)
		}
		waitFor(t, "an empty outbox", func() bool { q, _ := st.Pending("", 1); return len(q) == 0 })
	})
}

// Run returns when its ctx ends, once the attempts it started have ended.
func TestRunWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, clk, tr, a := newMemStore(), newFakeClock(), newFakeTransport(), newPeer(t)
		gate := make(chan struct{})
		tr.set(a, func(p *fakePeer) { p.gate, p.ignoreCtx = gate, true })
		o := newTestOutbox(t, st, tr, clk, half)
		enqueue(t, st, "m", a, t0.Add(time.Hour))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.Run(ctx)
		}()
		synctest.Wait()
		if tr.get(a).inflight != 1 {
			t.Fatal("no send in flight")
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned while a send was in flight")
		default:
		}
		close(gate)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return")
		}
	})
}
