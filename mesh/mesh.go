package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	relayproto "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// ErrClosed is returned by operations on a closed Mesh.
var ErrClosed = errors.New("mesh closed")

// ErrNotJoined is returned by Publish for a space this node has not joined.
var ErrNotJoined = errors.New("space not joined")

// Mesh is a running weft libp2p node. Its methods are safe for concurrent use.
type Mesh struct {
	h         host.Host
	access    *access  // who may connect, whom this node keeps
	members   *members // of the joined spaces, kept
	dht       *dht.IpfsDHT
	disc      *drouting.RoutingDiscovery
	ps        *pubsub.PubSub
	tracer    *meshTracer
	flight    *inflight          // gossip messages accepted, not yet through their Sink
	stored    storedRing         // the messages stored last, for gap repair
	late      lateness           // how late gossip brings messages, for gap repair
	guard     *floodGuard        // gossip rate limits and flood penalties
	verify    *protocol.Verifier // signatures of gossip and sync (senders repeat)
	board     *scoreBoard        // gossip scores as last read
	mdns      mdns.Service       // nil unless Config.MDNS
	idSub     event.Subscription
	log       *slog.Logger
	now       func() time.Time
	lim       protocol.Limits
	bootstrap []peer.AddrInfo
	sync      *reconcile.Service // nil without Config.History
	history   reconcile.Store
	syncEvery time.Duration
	// spaceAccess is Config.SpaceAccess (nil: every peer may take part).
	spaceAccess func(protocol.ID, peer.ID) bool
	rdv         func(protocol.ID) string // Config.SpaceRendezvous

	cancel context.CancelFunc // stops everything started in New
	done   <-chan struct{}    // closed by cancel
	wg     sync.WaitGroup
	hookCh chan func(peer.ID, []ma.Multiaddr) // to identifiedLoop, which owns the hooks
	reach  atomic.Int32                       // network.Reachability, as AutoNAT last found it
	// gapRepairs counts the sync sessions gap repair asked for.
	gapRepairs atomic.Int64
	// punch is punchLoop's state; nil when Config.PunchAgain turns it off.
	punch *puncher

	opMu   sync.Mutex // serializes JoinSpace, LeaveSpace and Close
	mu     sync.RWMutex
	spaces map[protocol.ID]*space
	closed bool
}

// PeerInfo describes a connected peer.
type PeerInfo struct {
	ID        peer.ID
	Addrs     []ma.Multiaddr // remote addresses of the open connections
	Direction string         // "inbound" or "outbound": of the first open connection
	// Relayed is true when every open connection goes through a relay
	// (circuit relay v2): the peer is reachable, but not directly yet.
	Relayed bool
	// RTT is the round-trip time to the peer as last measured (a moving
	// average of pings and health checks); 0 when never measured.
	RTT time.Duration
}

