package reconcile

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/metrics"

	"github.com/weftmesh/weft/protocol"
)

// TestSyncUnion: after one session started by a, both sides hold the union
// of their sets, and each received exactly what it lacked.
func TestSyncUnion(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	cases := []struct {
		name                 string
		shared, onlyA, onlyB int
	}{
		{"both empty", 0, 0, 0},
		{"late joiner", 0, 0, 3000},
		{"initiator has all", 0, 3000, 0},
		{"one missing of 3000", 2999, 0, 1},
		{"one new on each side", 3000, 1, 1},
		{"both sides sent 300 apart", 2000, 300, 300},
		{"disjoint", 0, 400, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newNode(t), newNode(t)
			shared := au.chain(t, tc.shared, 0)
			onlyA := au.chain(t, tc.onlyA, time.Duration(tc.shared)*time.Millisecond)
			// b's messages interleave in time with a's.
			onlyB := au.chain(t, tc.onlyB, time.Duration(tc.shared)*time.Millisecond+time.Microsecond*500)
			stats := syncSets(t, a, b, slices.Concat(shared, onlyA), slices.Concat(shared, onlyB))
			want := a.st.ids(testSpace)
			if got := b.st.ids(testSpace); !slices.Equal(got, want) {
				t.Fatalf("after sync: a has %d, b has %d messages", len(want), len(got))
			}
			if len(want) != tc.shared+tc.onlyA+tc.onlyB {
				t.Fatalf("a has %d messages, want %d", len(want), tc.shared+tc.onlyA+tc.onlyB)
			}
			if stats.Received != tc.onlyB || stats.Sent != tc.onlyA {
				t.Errorf("a received %d and sent %d, want %d and %d", stats.Received, stats.Sent, tc.onlyB, tc.onlyA)
			}
			if inSync := tc.onlyA == 0 && tc.onlyB == 0; (stats.InSync == 1) != inSync {
				t.Errorf("InSync = %d, want %v", stats.InSync, inSync)
			}
			t.Logf("%+v", stats)
		})
	}
}

// TestInSyncCostIsConstant: a session between equal sets is one small frame
// each way, whether the space holds 10 or 5,000 messages.
func TestInSyncCostIsConstant(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	var bytes []int64
	for _, n := range []int{10, 5000} {
		bw := metrics.NewBandwidthCounter()
		a, b := newNodeOn(t, newHost(t, libp2p.BandwidthReporter(bw))), newNode(t)
		msgs := au.chain(t, n, 0)
		stats := syncSets(t, a, b, msgs, msgs)
		if stats.InSync != 1 || stats.Rounds != 0 {
			t.Fatalf("%d messages: %+v, want in sync at hello", n, stats)
		}
		bytes = append(bytes, stats.BytesSent+stats.BytesReceived)
		// The stream as libp2p counts it: sync frames plus protocol
		// negotiation (not yamux and noise framing).
		deadline := time.Now().Add(10 * time.Second)
		var st metrics.Stats
		for st = bw.GetBandwidthForProtocol(Protocol); st.TotalIn == 0 && time.Now().Before(deadline); st = bw.GetBandwidthForProtocol(Protocol) {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%d messages in sync: sync frames %d bytes sent, %d received; stream with negotiation %d out, %d in",
			n, stats.BytesSent, stats.BytesReceived, st.TotalOut, st.TotalIn)
	}
	if bytes[1]-bytes[0] > 4 || bytes[1] > 200 { // only the count's varint grows
		t.Errorf("in-sync session bytes %v: want the same (but for the count's varint) and under 200", bytes)
	}
}

