package reconcile

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestJoinerAsksNoLookups: a node that holds nothing of a space fetches
// it all without asking its store, ID by ID, whether it holds each one
// listed (it holds nothing there); a node that holds part of it still
// asks only for what it lacks.
func TestJoinerAsksNoLookups(t *testing.T) {
	const n = 3000
	a, b := newNode(t), newNode(t)
	msgs := newAuthor(t).loose(t, n)
	stats := syncSets(t, a, b, nil, msgs)
	if stats.Received != n || len(a.st.ids(testSpace)) != n {
		t.Fatalf("received %d, holds %d; want %d", stats.Received, len(a.st.ids(testSpace)), n)
	}
	a.st.mu.Lock()
	has := a.st.has
	a.st.mu.Unlock()
	if has > 100 { // the peer's heads are looked up, not every message
		t.Fatalf("the joiner looked up %d IDs in its store for %d messages", has, n)
	}

	// Holding every other message of a fresh space, a node asks for the
	// rest only.
	c, d := newNode(t), newNode(t)
	var half []*protocol.Message
	for i, m := range msgs {
		if i%2 == 0 {
			half = append(half, m)
		}
	}
	stats = syncSets(t, c, d, half, msgs)
	if stats.Received != n-len(half) || len(c.st.ids(testSpace)) != n {
		t.Fatalf("received %d, holds %d; want %d new, %d held", stats.Received, len(c.st.ids(testSpace)), n-len(half), n)
	}
}

// batchedStore is a memStore that also reads many messages at once
// (WireBatcher), as store.Store does.
type batchedStore struct {
	*memStore
	calls    atomic.Int64
	maxLimit atomic.Int64 // the largest limit asked for
}

func (s *batchedStore) Wires(space protocol.ID, ids []protocol.ID, limit int) ([][]byte, error) {
	s.calls.Add(1)
	if int64(limit) > s.maxLimit.Load() {
		s.maxLimit.Store(int64(limit))
	}
	var out [][]byte
	read := 0
	for _, id := range ids {
		if read >= limit && len(out) > 0 {
			break
		}
		w, ok, err := s.Wire(space, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			w = nil
		}
		out = append(out, w)
		read += len(w)
	}
	return out, nil
}

// TestWiresSendAsWire: a responder whose store reads an exchange's
// messages at once sends what one reading them one by one sends: the same
// messages within the same exchange and session budgets, and the rest
// answered missing.
func TestWiresSendAsWire(t *testing.T) {
	t.Parallel()
	msgs := newAuthor(t).chain(t, 300, 0)
	size := int64(len(msgs[0].Encode()))
	small := func(c *config) error { c.msgBudget = int(8 * size); return nil } // a few messages an exchange
	run := func(st Store, sink *memStore) (Stats, int) {
		a := newNode(t, small)
		hb := newHost(t)
		svc, err := New(hb, st, small, WithSessionBytes(100*size))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close() })
		svc.Join(testSpace, sink)
		connect(t, a.h, hb)
		stats, err := a.svc.Sync(syncCtx(t), hb.ID(), testSpace)
		if err != nil {
			t.Fatal(err)
		}
		return stats, len(a.st.ids(testSpace))
	}
	one := newMemStore()
	addAll(one, msgs)
	batched := &batchedStore{memStore: newMemStore()}
	addAll(batched.memStore, msgs)
	wantStats, wantHeld := run(one, one)
	gotStats, gotHeld := run(batched, batched.memStore)
	if batched.calls.Load() == 0 {
		t.Fatal("the batched read was not used")
	}
	if gotHeld != wantHeld || gotStats.Received != wantStats.Received || gotStats.Missing != wantStats.Missing {
		t.Fatalf("read at once: holds %d, %+v; one by one: holds %d, %+v", gotHeld, gotStats, wantHeld, wantStats)
	}
	if wantStats.Missing == 0 || wantHeld >= len(msgs) || wantHeld < 50 {
		t.Fatalf("one session with a budget of ~100 messages got %d: %+v", wantHeld, wantStats)
	}
}

// TestSendsSmallExchanges: a responder sends a large history in exchanges
// of about 1 MiB of messages, not the 4 MiB a peer accepts, so a joiner
// holds little of it at once; the joiner gets all of it.
func TestSendsSmallExchanges(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	pad := strings.Repeat("x", 4000)
	var msgs []*protocol.Message
	for i := range 800 { // ~3.3 MB
		m, err := protocol.Sign(au.key, protocol.Draft{
			Space: testSpace, CreatedAt: au.base.Add(time.Duration(i) * time.Millisecond), Type: "text",
			Content: fmt.Appendf(nil, `{"text":"%d %s"}`, i, pad),
		}, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	a := newNode(t)
	src := &batchedStore{memStore: newMemStore()}
	addAll(src.memStore, msgs)
	hb := newHost(t)
	svc, err := New(hb, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	svc.Join(testSpace, src.memStore)
	connect(t, a.h, hb)
	stats, err := a.svc.Sync(syncCtx(t), hb.ID(), testSpace)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Received != len(msgs) {
		t.Fatalf("received %d of %d: %+v", stats.Received, len(msgs), stats)
	}
	if got := src.maxLimit.Load(); got > 1<<20 || src.calls.Load() < 3 {
		t.Fatalf("the responder read up to %d bytes for an exchange, in %d reads; want at most 1 MiB, in 3 or more", got, src.calls.Load())
	}

	// A peer that sends 4 MiB exchanges (as nodes did before) is served
	// in full.
	c := newNode(t)
	old := &batchedStore{memStore: src.memStore}
	hd := newHost(t)
	big := func(c *config) error { c.msgBudget = frameMessageBytes; return nil }
	svc2, err := New(hd, old, big)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc2.Close() })
	svc2.Join(testSpace, src.memStore)
	connect(t, c.h, hd)
	stats, err = c.svc.Sync(syncCtx(t), hd.ID(), testSpace)
	if err != nil || stats.Received != len(msgs) || old.calls.Load() >= src.calls.Load() {
		t.Fatalf("from a peer sending 4 MiB at once: received %d of %d in %d reads: %v", stats.Received, len(msgs), old.calls.Load(), err)
	}
}