// New starts a mesh node with identity key (Ed25519). ctx bounds
// construction only; the node runs until Close. Bootstrap peers are dialled
// in the background, so New does not fail when they are unreachable; nor
// does it when mDNS cannot start (it logs a warning and goes on without).
func New(ctx context.Context, key crypto.PrivKey, cfg Config) (_ *Mesh, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if key == nil || key.Type() != crypto.Ed25519 {
		return nil, errors.New("mesh: identity must be an Ed25519 key")
	}
	cfg = cfg.withDefaults()
	boot, _ := parseBootstrap(cfg.Bootstrap) // checked by Validate
	mode, _ := dhtMode(cfg.DHTMode)

	h, acc, err := newHost(key, cfg, boot)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &Mesh{
		h:           h,
		access:      acc,
		members:     newMembers(h.ConnManager()),
		log:         cfg.Logger,
		now:         cfg.Now,
		lim:         cfg.Limits,
		verify:      protocol.NewVerifier(),
		bootstrap:   boot,
		history:     cfg.History,
		syncEvery:   cfg.SyncInterval,
		spaceAccess: cfg.SpaceAccess,
		cancel:      cancel,
		done:        runCtx.Done(),
		hookCh:      make(chan func(peer.ID, []ma.Multiaddr)),
		spaces:      make(map[protocol.ID]*space),
		rdv:         cfg.SpaceRendezvous,
	}
	defer func() {
		if err != nil {
			m.shutdown()
		}
	}()

	// Subscribe before anything can connect, so no identification is missed.
	m.idSub, err = h.EventBus().Subscribe([]any{new(event.EvtPeerIdentificationCompleted), new(event.EvtLocalReachabilityChanged), new(event.EvtPeerConnectednessChanged)})
	if err != nil {
		return nil, fmt.Errorf("event bus: %w", err)
	}
	m.wg.Go(func() { m.identifiedLoop(runCtx) })

	m.dht, err = dht.New(h,
		dht.ProtocolPrefix(protocol.DHTPrefix),
		dht.Mode(mode),
		dht.BootstrapPeers(boot...),
	)
	if err != nil {
		return nil, fmt.Errorf("dht: %w", err)
	}
	if err := m.dht.Bootstrap(runCtx); err != nil {
		return nil, fmt.Errorf("dht bootstrap: %w", err)
	}
	m.disc = drouting.NewRoutingDiscovery(m.dht)

	m.flight = newInflight(cfg.Now)
	m.tracer = newMeshTracer(m.flight)
	m.guard = newFloodGuard(cfg.Rates, cfg.Now, cfg.Logger)
	m.board = newScoreBoard(cfg.Logger, cfg.Now, m.disconnect)
	h.Network().Notify(&network.NotifyBundle{ConnectedF: m.closeGraylisted})
	m.ps, err = newPubSub(runCtx, h, m.tracer, m.guard, m.board, cfg.SpaceAccess, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("gossipsub: %w", err)
	}

	if cfg.History != nil {
		m.sync, err = reconcile.New(h, cfg.History,
			reconcile.WithLimits(cfg.Limits),
			reconcile.WithVerifier(m.verify),
			reconcile.WithClock(cfg.Now),
			reconcile.WithLogger(cfg.Logger.With("component", "sync")),
			reconcile.WithWindow(cfg.SyncWindow),
			reconcile.WithOnReceived(m.spread),
			reconcile.WithAccess(cfg.SpaceAccess),
			reconcile.WithOnSession(func(se reconcile.Session) {
				if !se.Space.IsZero() {
					m.sessionEnded(se.Space, se.Peer, se.Err)
				}
				if cfg.OnSync != nil {
					cfg.OnSync(se)
				}
			}),
		)
		if err != nil {
			return nil, err
		}
	}

	if cfg.MDNS {
		m.mdns = mdns.NewMdnsService(h, protocol.MDNSService, peerFoundFunc(func(ai peer.AddrInfo) {
			m.wg.Go(func() { m.connectFound(runCtx, ai, "mdns") })
		}))
		if err := m.mdns.Start(); err != nil { // e.g. no multicast interface
			m.log.Warn("mDNS unavailable; LAN discovery off", "err", err)
			_ = m.mdns.Close()
			m.mdns = nil
		}
	}

	m.wg.Go(func() { m.bootstrapLoop(runCtx) })
	if cfg.PunchAgain > 0 {
		m.punch = &puncher{first: cfg.PunchAgain, gap: cmp.Or(cfg.punchGap, punchGap)}
		m.wg.Go(func() { m.punchLoop(runCtx, m.punch) })
	}
	m.log.Info("mesh started", "id", h.ID(), "addrs", h.Addrs(), "dht_mode", cfg.DHTMode, "mdns", m.mdns != nil, "relay", cfg.Relay)
	if cfg.NetworkKey != nil {
		m.log.Info("private network: TCP only, peers without the key cannot connect", "key_fingerprint", NetworkKeyFingerprint(cfg.NetworkKey))
	}
	return m, nil
}

// Close stops gossipsub, then tears every space down, stops discovery, and
// closes the DHT, mDNS and the host. It is safe to call more than once.
//
// gossipsub stops first so that it sends no PRUNE for the spaces it would
// otherwise leave: a PRUNE puts the peer in a backoff towards this node,
// and when this node starts again (a restart takes a second) its GRAFTs
// inside that backoff cost it a behaviour penalty per space at every
// peer. A few quick restarts got a node graylisted, and so cut off, for
// an hour. Closing the connections tells the peers all a PRUNE would, as a
// crash does.
func (m *Mesh) Close() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	spaces := m.spaces
	m.spaces = make(map[protocol.ID]*space)
	m.mu.Unlock()

	m.cancel() // gossipsub (and the loops: see shutdown)
	for _, s := range spaces {
		// Only weft's part: gossipsub is gone, and a subscription
		// cancelled or a topic closed now might still reach its loop
		// before it ends, and be left with a PRUNE.
		m.endSpace(s)
	}
	errs := []error{m.shutdown()}
	return errors.Join(errs...)
}