// TestCostFollowsDifference: one missing message costs about the same
// bytes in a space of 500 as in one of 20,000 (log of the size, not the size).
func TestCostFollowsDifference(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	var bytes []int64
	for _, n := range []int{500, 20000} {
		msgs := au.chain(t, n, 0)
		a, b := newNode(t), newNode(t)
		stats := syncSets(t, a, b, msgs, slices.Concat(msgs[:n/2], msgs[n/2+1:]))
		if stats.Sent != 1 || len(b.st.ids(testSpace)) != n {
			t.Fatalf("%d messages: %+v; b has %d", n, stats, len(b.st.ids(testSpace)))
		}
		bytes = append(bytes, stats.BytesSent+stats.BytesReceived)
		t.Logf("1 missing of %d: %d rounds, %d bytes sent, %d received", n, stats.Rounds, stats.BytesSent, stats.BytesReceived)
	}
	if bytes[1] > 8<<10 {
		t.Errorf("1 missing of 20,000 cost %d bytes, want under 8 KiB", bytes[1])
	}
}

// TestWindow: with a window, only recent history is exchanged.
func TestWindow(t *testing.T) {
	t.Parallel()
	au := newAuthor(t) // base is an hour ago
	a := newNode(t, WithWindow(30*time.Minute))
	b := newNode(t)
	connect(t, a.h, b.h)
	old := au.chain(t, 100, 0)
	recent := au.chain(t, 100, 45*time.Minute)
	addAll(b.st, old)
	addAll(b.st, recent)
	addAll(a.st, au.chain(t, 10, time.Minute)) // a's own old ones stay with a
	if _, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace); err != nil {
		t.Fatal(err)
	}
	got := a.st.ids(testSpace)
	if len(got) != 110 {
		t.Fatalf("a has %d messages, want its 10 and the 100 recent", len(got))
	}
	for _, m := range recent {
		if ok, _ := a.st.Has(m.ID); !ok {
			t.Fatalf("recent message %s not fetched", m.ID)
		}
	}
	if n := len(b.st.ids(testSpace)); n != 200 {
		t.Errorf("b has %d messages, want its 200 (a's old ones are outside the window)", n)
	}
}

// TestExpiredAreDropped: a message that has expired by the receiver's clock
// is not stored, and the peer that sent it is not refused for it.
func TestExpiredAreDropped(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	live := au.msg(t, testSpace, 0, 0)
	dead := au.msg(t, testSpace, time.Millisecond, time.Minute) // created an hour ago
	b.st.add(live)
	b.st.add(dead)
	stats, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.st.Has(dead.ID); ok {
		t.Error("expired message stored")
	}
	if ok, _ := a.st.Has(live.ID); !ok || stats.Dropped != 1 {
		t.Errorf("live stored %v, stats %+v", ok, stats)
	}
	if _, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace); errors.Is(err, ErrRefused) {
		t.Errorf("peer refused after serving an expired message: %v", err)
	}
}

// TestNotMember: a peer that has not joined the space says so.
func TestNotMember(t *testing.T) {
	t.Parallel()
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	b.svc.Leave(testSpace)
	if _, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace); err == nil {
		t.Fatal("sync with a non-member succeeded")
	}
	other := protocol.SpaceID("never joined")
	if _, err := a.svc.Sync(syncCtx(t), b.h.ID(), other); err == nil {
		t.Fatal("sync of a space this node has not joined succeeded")
	}
}

