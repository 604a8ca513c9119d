package mesh

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
)

// Circuit members (see circuitPeers).
const (
	// maxCircuitPeers bounds a space's circuit members.
	maxCircuitPeers = 32
	// circuitGap is the least time between two rounds of syncs with a
	// space's circuit members: publications meanwhile share the next round.
	circuitGap = 250 * time.Millisecond
	// circuitFailures is how many sessions or redials in a row may fail (a
	// busy peer's, a timed-out one's, a peer gone for good) before a
	// circuit member is dropped.
	circuitFailures = 3
	// redialFirst is the wait after a failed redial of a circuit member;
	// it doubles after each failure.
	redialFirst = time.Second
	// redialTimeout bounds one redial through the relay.
	redialTimeout = 10 * time.Second
	// circuitStable is how long a circuit dialled again must last for its
	// member's next loss to be redialled at once: one that ends sooner
	// (a peer or relay that cuts circuits) makes the next redial wait
	// redialFirst, doubled for each such circuit in a row, and
	// circuitFailures of them in a row drop the member.
	circuitStable = 30 * time.Second
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
// is no longer so (a direct connection brought it into the topic, it lost
// access) and when circuitFailures sessions or redials with it in a row
// fail. The set is bounded (maxCircuitPeers): a peer that would overflow
// it is not taken.
//
// A circuit ends (the relay's limits on its time and bytes, the relay's
// restart, the peer's): a member that is no longer connected at all is
// dialled again through the relay it came through (the circuit address
// is kept), at once and then after redialFirst, doubled after each
// failure; circuitFailures in a row drop it. Without that the member was
// dropped with its circuit and synced again only once the rendezvous found
// it again, up to a minute later. A circuit dialled again that ends within
// circuitStable counts against its member (see circuitStable), so that a
// peer or relay that keeps cutting circuits is not dialled every round.
type circuitPeers struct {
	mu sync.Mutex
	m  map[peer.ID]*circuitPeer
	// due wakes the space's circuit loop for a round (see Mesh.circuitLoop).
	due chan struct{}
}

// circuitPeer is what circuitPeers keeps of a member.
type circuitPeer struct {
	fails     int          // sessions or redials failed in a row
	addr      ma.Multiaddr // its circuit address: through the relay (nil: none known)
	redialing bool         // a redial is under way
	redialed  time.Time    // when a redial last connected it (zero: never)
	short     int          // circuits dialled again that ended within circuitStable, in a row
}

// add takes p in, reached at the circuit address addr (nil: unknown), and
// reports whether it was new. A peer already in has a session or a redial
// gone well: its count of failures starts again.
func (c *circuitPeers) add(p peer.ID, addr ma.Multiaddr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, added := c.addLocked(p, addr)
	return added
}

// addLocked is add with mu held; it also returns p's entry (nil when the
// set is full).
func (c *circuitPeers) addLocked(p peer.ID, addr ma.Multiaddr) (*circuitPeer, bool) {
	if cp, ok := c.m[p]; ok {
		cp.fails = 0
		if addr != nil {
			cp.addr = addr
		}
		return cp, false
	}
	if len(c.m) >= maxCircuitPeers {
		return nil, false
	}
	if c.m == nil {
		c.m = make(map[peer.ID]*circuitPeer)
	}
	cp := &circuitPeer{addr: addr}
	c.m[p] = cp
	return cp, true
}

// failed counts a failed session or redial with p, lets p go after
// circuitFailures in a row, and reports whether p is still in.
func (c *circuitPeers) failed(p peer.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.m[p]
	if !ok {
		return false
	}
	if cp.fails++; cp.fails >= circuitFailures {
		delete(c.m, p)
		return false
	}
	return true
}

// drop lets p go.
func (c *circuitPeers) drop(p peer.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, p)
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

// has reports whether p is a member.
func (c *circuitPeers) has(p peer.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[p]
	return ok
}

// startRedial marks a redial of p, whose circuit ended at now, as under
// way and returns p's circuit address and how long the redial is to wait
// before it dials (see circuitStable; a circuit this node closed itself,
// byTry, to have hole punching tried again does not count); a nil address
// when p is not in or is being redialled already, when it has no known
// address, and when its circuits dialled again ended too soon
// circuitFailures times in a row (it is dropped in both of those cases).
func (c *circuitPeers) startRedial(p peer.ID, now time.Time, byTry bool) (ma.Multiaddr, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.m[p]
	switch {
	case !ok || cp.redialing:
		return nil, 0
	case cp.addr == nil: // no way back to it
		delete(c.m, p)
		return nil, 0
	}
	var wait time.Duration
	switch {
	case byTry:
		// Closed by this node to have hole punching tried again
		// (punchLoop): no sign of a peer or relay that cuts circuits.
	case !cp.redialed.IsZero() && now.Sub(cp.redialed) < circuitStable:
		if cp.short++; cp.short >= circuitFailures {
			delete(c.m, p)
			return nil, 0
		}
		wait = redialFirst << (cp.short - 1)
	default:
		cp.short = 0
	}
	cp.redialing = true
	return cp.addr, wait
}

// redialed notes that a redial connected p again at now: p's failures
// start again, and its circuit's life is counted from now.
func (c *circuitPeers) redialed(p peer.ID, addr ma.Multiaddr, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp, _ := c.addLocked(p, addr); cp != nil {
		cp.redialed = now
	}
}

// endRedial marks the redial of p as over.
func (c *circuitPeers) endRedial(p peer.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp, ok := c.m[p]; ok {
		cp.redialing = false
	}
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
	if s := m.joined(space); s != nil && s.circuit.add(p, m.circuitAddr(p)) {
		m.log.Debug("space member reached through a circuit: synced instead of gossiped", "space", space, "peer", p)
		m.sync.Trigger(p, space)
	}
}

// circuitAddr returns the address of one of this node's circuits to p
// (…/p2p/RELAY/p2p-circuit), a way to dial p again; nil if it has none.
func (m *Mesh) circuitAddr(p peer.ID) ma.Multiaddr {
	for _, c := range m.h.Network().ConnsToPeer(p) {
		if a := c.RemoteMultiaddr(); isCircuit(a) {
			return a
		}
	}
	return nil
}

// circuitLost wakes the circuit loop of each joined space of which p is a
// circuit member, once this node has no connection left to p: the loop
// dials it again (see circuitPeers).
func (m *Mesh) circuitLost(p peer.ID) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, s := range m.spaces {
		if s.circuit.has(p) {
			s.circuit.wake()
		}
	}
}