// GossipStats counts what gossipsub did with the messages this node
// received since it started, and the sync sessions gap repair asked for.
func (m *Mesh) GossipStats() GossipStats {
	st := m.tracer.stats()
	st.GapRepairs = m.gapRepairs.Load()
	return st
}

// shutdown stops what New started, in reverse order.
func (m *Mesh) shutdown() error {
	m.cancel() // stops the loops and gossipsub
	var errs []error
	if m.mdns != nil {
		errs = append(errs, m.mdns.Close())
	}
	if m.idSub != nil {
		errs = append(errs, m.idSub.Close())
	}
	m.wg.Wait()
	if m.sync != nil {
		errs = append(errs, m.sync.Close())
	}
	if m.dht != nil {
		errs = append(errs, m.dht.Close())
	}
	errs = append(errs, m.h.Close())
	return errors.Join(errs...)
}

// closeGraylisted closes a new connection of a peer that is graylisted
// (see scoreBoard): it would only cost this node the reading of RPCs that
// gossipsub drops.
func (m *Mesh) closeGraylisted(_ network.Network, c network.Conn) {
	if p := c.RemotePeer(); m.board.graylisted(p) {
		go func() {
			_ = c.Close()
			m.log.Debug("gossip: closed a graylisted peer's new connection", "peer", p)
		}()
	}
}

// disconnect closes every connection to p, and reports whether there was
// one.
func (m *Mesh) disconnect(p peer.ID) bool {
	if m.h.Network().Connectedness(p) != network.Connected {
		return false
	}
	_ = m.h.Network().ClosePeer(p)
	return true
}

// ID returns this node's peer ID.
func (m *Mesh) ID() peer.ID { return m.h.ID() }

// Host returns the libp2p host, for protocols built on top of the mesh.
func (m *Mesh) Host() host.Host { return m.h }

// Addrs returns this node's listen addresses, each ending in /p2p/<id>.
func (m *Mesh) Addrs() []ma.Multiaddr {
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: m.h.ID(), Addrs: m.h.Addrs()})
	if err != nil { // only for an invalid ID
		return nil
	}
	return addrs
}

// Peers returns the peers this node has open connections to.
func (m *Mesh) Peers() []PeerInfo {
	net := m.h.Network()
	var out []PeerInfo
	for _, p := range net.Peers() {
		conns := net.ConnsToPeer(p)
		if len(conns) == 0 {
			continue
		}
		pi := PeerInfo{ID: p, Direction: direction(conns[0].Stat().Direction), Relayed: true, RTT: m.h.Peerstore().LatencyEWMA(p)}
		for _, c := range conns {
			pi.Addrs = append(pi.Addrs, c.RemoteMultiaddr())
			pi.Relayed = pi.Relayed && isCircuit(c.RemoteMultiaddr())
		}
		out = append(out, pi)
	}
	return out
}

// Reachability is whether peers can dial this node, as AutoNAT (or
// Config.Reachability) says: "public", "private" or "unknown".
func (m *Mesh) Reachability() string {
	return reachability(network.Reachability(m.reach.Load()))
}

func reachability(r network.Reachability) string {
	switch r {
	case network.ReachabilityPublic:
		return ReachabilityPublic
	case network.ReachabilityPrivate:
		return ReachabilityPrivate
	}
	return "unknown"
}

// isCircuit reports whether a goes through a relay (…/p2p-circuit…).
func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

func direction(d network.Direction) string {
	switch d {
	case network.DirInbound:
		return "inbound"
	case network.DirOutbound:
		return "outbound"
	}
	return "unknown"
}