// TestTriggerCoalesces: triggers while a session runs fold into one more
// session, and everything converges.
func TestTriggerCoalesces(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	addAll(b.st, au.chain(t, 2000, 0))
	for range 50 {
		a.svc.Trigger(b.h.ID(), testSpace)
	}
	deadline := time.Now().Add(time.Minute)
	for len(a.st.ids(testSpace)) != 2000 || !a.svc.Idle() || !b.svc.Idle() {
		if time.Now().After(deadline) {
			t.Fatalf("a has %d of 2000 messages", len(a.st.ids(testSpace)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := a.svc.Totals().Sessions; n > 2 {
		t.Errorf("50 triggers ran %d sessions, want at most 2", n)
	}
}

// TestConcurrentSessionsBothWays: two nodes starting sessions with each
// other at the same time (each space runs one session at a time, and a
// busy responder says so) all finish, and both end with the union.
func TestConcurrentSessionsBothWays(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	addAll(a.st, au.chain(t, 500, 0))
	addAll(b.st, au.chain(t, 500, time.Second))
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 5 {
		wg.Go(func() { _, err := a.svc.SyncRetrying(syncCtx(t), b.h.ID(), testSpace); errs <- err })
		wg.Go(func() { _, err := b.svc.SyncRetrying(syncCtx(t), a.h.ID(), testSpace); errs <- err })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if na, nb := len(a.st.ids(testSpace)), len(b.st.ids(testSpace)); na != 1000 || nb != 1000 {
		t.Fatalf("a has %d, b has %d messages, want 1000 each", na, nb)
	}
	if got := a.svc.Totals().Received + b.svc.Totals().Received; got != 1000 {
		t.Errorf("%d messages fetched in all, want each of the 1000 once", got)
	}
}

// TestPrevInAnotherSpace: a message whose prev names a message of another
// space is synced; the foreign parent is asked for, reported missing (sync
// serves a space only its own messages) and nobody is refused.
func TestPrevInAnotherSpace(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	other := protocol.SpaceID("other")
	a, b := newNode(t), newNode(t)
	b.svc.Join(other, b.st)
	p := au.msg(t, other, 0, 0)
	m := au.msg(t, testSpace, time.Millisecond, 0, p.ID)
	stats := syncSets(t, a, b, nil, []*protocol.Message{p, m})
	if ok, _ := a.st.Has(m.ID); !ok || stats.Received != 1 {
		t.Fatalf("message not fetched: %+v", stats)
	}
	if ok, _ := a.st.Has(p.ID); ok {
		t.Error("a message of another space was served")
	}
	if a.svc.isRefused(b.h.ID()) || b.svc.isRefused(a.h.ID()) {
		t.Error("an honest peer was refused")
	}
}

// TestRangeBudget: when the ranges to answer do not fit one exchange, the
// rest is answered next turn, and the sides still converge (a large,
// scattered difference stays under the frame limit).
func TestRangeBudget(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	small := func(c *config) error { c.rangeBudget = 2 << 10; return nil }
	a, b := newNode(t, small), newNode(t, small)
	all := au.chain(t, 4000, 0)
	var onA, onB []*protocol.Message
	for i, m := range all {
		switch i % 50 {
		case 7:
			onA = append(onA, m)
		case 31:
			onB = append(onB, m)
		default:
			onA, onB = append(onA, m), append(onB, m)
		}
	}
	stats := syncSets(t, a, b, onA, onB)
	if got := a.st.ids(testSpace); len(got) != 4000 || !slices.Equal(got, b.st.ids(testSpace)) {
		t.Fatalf("a has %d, b has %d messages, want 4000 each", len(got), len(b.st.ids(testSpace)))
	}
	if stats.Deferred == 0 {
		t.Errorf("no range was deferred with a 2 KiB budget: %+v", stats)
	}
	t.Logf("%+v", stats)
}

// TestWindowStillInSync: with a sync window, two members whose clocks
// differ a little still settle equal sets in the hello (floors taken from
// clocks are rounded to the minute).
func TestWindowStillInSync(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	// Keep both clocks away from a minute boundary so the 20 ms skew
	// cannot straddle one.
	base := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	clockA := func() time.Time { return base }
	clockB := func() time.Time { return base.Add(20 * time.Millisecond) }
	a := newNode(t, WithWindow(2*time.Hour), WithClock(clockA))
	b := newNode(t, WithWindow(2*time.Hour), WithClock(clockB))
	msgs := au.chain(t, 100, 0)
	stats := syncSets(t, a, b, msgs, msgs)
	if stats.InSync != 1 {
		t.Fatalf("equal sets under a window: %+v, want in sync at hello", stats)
	}
}
