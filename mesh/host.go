package mesh

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	tls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/weftmesh/weft/internal/version"
	"github.com/weftmesh/weft/protocol"
)

// NAT traversal settings. weft meshes are small and their relays are
// members, so relays are looked for among the peers often and a refused
// reservation is retried within minutes, not libp2p's default hour.
const (
	relayFindEvery = 10 * time.Second
	relayBackoff   = time.Minute
	// Relayed connections carry weft's own traffic (DMs, calls, sync) until
	// hole punching replaces them, so they may last longer and carry more
	// than libp2p's defaults (2 min, 128 KiB), which are sized for the hole
	// punching handshake alone. A message is at most 1 MiB.
	relayConnDuration = 10 * time.Minute
	relayConnData     = 8 << 20
)

// newHost builds the libp2p host: TCP and QUIC (TCP only in a private
// network, cfg.NetworkKey), Noise and TLS, yamux with its writes
// coalesced (coalescingMuxer), libp2p's auto-scaled default
// resource limits with limits of weft's own protocols (serviceLimits) and
// cfg.Conns applied (resourceLimits), a connection manager with cfg's
// watermarks, a connection gater (gate: the allowlist and the inbound share
// of strangers, then cfg.Gater), and NAT traversal: AutoNAT (client, and a
// rate-limited service for peers unless forced private), circuit relay v2 (a relay service for
// the peers cfg.Relay names that runs while this node is publicly
// reachable, and the client side: reservations on relays found among the
// peers while it is not), and hole punching (DCUtR) to replace relayed
// connections with direct ones. No UPnP or NAT-PMP port mapping. cfg has
// its defaults set; boot are the bootstrap peers, the first relay
// candidates. It returns the host and the access rules its gate applies.
func newHost(key crypto.PrivKey, cfg Config, boot []peer.AddrInfo) (host.Host, *access, error) {
	listen, err := parseListen(cfg.ListenAddrs)
	if err != nil {
		return nil, nil, err
	}
	if err := checkPorts(listen); err != nil {
		return nil, nil, err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	limits, rmOpts, inbound := resourceLimits(cfg.Conns)
	if cfg.Registerer == nil || !cfg.ResourceMetrics {
		rmOpts = append(rmOpts, rcmgr.WithMetricsDisabled())
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits), rmOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(cfg.ConnLow, cfg.ConnHigh)
	if err != nil {
		rm.Close()
		return nil, nil, fmt.Errorf("connection manager: %w", err)
	}
	acc := newAccess(cfg, boot, cm)
	gater := &gate{a: acc, inbound: inbound, next: cfg.Gater, log: cfg.Logger}
	relayRes := relayv2.DefaultResources()
	relayRes.Limit = &relayv2.RelayLimit{Duration: relayConnDuration, Data: relayConnData}
	var self atomic.Pointer[host.Host] // for the relay peer source, set once built
	// libp2p's own hole punching metrics, when on, are set before this
	// option, which would replace them: one tracer does both.
	// Only a node that listens on QUIC (none does in a mesh with a network
	// key) can punch over QUIC: only it is told of TCP-only punches.
	tracer := &punchTracer{log: cfg.Logger.With("component", "holepunch"), quic: cfg.NetworkKey == nil && slices.ContainsFunc(listen, isQUIC)}
	punchTrace := holepunch.WithTracer(tracer)
	if cfg.Registerer != nil {
		punchTrace = holepunch.WithMetricsAndEventTracer(holepunch.NewMetricsTracer(holepunch.WithRegisterer(cfg.Registerer)), tracer)
	}
	// On error libp2p.New closes rm and cm itself.
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrs(listen...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(tls.ID, tls.New),
		libp2p.Muxer(yamux.ID, coalescingMuxer{yamux.DefaultTransport}),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.UserAgent(protocol.AgentVersion + "/" + version.String()),
		libp2p.EnableRelay(),
		libp2p.ConnectionGater(gater),
		libp2p.EnableHolePunching(punchTrace),
		libp2p.EnableAutoRelayWithPeerSource(relayCandidates(id, &self, boot),
			autorelay.WithBootDelay(0),
			autorelay.WithMinCandidates(1),
			autorelay.WithMinInterval(relayFindEvery),
			autorelay.WithBackoff(relayBackoff),
		),
	}
	if cfg.Registerer != nil {
		opts = append(opts, libp2p.PrometheusRegisterer(cfg.Registerer))
	} else {
		opts = append(opts, libp2p.DisableMetrics())
	}
	if cfg.NetworkKey != nil {
		opts = append(opts, libp2p.PrivateNetwork(cfg.NetworkKey)) // and no QUIC: pnet cannot cover it
	} else {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	switch cfg.Relay {
	case RelayMembers:
		opts = append(opts, libp2p.EnableRelayService(relayv2.WithResources(relayRes), relayv2.WithACL(relayACL{acc})))
	case RelayOpen:
		opts = append(opts, libp2p.EnableRelayService(relayv2.WithResources(relayRes)))
	}
	switch cfg.Reachability {
	case ReachabilityPublic:
		opts = append(opts, libp2p.ForceReachabilityPublic(), libp2p.EnableNATService())
	case ReachabilityPrivate:
		// No AutoNAT service: libp2p never runs it on a node forced
		// private, but builds its dialer (a second swarm, with its
		// peerstore and QUIC transports) all the same, and only the
		// service closes that dialer: a forced-private mesh left six
		// goroutines behind after Close (TestCloseLeavesNoGoroutines).
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	default:
		opts = append(opts, libp2p.EnableNATService())
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("libp2p host: %w", err)
	}
	self.Store(&h)
	nw := h.Network()
	gater.net.Store(&nw)
	return h, acc, nil
}

// relayCandidates is autorelay's peer source: the bootstrap peers, then the
// other connected peers, at most num. Autorelay connects to them and keeps
// those that serve circuit relay v2 (public weft nodes do).
func relayCandidates(id peer.ID, self *atomic.Pointer[host.Host], boot []peer.AddrInfo) autorelay.PeerSource {
	return func(ctx context.Context, num int) <-chan peer.AddrInfo {
		out := make(chan peer.AddrInfo, max(num, 0))
		defer close(out)
		seen := make(map[peer.ID]bool)
		add := func(ai peer.AddrInfo) {
			if len(seen) >= num || seen[ai.ID] {
				return
			}
			seen[ai.ID] = true
			out <- ai
		}
		for _, ai := range boot {
			if ai.ID != id {
				add(ai)
			}
		}
		// Autorelay may ask before libp2p.New has returned the host.
		if hp := self.Load(); hp != nil {
			h := *hp
			for _, p := range h.Network().Peers() {
				add(peer.AddrInfo{ID: p, Addrs: h.Peerstore().Addrs(p)})
			}
		}
		return out
	}
}
