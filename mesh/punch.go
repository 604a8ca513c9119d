package mesh

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Hole punching again (see punchLoop).
const (
	// DefaultPunchAgain is Config.PunchAgain's default.
	DefaultPunchAgain = 15 * time.Second
	// punchMax caps the wait between two tries for one peer. A circuit
	// lasts relayConnDuration at most, and a new one brings a try of
	// libp2p's own.
	punchMax = 8 * time.Minute
	// punchDialTimeout bounds one try's dial.
	punchDialTimeout = 15 * time.Second
	// punchGap is the least wait between two tries for one peer: longer
	// than circuitStable, so that the circuit a try ends never looks, to
	// the peer's side, like one that a peer or relay cut soon after it was
	// dialled again (circuit.go counts those against a circuit member, and
	// drops it after circuitFailures in a row: the other side cannot tell
	// a try's close from such a cut).
	punchGap = circuitStable + 5*time.Second
)

// puncher is what punchLoop keeps: the peers this node reaches only
// through relays, with when each is to be tried next.
type puncher struct {
	first time.Duration // Config.PunchAgain
	gap   time.Duration // the least wait between two tries (punchGap; tests shorten it)
	mu    sync.Mutex
	m     map[peer.ID]*punchPeer
}

// punchPeer is a relayed peer's state.
type punchPeer struct {
	next   time.Time     // when to try next
	wait   time.Duration // the wait after the next try; doubles, up to punchMax
	busy   bool          // a try is under way
	putOff bool          // the due try was put off (logged once per try)
	closed time.Time     // when a try last closed the peer's circuits
}

// closing notes that a try closes id's circuits at now.
func (p *puncher) closing(id peer.ID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp, ok := p.m[id]; ok {
		pp.closed = now
	}
}

// closedByTry reports whether id's circuits ended at now because a try
// closed them (within the try's dial time): nil-safe, for a node that
// does not try again.
func (p *puncher) closedByTry(id peer.ID, now time.Time) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pp, ok := p.m[id]
	return ok && !pp.closed.IsZero() && now.Sub(pp.closed) < punchDialTimeout
}

// due takes the peers this node reaches only through relays now
// (relayed) and returns those whose try is due at now, marked busy. A peer
// seen relayed for the first time is due first later; one no longer in
// relayed (a direct connection, none at all, or no longer this node's to
// try) and not being tried is forgotten, so that it starts again from
// first if it is relayed again: forgot lists those.
func (p *puncher) due(relayed []peer.ID, now time.Time) (out, forgot []peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := make(map[peer.ID]bool, len(relayed))
	for _, id := range relayed {
		in[id] = true
		pp, ok := p.m[id]
		if !ok {
			if p.m == nil {
				p.m = make(map[peer.ID]*punchPeer)
			}
			p.m[id] = &punchPeer{next: now.Add(p.first), wait: max(2*p.first, p.gap)}
			continue
		}
		if pp.busy || now.Before(pp.next) {
			continue
		}
		pp.busy = true
		out = append(out, id)
	}
	for id, pp := range p.m {
		if !in[id] && !pp.busy { // a try closes the circuit before it dials
			delete(p.m, id)
			forgot = append(forgot, id)
		}
	}
	return out, forgot
}

// later puts a due try for id off to the next check. It reports whether
// this is the first time since the last try, when the reason is worth a
// log line.
func (p *puncher) later(id peer.ID) (first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp, ok := p.m[id]
	if !ok {
		return false
	}
	pp.busy = false
	first = !pp.putOff
	pp.putOff = true
	return first
}

// tried notes that a try for id ended at now: the next is a doubled wait
// away.
func (p *puncher) tried(id peer.ID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp, ok := p.m[id]
	if !ok {
		return
	}
	pp.busy = false
	pp.putOff = false
	pp.next = now.Add(pp.wait)
	pp.wait = min(2*pp.wait, punchMax)
}

