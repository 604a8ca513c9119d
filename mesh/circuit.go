package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Circuit members (see circuitPeers).
const (
	// maxCircuitPeers bounds a space's circuit members.
	maxCircuitPeers = 32
	// circuitGap is the least time between two rounds of syncs with a
	// space's circuit members: publications meanwhile share the next round.
	circuitGap = 250 * time.Millisecond
	// circuitFailures is how many sessions in a row may fail (a busy
	// peer's, a timed-out one's) before a circuit member is dropped.
	circuitFailures = 3
)

// circuitPeers are the members of a space whose only connection to this
// node is a limited one: a circuit through a relay, as between two nodes
// behind NATs that hole punching cannot cross (a symmetric one). gossipsub
// takes no peer it is connected to only so (it waits for a direct
// connection), so such a member never shows in the space's topic, and
// neither gossip nor sync, which picks its peers from the topic, would
// carry a message between the two. Sync runs over circuits, so the mesh
// carries the space to its circuit members by sync instead: a round of
// sessions after the messages this node publishes (at most one round per
// circuitGap), and every sync interval.
//
// A peer becomes a circuit member of a space while its connection is
// limited and the space's access rule (Config.SpaceAccess) lets it take
// part: when a sync session for the space with it ends well (either side),
// or when the space's rendezvous finds it. It stops being one when that
// is no longer so (it went away, a direct connection brought it into the
// topic, it lost access) and when circuitFailures sessions with it in a
// row fail. The set is
// bounded (maxCircuitPeers): a peer that would overflow it is not taken.
type circuitPeers struct {
	mu sync.Mutex
	m  map[peer.ID]int // → sessions failed in a row
	// due wakes the space's circuit loop for a round (see Mesh.circuitLoop).
	due chan struct{}
}

// add takes p in and reports whether it was new.
func (c *circuitPeers) add(p peer.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[p]; ok {
		c.m[p] = 0 // a session went well
		return false
	}
	if len(c.m) >= maxCircuitPeers {
		return false
	}
	if c.m == nil {
		c.m = make(map[peer.ID]int)
	}
	c.m[p] = 0
	return true
}

// failed counts a failed session with p, and lets p go after
// circuitFailures in a row.
func (c *circuitPeers) failed(p peer.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.m[p]; ok {
		if n+1 >= circuitFailures {
			delete(c.m, p)
		} else {
			c.m[p] = n + 1
		}
	}
}

// keep drops every peer for which still is false and returns the others.
func (c *circuitPeers) keep(still func(peer.ID) bool) []peer.ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []peer.ID
	for p := range c.m {
		if still(p) {
			out = append(out, p)
		} else {
			delete(c.m, p)
		}
	}
	return out
}

// wake asks for a round of syncs with the circuit members, unless one is
// asked for already.
func (c *circuitPeers) wake() {
	select {
	case c.due <- struct{}{}:
	default:
	}
}

// circuitPeer reports whether p may be a circuit member of space now: its
// only connections are limited ones, and it may take part in the space.
func (m *Mesh) circuitPeer(space protocol.ID, p peer.ID) bool {
	return p != m.h.ID() && m.h.Network().Connectedness(p) == network.Limited &&
		(m.spaceAccess == nil || m.spaceAccess(space, p))
}

// sessionEnded is told of every sync session for a joined space: one that
// ended well makes its peer a circuit member (if it is one, see
// circuitPeer), one that failed counts towards dropping it.
func (m *Mesh) sessionEnded(space protocol.ID, p peer.ID, err error) {
	if err == nil {
		m.noteCircuit(space, p)
		return
	}
	if s := m.joined(space); s != nil {
		s.circuit.failed(p)
	}
}

// joined returns the joined space, or nil.
func (m *Mesh) joined(space protocol.ID) *space {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.spaces[space]
}

// noteCircuit takes p in as a circuit member of space if it may be one,
// and syncs with it at once when it is new.
func (m *Mesh) noteCircuit(space protocol.ID, p peer.ID) {
	if m.sync == nil || !m.circuitPeer(space, p) {
		return
	}
	if s := m.joined(space); s != nil && s.circuit.add(p) {
		m.log.Debug("space member reached through a circuit: synced instead of gossiped", "space", space, "peer", p)
		m.sync.Trigger(p, space)
	}
}

// syncCircuits syncs the space with each of its circuit members.
func (m *Mesh) syncCircuits(s *space) {
	if m.sync == nil {
		return
	}
	for _, p := range s.circuit.keep(func(p peer.ID) bool { return m.circuitPeer(s.id, p) }) {
		m.sync.Trigger(p, s.id)
	}
}

// circuitLoop runs the rounds of syncs with the space's circuit members
// that publications ask for (circuitPeers.wake), at most one per
// circuitGap, until ctx ends.
func (m *Mesh) circuitLoop(ctx context.Context, s *space) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.circuit.due:
		}
		m.syncCircuits(s)
		select {
		case <-ctx.Done():
			return
		case <-time.After(circuitGap):
		}
	}
}
