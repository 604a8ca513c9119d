package mesh

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// maxCircuitPeers bounds a space's circuit members (see circuitPeers).
const maxCircuitPeers = 32

// circuitPeers are the members of a space whose only connection to this
// node is a limited one: a circuit through a relay, as between two nodes
// behind NATs that hole punching cannot cross (a symmetric NAT). gossipsub
// takes no peer it is connected to only so (it waits for a direct
// connection), so such a member never shows in the space's topic, and
// neither gossip nor sync, which picks its peers from the topic, would
// carry a message between the two. Sync runs over circuits, so the mesh
// carries the space to its circuit members by sync instead: after each
// message this node publishes, and every sync interval.
//
// A peer becomes a circuit member of a space when a sync session for the
// space with it succeeds (either side: the peer's access to the space was
// checked), or when the space's rendezvous finds it, while its connection
// is limited. It stops being one once that is no longer so (it went away,
// or a direct connection brought it into the topic). The set is bounded
// (maxCircuitPeers): a peer that would overflow it is not taken.
type circuitPeers struct {
	mu sync.Mutex
	m  map[peer.ID]struct{}
}

// add takes p in and reports whether it was new.
func (c *circuitPeers) add(p peer.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[p]; ok || len(c.m) >= maxCircuitPeers {
		return false
	}
	if c.m == nil {
		c.m = make(map[peer.ID]struct{})
	}
	c.m[p] = struct{}{}
	return true
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

// limitedOnly reports whether p's only connections to this node are
// limited ones.
func (m *Mesh) limitedOnly(p peer.ID) bool {
	return m.h.Network().Connectedness(p) == network.Limited
}

// noteCircuit takes p in as a circuit member of space if its only
// connection is limited, and syncs with it at once when it is new.
func (m *Mesh) noteCircuit(space protocol.ID, p peer.ID) {
	if m.sync == nil || p == m.h.ID() || !m.limitedOnly(p) {
		return
	}
	m.mu.RLock()
	s, ok := m.spaces[space]
	m.mu.RUnlock()
	if ok && s.circuit.add(p) {
		m.log.Debug("space member reached through a circuit: synced instead of gossiped", "space", space, "peer", p)
		m.sync.Trigger(p, space)
	}
}

// syncCircuits syncs the space with each of its circuit members.
func (m *Mesh) syncCircuits(s *space) {
	if m.sync == nil {
		return
	}
	for _, p := range s.circuit.keep(m.limitedOnly) {
		m.sync.Trigger(p, s.id)
	}
}