// Connect dials the peer at addr, which must end in /p2p/<id>, and protects
// the connection from the connection manager's trimming.
func (m *Mesh) Connect(ctx context.Context, addr ma.Multiaddr) (peer.ID, error) {
	ai, err := peer.AddrInfoFromP2pAddr(addr)
	if err != nil {
		return "", fmt.Errorf("connect %s: address must end in /p2p/<peer id>: %w", addr, err)
	}
	if ai.ID == m.h.ID() {
		return "", fmt.Errorf("connect %s: that is this node", addr)
	}
	if err := m.h.Connect(ctx, *ai); err != nil {
		if strings.Contains(err.Error(), "negotiate security protocol") {
			return "", fmt.Errorf("connect %s (no handshake: do both nodes have the same network key, or neither?): %w", addr, err)
		}
		return "", fmt.Errorf("connect %s: %w", addr, err)
	}
	// A peer that refuses this node (a closed mesh, or one whose inbound
	// connections are full) completes its side of the handshake after this
	// node has, then drops the connection, which Connect does not notice.
	if m.h.Network().Connectedness(ai.ID) != network.Connected {
		return "", fmt.Errorf("connect %s: the peer closed the connection at once (a closed mesh that does not allow this node, or one full of connections?)", addr)
	}
	if err := m.checkAddrs(ctx, *ai); err != nil {
		return "", fmt.Errorf("connect %s: %w", addr, err)
	}
	m.h.ConnManager().Protect(ai.ID, tagManual)
	return ai.ID, nil
}

