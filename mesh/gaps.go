package mesh

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Gap repair. A gossiped message whose parent this node lacks reveals a
// gap, but usually not a real one: gossip brings a busy space's messages
// out of order (and the receive workers store them concurrently), so the
// parent arrives milliseconds later. Starting a sync at once for each such
// message made a sync storm at 500 msg/s: ~150 sessions per daemon in
// 20 s, colliding with each other ("peer busy"). So a gap waits gapDelay
// for its parents; only those still missing then start a repair, with
// each peer that relayed a child of theirs (Trigger runs one session per
// peer and space at a time, and this node's sessions of a space queue).

// gapDelay is how long a gap waits for gossip to bring the missing parents.
const gapDelay = 300 * time.Millisecond

// maxGapParents bounds the missing parents a space's pending gap records
// (any one still missing is enough to repair).
const maxGapParents = 64

// gaps is a space's pending gap: parents found missing since it was armed,
// each with the peer that relayed its child.
type gaps struct {
	mu      sync.Mutex
	armed   bool
	missing []gapParent
}

type gapParent struct {
	id   protocol.ID
	from peer.ID
}

// repairGap notes msg's missing parents, if any, and arms the space's gap
// check: after gapDelay, parents still missing make one repair session.
// It runs on the space's receive workers, so s.wg is in use and may grow.
func (m *Mesh) repairGap(ctx context.Context, s *space, msg *protocol.Message, from peer.ID) {
	if m.sync == nil {
		return
	}
	var missing []protocol.ID
	for _, p := range msg.Prev {
		if has, err := m.history.Has(p); err == nil && !has {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	g := &s.gaps
	if !g.note(missing, from) {
		return // armed already: its check will see these too
	}
	s.wg.Go(func() {
		t := time.NewTimer(gapDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		for _, p := range stillMissing(g.take(), m.history.Has) {
			m.sync.Trigger(p, s.id)
		}
	})
}

// note records missing parents relayed by from and reports whether the
// gap check must be armed (it was not).
func (g *gaps) note(missing []protocol.ID, from peer.ID) (arm bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range missing {
		if len(g.missing) < maxGapParents {
			g.missing = append(g.missing, gapParent{p, from})
		}
	}
	arm = !g.armed
	g.armed = true
	return arm
}

// take returns the parents noted and disarms the check.
func (g *gaps) take() []gapParent {
	g.mu.Lock()
	defer g.mu.Unlock()
	pending := g.missing
	g.missing, g.armed = nil, false
	return pending
}

// stillMissing returns the peers to repair from, each once: the relays of
// the parents that have still not arrived, in the order noted. (One of
// them may lack the parent too: the relay of a child need not hold its
// parent, so asking only the first left gaps open until the next
// periodic sync.)
func stillMissing(pending []gapParent, has func(protocol.ID) (bool, error)) []peer.ID {
	var peers []peer.ID
	for _, p := range pending {
		if slices.Contains(peers, p.from) {
			continue
		}
		if ok, err := has(p.id); err == nil && !ok {
			peers = append(peers, p.from)
		}
	}
	return peers
}