// syncCircuits syncs the space with each of its circuit members, and
// starts a redial of each that is no longer connected at all (see
// circuitPeers). Members that are connected directly now (gossip carries
// the space to them) or have lost access to the space are dropped.
func (m *Mesh) syncCircuits(ctx context.Context, s *space) {
	if m.sync == nil {
		return
	}
	var live, lost []peer.ID
	s.circuit.keep(func(p peer.ID) bool {
		switch {
		case m.circuitPeer(s.id, p):
			live = append(live, p)
		case m.h.Network().Connectedness(p) == network.NotConnected && (m.spaceAccess == nil || m.spaceAccess(s.id, p)):
			lost = append(lost, p)
		default:
			return false
		}
		return true
	})
	for _, p := range live {
		m.sync.Trigger(p, s.id)
	}
	for _, p := range lost {
		if addr, wait := s.circuit.startRedial(p, time.Now(), m.punch.closedByTry(p, m.now())); addr != nil {
			s.wg.Go(func() { m.redial(ctx, s, p, addr, wait) })
		}
	}
}

// redial dials the lost circuit member p again through the relay, at
// addr, after first (see startRedial), until it is connected again, has
// failed circuitFailures times in a row (and is dropped), or ctx ends.
// Connected again through a circuit, it is synced at once; connected
// directly, it is gossip's and is dropped.
func (m *Mesh) redial(ctx context.Context, s *space, p peer.ID, addr ma.Multiaddr, first time.Duration) {
	defer s.circuit.endRedial(p)
	if first > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(first):
		}
	}
	wait := redialFirst
	for {
		if m.spaceAccess != nil && !m.spaceAccess(s.id, p) {
			s.circuit.drop(p) // removed from the space, or it left
			return
		}
		var err error
		if m.h.Network().Connectedness(p) == network.NotConnected {
			// The swarm's own backoff would refuse a peer that failed a
			// moment ago: the redial has one of its own.
			if sw, ok := m.h.Network().(interface{ Backoff() *swarm.DialBackoff }); ok {
				sw.Backoff().Clear(p)
			}
			dctx, cancel := context.WithTimeout(ctx, redialTimeout)
			err = m.h.Connect(network.WithAllowLimitedConn(dctx, "weft circuit member"), peer.AddrInfo{ID: p, Addrs: []ma.Multiaddr{addr}})
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		switch c := m.h.Network().Connectedness(p); {
		case err == nil && c == network.Limited && m.circuitPeer(s.id, p):
			s.circuit.redialed(p, m.circuitAddr(p), time.Now())
			m.log.Debug("circuit member dialled again through its relay", "space", s.id, "peer", p)
			m.sync.Trigger(p, s.id)
			return
		case err == nil && c == network.Connected:
			s.circuit.drop(p) // direct now: in the topic, gossip's
			return
		case err == nil:
			err = errors.New("not connected after the dial")
		}
		if !s.circuit.failed(p) {
			m.log.Debug("circuit member dropped: redials failed", "space", s.id, "peer", p, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
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
		m.syncCircuits(ctx, s)
		select {
		case <-ctx.Done():
			return
		case <-time.After(circuitGap):
		}
	}
}
