package mesh

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// slowFirstSink is a GossipBatchSink and Gate whose authors are strangers
// until it is handed its first batch, which it is slow to store: a known
// author's next message in the members' queue would be handed over
// before it.
type slowFirstSink struct {
	batches atomic.Int64
	mu      sync.Mutex
	got     []protocol.ID
}

func (s *slowFirstSink) Deliver(ctx context.Context, m *protocol.Message) error {
	errs := s.DeliverGossip(ctx, []*protocol.Message{m})
	return errs[0]
}

func (s *slowFirstSink) DeliverGossip(_ context.Context, ms []*protocol.Message) []error {
	if s.batches.Add(1) == 1 {
		time.Sleep(300 * time.Millisecond) // the store is slow this once
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		s.got = append(s.got, m.ID)
	}
	return make([]error, len(ms))
}

func (s *slowFirstSink) Known(protocol.ID, peer.ID) bool { return s.batches.Load() > 0 }
func (s *slowFirstSink) Admit(*protocol.Message) error   { return nil }

func (s *slowFirstSink) ids() []protocol.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// TestAuthorOrderAcrossQueues: an author that becomes known while its
// first message waits in the strangers' queue has its next ones handed
// over after it, in the order they came, not before it from the members'
// queue (a follower saw a reply before what it answers so).
func TestAuthorOrderAcrossQueues(t *testing.T) {
	space := protocol.SpaceID("test/order")
	sink := &slowFirstSink{}
	a, ka := orderPair(t, space, Config{}, sink)
	var sent []protocol.ID
	prev := []protocol.ID(nil)
	for i := range 3 {
		m := sign(t, ka, space, fmt.Sprint("message ", i), func(d *protocol.Draft) { d.Prev = prev })
		if err := a.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		sent, prev = append(sent, m.ID), []protocol.ID{m.ID}
		if i == 0 {
			// The first, from a stranger, is being stored: the author is
			// known from now on.
			waitFor(t, 10*time.Second, "b's first batch", func() bool { return sink.batches.Load() > 0 })
		}
	}
	waitFor(t, 10*time.Second, "b to take the three", func() bool { return len(sink.ids()) == 3 })
	if got := sink.ids(); !slices.Equal(got, sent) {
		t.Fatalf("b took %v, want them in the order sent %v", got, sent)
	}
}

// orderSink keeps the order it is handed messages in; every author is
// known.
type orderSink struct{ slowFirstSink }

func (s *orderSink) DeliverGossip(_ context.Context, ms []*protocol.Message) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		s.got = append(s.got, m.ID)
	}
	return make([]error, len(ms))
}

func (s *orderSink) Deliver(ctx context.Context, m *protocol.Message) error {
	return s.DeliverGossip(ctx, []*protocol.Message{m})[0]
}

func (*orderSink) Known(protocol.ID, peer.ID) bool { return true }

// TestPeerOrderKept: a burst of one peer's messages is handed over in the
// order it published them (gossipsub validated them on one worker per
// CPU, and two of one RPC could pass each other).
func TestPeerOrderKept(t *testing.T) {
	space := protocol.SpaceID("test/peer-order")
	sink := &orderSink{}
	a, ka := orderPair(t, space, Config{Rates: RateLimits{Off: true}}, sink)
	const n = 200
	at := make(map[protocol.ID]int, n)
	for i := range n {
		m := sign(t, ka, space, fmt.Sprint("burst ", i), nil)
		if err := a.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		at[m.ID] = i
	}
	// A burst may lose some on the way (queues; sync's job, off here): the
	// order of those that came is the point.
	deadline := time.Now().Add(10 * time.Second)
	for len(sink.ids()) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := sink.ids()
	if len(got) < n/2 {
		t.Fatalf("b took only %d of %d", len(got), n)
	}
	back := 0
	for i := 1; i < len(got); i++ {
		if at[got[i]] < at[got[i-1]] {
			back++
		}
	}
	if back > 0 {
		t.Fatalf("of the %d messages b took, %d came before one published earlier", len(got), back)
	}
}

// orderPair starts meshes a and b with cfg, joined to space (b with
// sink), and waits until each has the other in its gossip mesh; it
// returns a and a's key.
func orderPair(t *testing.T, space protocol.ID, cfg Config, sink Sink) (*Mesh, crypto.PrivKey) {
	t.Helper()
	a, ka := newTestMesh(t, cfg)
	b, _ := newTestMesh(t, cfg, a)
	if err := a.JoinSpace(space, newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := b.JoinSpace(space, sink); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "gossip mesh", func() bool {
		return containsPeer(a.meshPeers(space), b.ID()) && containsPeer(b.meshPeers(space), a.ID())
	})
	return a, ka
}