// punchLoop has hole punching tried again with the peers this node reaches
// only through relays. libp2p's DCUtR tries once per inbound circuit (three
// rounds, within seconds) and never again on it: a pair whose one try
// failed (a handshake that raced identify or the other side's first
// public address, a packet lost under load) stays relayed until the relay
// ends the circuit (relayConnDuration), its calls and sync slower and
// bounded by the relay's limits. A peer reached only through relays for
// Config.PunchAgain gets a new circuit, and again after a wait of at
// least punchGap that doubles up to punchMax: the peer, seeing an inbound
// circuit, starts DCUtR on it (and when the peer is public, the dial's own
// try of its direct addresses is enough).
//
// libp2p opens no second connection to a peer it is connected to, so the
// circuit is closed and dialled again through the same relay, and only
// while no stream is open on it: a call, a sync session or a direct
// message under way is left alone, and the try waits for the next check.
// Only a circuit this node dialled can be dialled again (the peer holds a
// reservation on its relay; one the peer dialled came through this node's
// reservation, and the peer may hold none), so only the side that dialled
// one tries, and of two that both did, the one with the lower ID: their
// tries do not cross. A peer behind a NAT hole punching cannot cross (a
// symmetric one) costs a circuit per try, fewer and fewer. The circuit
// members of a space (circuit.go) do not count such a close against the
// peer (see circuitPeers.startRedial).
func (m *Mesh) punchLoop(ctx context.Context, p *puncher) {
	t := time.NewTicker(max(p.first/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, forgot := p.due(m.punchable(), m.now())
		for _, id := range forgot {
			if ours, why := m.punchRole(id); !ours && m.h.Network().Connectedness(id) == network.Limited {
				m.log.Debug("hole punching again left to the peer", "peer", id, "why", why)
			}
		}
		for _, id := range due {
			conns := m.h.Network().ConnsToPeer(id)
			if open := openStreams(conns); len(open) > 0 {
				if p.later(id) {
					m.log.Debug("hole punching again put off: streams open", "peer", id, "protocols", open)
				}
				continue
			}
			// Only a circuit this node dialled leads back to the peer: it
			// went through a relay where the peer holds a reservation. One
			// the peer dialled went through this node's reservation, and
			// the peer may hold none there (or anywhere).
			ai := peer.AddrInfo{ID: id}
			for _, c := range conns {
				if c.Stat().Direction == network.DirOutbound {
					ai.Addrs = append(ai.Addrs, c.RemoteMultiaddr())
				}
			}
			if len(ai.Addrs) == 0 {
				if p.later(id) {
					m.log.Debug("hole punching again put off: no circuit dialled by this node", "peer", id)
				}
				continue
			}
			p.closing(id, m.now())
			for _, c := range conns {
				_ = c.Close()
			}
			m.wg.Go(func() {
				dctx, cancel := context.WithTimeout(network.WithAllowLimitedConn(ctx, "weft: hole punching again"), punchDialTimeout)
				err := m.h.Connect(dctx, ai)
				cancel()
				m.log.Debug("hole punching tried again", "peer", id, "err", err)
				p.tried(id, m.now())
			})
		}
	}
}

// openStreams returns the protocols of the streams open on conns.
func openStreams(conns []network.Conn) []string {
	var out []string
	for _, c := range conns {
		for _, st := range c.GetStreams() {
			out = append(out, string(st.Protocol()))
		}
	}
	return out
}

// punchable returns the connected peers this node reaches only through
// relays over a circuit it dialled itself (the only kind it can dial
// again), and, when the peer dialled one too, whose ID is above its own
// (see punchLoop).
func (m *Mesh) punchable() []peer.ID {
	var out []peer.ID
	for _, id := range m.h.Network().Peers() {
		if ours, _ := m.punchRole(id); ours {
			out = append(out, id)
		}
	}
	return out
}

// punchRole reports whether this node is the one to try hole punching
// again with peer id (see punchable), and if not, why.
func (m *Mesh) punchRole(id peer.ID) (ours bool, why string) {
	if m.h.Network().Connectedness(id) != network.Limited {
		return false, "not reached through relays only"
	}
	var in, outb bool
	for _, c := range m.h.Network().ConnsToPeer(id) {
		if c.Stat().Direction == network.DirOutbound {
			outb = true
		} else {
			in = true
		}
	}
	switch {
	case !outb:
		return false, "the peer dialled the circuit"
	case in && bytes.Compare([]byte(m.h.ID()), []byte(id)) > 0:
		return false, "both dialled circuits, and the peer's ID is the lower"
	}
	return true, ""
}
