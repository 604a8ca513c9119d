package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/weftmesh/weft/mesh/internal/advert"
)

// Discovery timing.
const (
	dialTimeout = 15 * time.Second
	// rtWait bounds how long bootstrapLoop waits for identify to put the
	// bootstrap peers into the DHT routing table before refreshing it.
	rtWait = 10 * time.Second
	// Rendezvous: look for space members after each of findStart, then
	// every findFast for findFastRounds rounds, then back off by doubling up
	// to findSlow.
	findFast       = 10 * time.Second
	findFastRounds = 6
	findSlow       = time.Minute
	findTimeout    = 30 * time.Second
)

// findStart are the first waits of the rendezvous find loop: quick, since
// members that join together advertise within seconds of each other.
var findStart = []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second}

// peerFoundFunc adapts a function to mdns.Notifee.
type peerFoundFunc func(peer.AddrInfo)

func (f peerFoundFunc) HandlePeerFound(ai peer.AddrInfo) { f(ai) }

// connectFound dials a peer found by discovery unless it is this node,
// already connected, or not allowed in (the gate would refuse the dial;
// this spares the DHT lookup).
func (m *Mesh) connectFound(ctx context.Context, ai peer.AddrInfo, via string) {
	if ai.ID == m.h.ID() || m.h.Network().Connectedness(ai.ID) == network.Connected || !m.access.allowed(ai.ID) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if len(ai.Addrs) == 0 && len(m.h.Peerstore().Addrs(ai.ID)) == 0 {
		found, err := m.dht.FindPeer(ctx, ai.ID)
		if err != nil {
			m.log.Debug("no addresses for discovered peer", "peer", ai.ID, "via", via, "err", err)
			return
		}
		ai = found
	}
	if err := m.h.Connect(ctx, ai); err != nil {
		m.log.Debug("connect to discovered peer failed", "peer", ai.ID, "via", via, "err", err)
		return
	}
	m.log.Debug("connected to discovered peer", "peer", ai.ID, "via", via)
}

// Bootstrap retries: a bootstrap peer that cannot be reached at start (it
// may start later) is dialled again after bootRetryMin, doubling up to
// bootRetryMax, until it answers. libp2p's own dial backoff (minutes after a
// few failures) is cleared before each try.
const (
	bootRetryMin = time.Second
	bootRetryMax = 10 * time.Second
)

// bootstrapLoop dials each bootstrap peer until it answers (on a short,
// capped backoff: see bootRetryMin), protects it in the connection
// manager, and refreshes the DHT routing table as soon as identify has put
// it there, so that a small mesh finds its members within seconds instead
// of at the DHT's first periodic refresh. Once connected, reconnection is
// the DHT's own job (it redials bootstrap peers when its routing table runs
// empty).
func (m *Mesh) bootstrapLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, ai := range m.bootstrap {
		if ai.ID == m.h.ID() {
			continue
		}
		m.h.ConnManager().Protect(ai.ID, tagBootstrap)
		wg.Go(func() {
			if m.dialBootstrap(ctx, ai) {
				m.refreshRoutingTable(ctx)
			}
		})
	}
}

// dialBootstrap dials a bootstrap peer until it connects (true) or ctx
// ends (false). It warns once when the peer cannot be reached, and says
// at info level when it connects.
func (m *Mesh) dialBootstrap(ctx context.Context, ai peer.AddrInfo) bool {
	wait := bootRetryMin
	for try := 1; ; try++ {
		if bo, ok := m.h.Network().(interface{ Backoff() *swarm.DialBackoff }); ok {
			bo.Backoff().Clear(ai.ID)
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		err := m.h.Connect(dctx, ai)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			m.log.Info("connected to bootstrap peer", "peer", ai.ID, "tries", try)
			return true
		}
		if try == 1 {
			m.log.Warn("bootstrap peer unreachable; retrying", "peer", ai.ID, "addrs", ai.Addrs, "every_max", bootRetryMax, "err", err)
		} else {
			m.log.Debug("bootstrap peer still unreachable", "peer", ai.ID, "tries", try, "err", err)
		}
		if !advert.Sleep(ctx, wait) {
			return false
		}
		wait = min(2*wait, bootRetryMax)
	}
}

// refreshRoutingTable refreshes the DHT routing table once identify has put
// a peer in it (waiting at most rtWait).
func (m *Mesh) refreshRoutingTable(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(rtWait)
	for m.dht.RoutingTable().Size() == 0 {
		select {
		case <-tick.C:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
	select {
	case err := <-m.dht.RefreshRoutingTable():
		if err != nil && ctx.Err() == nil {
			m.log.Debug("dht refresh", "err", err)
		}
	case <-ctx.Done():
	}
}

// advertiseLoop keeps this node advertised under the rendezvous namespace
// ns until ctx ends.
func (m *Mesh) advertiseLoop(ctx context.Context, ns string) {
	advert.Loop(ctx, m.disc, ns, m.log)
}

// findLoop looks up the members of rendezvous namespace ns and connects to
// those not yet connected, until ctx ends. found is told of each member
// found once it is connected (or not, if the dial failed).
func (m *Mesh) findLoop(ctx context.Context, ns string, found func(peer.ID)) {
	wait := findFast
	for round := 0; ; round++ {
		switch {
		case round < len(findStart):
			wait = findStart[round]
		case round >= len(findStart)+findFastRounds:
			wait = min(2*wait, findSlow)
		}
		if !advert.Sleep(ctx, wait) {
			return
		}
		m.findOnce(ctx, ns, found)
	}
}

func (m *Mesh) findOnce(ctx context.Context, ns string, found func(peer.ID)) {
	fctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	ch, err := m.disc.FindPeers(fctx, ns)
	if err != nil {
		m.log.Debug("rendezvous find failed", "ns", ns, "err", err)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for ai := range ch {
		if ai.ID == m.h.ID() || m.h.Network().Connectedness(ai.ID) == network.Connected {
			continue
		}
		wg.Go(func() {
			m.connectFound(ctx, ai, "rendezvous")
			found(ai.ID)
		})
	}
}
