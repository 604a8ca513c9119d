package reconcile

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// gate is a sink that holds every delivery until it is opened.
type gate struct {
	*memStore
	open chan struct{}
}

func (g *gate) Deliver(ctx context.Context, m *protocol.Message) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.memStore.Deliver(ctx, m)
}

// TestSpaceState: while a joiner's session runs, SpaceState says so with
// how many messages it still has to fetch; after it, the space reads as
// synced just now, with nothing left and what was fetched.
func TestSpaceState(t *testing.T) {
	t.Parallel()
	const n = 300
	a, b := newNode(t), newNode(t)
	g := &gate{memStore: a.st, open: make(chan struct{})}
	a.svc.Join(testSpace, g)
	connect(t, a.h, b.h)
	addAll(b.st, newAuthor(t).chain(t, n, 0))

	if st, ok := a.svc.SpaceState(testSpace); !ok || st != (SpaceState{}) {
		t.Fatalf("before any session: %+v, %v", st, ok)
	}
	if _, ok := a.svc.SpaceState(protocol.SpaceID("not joined")); ok {
		t.Fatal("SpaceState of a space not joined: ok")
	}
	start := time.Now()
	var wg sync.WaitGroup
	var stats Stats
	var err error
	wg.Go(func() { stats, err = a.svc.Sync(syncCtx(t), b.h.ID(), testSpace) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := a.svc.SpaceState(testSpace)
		if st.Running && st.Left > 0 {
			if st.Left > n {
				t.Errorf("running: %d left, more than the %d b holds", st.Left, n)
			}
			break
		}
		if time.Now().After(deadline) {
			close(g.open)
			wg.Wait()
			t.Fatalf("never seen catching up: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(g.open)
	wg.Wait()
	if err != nil || stats.Received != n {
		t.Fatalf("Sync: %+v, %v", stats, err)
	}
	st, _ := a.svc.SpaceState(testSpace)
	if st.Running || st.Left != 0 || st.LastReceived != n || st.LastPeer != b.h.ID() || st.LastErr != "" ||
		st.LastEnd.Before(start) || st.LastEnd.After(time.Now()) {
		t.Errorf("after the session: %+v", st)
	}
	// The responder's side records the session too.
	if bs, _ := b.svc.SpaceState(testSpace); bs.LastEnd.IsZero() || bs.LastPeer != a.h.ID() || bs.Running {
		t.Errorf("responder after the session: %+v", bs)
	}
	// A failed session is recorded with its error.
	b.svc.Leave(testSpace)
	if _, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace); err == nil {
		t.Fatal("Sync with a peer that left the space: no error")
	}
	if st, _ := a.svc.SpaceState(testSpace); st.LastErr == "" || st.Running {
		t.Errorf("after a failed session: %+v", st)
	}
}

// TestSpaceStateBudget: a joiner whose peer runs out of its session budget
// reads as catching up after the session, with at least what it still
// lacks left.
func TestSpaceStateBudget(t *testing.T) {
	t.Parallel()
	msgs := newAuthor(t).chain(t, 400, 0)
	size := int64(len(msgs[0].Encode()))
	a := newNode(t)
	b := newNode(t, WithSessionBytes(100*size))
	connect(t, a.h, b.h)
	addAll(b.st, msgs)
	stats, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := a.svc.SpaceState(testSpace)
	lacks := len(msgs) - len(a.st.ids(testSpace))
	if stats.Received == 0 || lacks == 0 || st.Left < lacks || st.LastReceived != stats.Received {
		t.Errorf("after a session cut short by the peer's budget: %+v (stats %+v), a lacks %d", st, stats, lacks)
	}
}

// TestSpaceStateCountsPostponed: a joiner with room to ask for 100 IDs at
// once, fetching 1,000 messages that name no parent, reads as lacking
// more than those 100 while its deliveries are held: what it put off for
// want of room counts too. After the session, nothing is left.
func TestSpaceStateCountsPostponed(t *testing.T) {
	t.Parallel()
	const n, room = 1000, 100
	a, b := newNode(t, roomFor(room)), newNode(t)
	g := &gate{memStore: a.st, open: make(chan struct{})}
	a.svc.Join(testSpace, g)
	connect(t, a.h, b.h)
	addAll(b.st, newAuthor(t).loose(t, n))
	var wg sync.WaitGroup
	var stats Stats
	var err error
	wg.Go(func() { stats, err = a.svc.Sync(syncCtx(t), b.h.ID(), testSpace) })
	var seen int
	for deadline := time.Now().Add(20 * time.Second); ; {
		st, _ := a.svc.SpaceState(testSpace)
		seen = max(seen, st.Left)
		if st.Running && st.Left > room || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(g.open)
	wg.Wait()
	if err != nil || stats.Received != n || stats.Postponed == 0 {
		t.Fatalf("Sync: %+v, %v", stats, err)
	}
	if seen <= room || seen > n {
		t.Errorf("at most %d seen left while catching up with %d to fetch and room for %d", seen, n, room)
	}
	if st, _ := a.svc.SpaceState(testSpace); st.Left != 0 || st.LastReceived != n {
		t.Errorf("after the session: %+v", st)
	}
}