// checkAddrs makes sure the peer answers at one of the addresses given to
// Connect: a node connected to it already (or that knows other addresses
// of it) would otherwise report success for any address, a wrong port
// included. An address that one of the connections uses is proof enough;
// otherwise this dials the first given address on its own (a full
// handshake, which checks the peer ID) and closes that connection.
func (m *Mesh) checkAddrs(ctx context.Context, ai peer.AddrInfo) error {
	if len(ai.Addrs) == 0 {
		return nil // an address with only /p2p/ID: any way to reach it will do
	}
	for _, c := range m.h.Network().ConnsToPeer(ai.ID) {
		for _, a := range ai.Addrs {
			if c.RemoteMultiaddr().Equal(a) {
				return nil
			}
		}
	}
	sw, ok := m.h.Network().(*swarm.Swarm)
	if !ok {
		return nil
	}
	a := ai.Addrs[0]
	if _, err := a.ValueForProtocol(ma.P_CIRCUIT); err == nil {
		return nil // relayed: the relay, not the peer, answers at that address
	}
	tpt := sw.TransportForDialing(a)
	if tpt == nil {
		return nil // e.g. a /dns address, which the swarm resolved to dial it: not checked
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := tpt.Dial(dctx, a, ai.ID)
	if err != nil {
		return fmt.Errorf("%s is connected, but not reachable at %s: %w", ai.ID, a, err)
	}
	return c.Close()
}

// OnPeerConnected registers f to be called for every peer this node
// connects to, once identify has completed, with the addresses that peer
// says it listens on (dialable later, unlike an inbound connection's remote
// port). f is called at once for the peers already connected, with the
// addresses known for them, so it may see a peer more than once. All hooks
// run on one goroutine: f must not block, nor call OnPeerConnected.
// After Close, OnPeerConnected does nothing.
func (m *Mesh) OnPeerConnected(f func(peer.ID, []ma.Multiaddr)) {
	select {
	case m.hookCh <- f:
	case <-m.done:
	}
}

// identifiedLoop owns the OnPeerConnected hooks and feeds them identify
// events.
func (m *Mesh) identifiedLoop(ctx context.Context) {
	var hooks []func(peer.ID, []ma.Multiaddr)
	seen := make(map[peer.ID]bool)                   // peers logged as connected, not yet as left
	paths := make(map[peer.ID]network.Connectedness) // connected peers' last connectedness
	for {
		select {
		case f := <-m.hookCh:
			hooks = append(hooks, f)
			for _, p := range m.h.Network().Peers() {
				f(p, m.h.Peerstore().Addrs(p))
			}
		case e, ok := <-m.idSub.Out():
			if !ok {
				return
			}
			switch ev := e.(type) {
			case event.EvtPeerIdentificationCompleted:
				if !seen[ev.Peer] {
					seen[ev.Peer] = true
					m.log.Info("peer connected", "peer", ev.Peer, "agent", ev.AgentVersion, "addr", ev.Conn.RemoteMultiaddr())
				}
				m.closeEarlierRuns(ev)
				for _, f := range hooks {
					f(ev.Peer, ev.ListenAddrs)
				}
			case event.EvtPeerConnectednessChanged:
				// A pair going direct, or back to relays only, says so:
				// why a pair stays relayed is otherwise hard to see.
				was := paths[ev.Peer]
				paths[ev.Peer] = ev.Connectedness
				if was != network.NotConnected && ev.Connectedness != network.NotConnected && was != ev.Connectedness {
					m.log.Debug("peer path changed", "peer", ev.Peer, "now", pathName(ev.Connectedness))
				}
				if ev.Connectedness == network.NotConnected {
					delete(paths, ev.Peer)
					m.circuitLost(ev.Peer)
					if seen[ev.Peer] {
						delete(seen, ev.Peer)
						m.log.Info("peer left", "peer", ev.Peer)
					}
				}
			case event.EvtLocalReachabilityChanged:
				m.reach.Store(int32(ev.Reachability))
				m.log.Info("reachability", "now", reachability(ev.Reachability))
			}
		case <-ctx.Done():
			return
		}
	}
}

// pathName names how a connected peer is reached, for the log.
func pathName(c network.Connectedness) string {
	if c == network.Limited {
		return "relayed"
	}
	return "direct"
}

// Discovery returns the DHT-backed rendezvous discovery, for protocols that
// advertise and find providers of something (capabilities).
func (m *Mesh) Discovery() discovery.Discovery { return m.disc }

// Dial makes sure this node is connected to peer p. It tries the
// addresses it knows, then those the DHT finds, then every relay among its
// peers (a peer behind NAT holds a reservation on one or more of them, and
// the DHT may not know which). It returns at once when already connected.
func (m *Mesh) Dial(ctx context.Context, p peer.ID) error {
	if p == m.h.ID() {
		return errors.New("dial: that is this node")
	}
	if m.h.Network().Connectedness(p) == network.Connected {
		return nil
	}
	// A peer that was down a moment ago may be back: skip the dial backoff.
	if sw, ok := m.h.Network().(interface{ Backoff() *swarm.DialBackoff }); ok {
		sw.Backoff().Clear(p)
	}
	var errs []error
	if addrs := m.h.Peerstore().Addrs(p); len(addrs) > 0 {
		// Half the time left at most: a known address that drops packets
		// (a NATed peer's LAN address, say) takes the whole deadline to
		// fail, and the DHT or a relay may know better.
		kctx, kcancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			kctx, kcancel = context.WithTimeout(ctx, time.Until(dl)/2)
		}
		err := m.h.Connect(kctx, peer.AddrInfo{ID: p, Addrs: addrs})
		kcancel()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	// The DHT and the relays at once: a lookup that finds nothing can take
	// as long as the caller allows. The first to connect wins; the other
	// is cancelled and waited for.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan error, 2)
	tries := 1
	go func() {
		found, err := m.dht.FindPeer(ctx, p)
		if err != nil {
			results <- fmt.Errorf("find %s: %w", p, err)
			return
		}
		results <- m.h.Connect(ctx, found)
	}()
	if via := m.relayAddrs(p); len(via) > 0 {
		tries++
		go func() {
			if err := m.h.Connect(ctx, peer.AddrInfo{ID: p, Addrs: via}); err != nil {
				results <- fmt.Errorf("through relays: %w", err)
				return
			}
			results <- nil
		}()
	}
	connected := false
	for range tries {
		err := <-results
		if err == nil {
			connected = true
			cancel()
		} else if !connected {
			errs = append(errs, err)
		}
	}
	if connected {
		return nil
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// relayAddrs returns a circuit address to p through each connected peer
// that serves circuit relay v2.
func (m *Mesh) relayAddrs(p peer.ID) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, r := range m.h.Network().Peers() {
		if r == p {
			continue
		}
		if ok, _ := m.h.Peerstore().SupportsProtocols(r, relayproto.ProtoIDv2Hop); len(ok) == 0 {
			continue
		}
		a, err := ma.NewMultiaddr("/p2p/" + r.String() + "/p2p-circuit")
		if err == nil {
			out = append(out, a)
		}
	}
	return out
}
