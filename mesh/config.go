package mesh

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// DHT modes accepted in Config.DHTMode.
const (
	DHTServer = "server"
	DHTClient = "client"
	DHTAuto   = "auto"
)

// Reachability settings accepted in Config.Reachability.
const (
	ReachabilityAuto    = "auto"
	ReachabilityPublic  = "public"
	ReachabilityPrivate = "private"
)

// Relay service modes accepted in Config.Relay.
const (
	// RelayMembers relays only for the peers this node keeps (see
	// Config.Relay); the default.
	RelayMembers = "members"
	// RelayOpen relays for any peer that can connect.
	RelayOpen = "open"
	// RelayOff runs no relay service.
	RelayOff = "off"
)

// Defaults used for zero fields of a Config.
var (
	DefaultListenAddrs = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
	// DefaultPrivateListenAddrs are the default with a NetworkKey: libp2p's
	// private networks run over TCP only.
	DefaultPrivateListenAddrs = []string{"/ip4/0.0.0.0/tcp/0"}
)

const (
	DefaultConnLow  = 64
	DefaultConnHigh = 256
)

// Config configures a Mesh. The zero value is usable: every zero field takes
// its default.
type Config struct {
	// ListenAddrs are multiaddrs to listen on; empty means
	// DefaultListenAddrs (TCP and QUIC on every IPv4 interface).
	ListenAddrs []string
	// Bootstrap peers are full multiaddrs ending in /p2p/<id>. They are
	// dialled at start, protected in the connection manager, and seed the DHT.
	Bootstrap []string
	// MDNS turns on LAN discovery.
	MDNS bool
	// DHTMode is DHTServer (default), DHTClient or DHTAuto.
	DHTMode string
	// ConnLow and ConnHigh are the connection manager's watermarks;
	// zero means DefaultConnLow / DefaultConnHigh.
	ConnLow, ConnHigh int
	// Limits bound accepted messages; the zero value means
	// protocol.DefaultLimits().
	Limits protocol.Limits
	// Logger receives the mesh's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock validators use; nil means time.Now.
	Now func() time.Time
	// History is this node's store of messages. When set, the mesh runs
	// the sync protocol (mesh/reconcile) for every joined space: with each
	// member when it joins the space's topic (on a new connection or a
	// reconnect), with a random member every SyncInterval, and with the
	// peer that relayed a message whose parents are missing. nil turns
	// sync off (gossip only).
	History reconcile.Store
	// SyncInterval is the period of background sync with a random member
	// of each space; zero means DefaultSyncInterval, negative turns it off.
	SyncInterval time.Duration
	// Gater, when set, decides which connections are allowed (a blocklist,
	// or a test that partitions a mesh).
	Gater connmgr.ConnectionGater
	// SyncWindow limits sync to messages created within this long before
	// now; zero syncs all the history the stores keep.
	SyncWindow time.Duration
	// Rates bound how fast gossip brings new messages of a space, per
	// author, per forwarding peer and for strangers (see RateLimits); the
	// zero value means DefaultRateLimits().
	Rates RateLimits
	// Reachability is whether peers can dial this node: ReachabilityAuto
	// (the default) lets AutoNAT find out by asking peers to dial back;
	// ReachabilityPublic (a node with a public address, e.g. a relay or
	// bootstrap node) and ReachabilityPrivate (a node known to be behind
	// NAT) skip the probing. A public node relays for others (circuit relay
	// v2); a private one reserves a slot on relays among its peers and
	// upgrades relayed connections by hole punching (DCUtR).
	Reachability string

	// NetworkKey, when set, makes this node a member of a private network
	// (libp2p pnet): every connection is encrypted with this 32-byte
	// pre-shared key below the libp2p handshake, so a peer without the
	// same key cannot complete one. Private networks run over TCP only (the
	// key does not cover QUIC): a listen address on another transport is
	// an error, and the default is DefaultPrivateListenAddrs.
	NetworkKey pnet.PSK
	// Allow, when set, closes the mesh to every peer it refuses (and that
	// is not a bootstrap peer, which is always allowed): the connection
	// gater refuses to dial them and drops their connections as soon as
	// the handshake names them, either way. It is called on every
	// connection and relay request, concurrently: it must be fast and safe
	// for concurrent use.
	Allow func(peer.ID) bool
	// Keep, when set, names further peers this node keeps (trusted peers,
	// say), with the bootstrap peers, the peers connected with Connect and
	// the members of joined spaces: see ConnLimits and Relay. The same
	// rules as Allow's apply.
	Keep func(peer.ID) bool
	// Relay is who the circuit relay v2 service (run while this node is
	// publicly reachable) relays for: RelayMembers (the default) only
	// between peers this node keeps or, in a closed mesh (Allow or
	// NetworkKey set), between the peers allowed in; RelayOpen for anyone
	// who can connect; RelayOff not at all.
	Relay string
	// Conns limits inbound connections; zero fields take their defaults.
	Conns ConnLimits

	// SpaceAccess, when set, says which peers may take part in a joined
	// space (private spaces: its members): gossipsub ignores the others'
	// subscriptions to its topic (so it never sends them its messages)
	// and their grafts, and sync neither answers nor starts a session of
	// the space with them. nil lets everyone in. Called often and
	// concurrently: it must be fast and safe for concurrent use.
	SpaceAccess func(space protocol.ID, p peer.ID) bool
	// SpaceRendezvous, when set, names the DHT rendezvous namespace of a
	// space ("" for none); nil means protocol.Rendezvous of its ID.
	SpaceRendezvous func(space protocol.ID) string
	// Registerer, when set, is where libp2p registers its Prometheus
	// metrics (swarm, resource manager, relay, hole punching, identify,
	// autonat…); nil turns libp2p's metrics off. libp2p's collectors are
	// shared by every host in a process: with several hosts in one process
	// they count for all of them.
	Registerer prometheus.Registerer
	// ResourceMetrics also counts libp2p's resource manager into
	// Registerer (libp2p_rcmgr_…: connections, streams, memory and
	// blocked reservations by scope). Off by default: its reporter runs on
	// every reservation of every stream, formatting a timestamp and
	// updating labelled vectors under one lock, which cost 7–11 % of the
	// callee's CPU in a call. Without it the libp2p_rcmgr_… collectors are
	// still registered (libp2p registers them) but never move.
	ResourceMetrics bool
	// OnSync, when set, is told of every sync session that ends, either
	// side (see reconcile.WithOnSession).
	OnSync func(reconcile.Session)
	// PunchAgain is how long a peer may be reached only through relays
	// before this node has hole punching tried again with it; the next
	// try is at least 35 s later, and the wait doubles after each, up to
	// 8 minutes (see Mesh.punchLoop). 0 means DefaultPunchAgain;
	// negative, never (libp2p's one try per circuit only).
	PunchAgain time.Duration
	// punchGap, for tests, shortens the least wait between two tries
	// (0: punchGap).
	punchGap time.Duration
}

// ConnLimits limit the connections peers open to this node. Peer IDs cost
// nothing, so the limits that matter count addresses and connections, and
// part of the inbound connections is kept for the peers this node keeps:
// its bootstrap peers, peers connected with Connect, members of its joined
// spaces (peers seen on their topics), peers Config.Keep names, and in a
// closed mesh the peers Config.Allow lets in. The connection manager never
// trims these.
type ConnLimits struct {
	// Inbound is how many inbound connections other peers may hold at
	// once; beyond it, only kept peers get in. Zero means libp2p's
	// auto-scaled inbound limit (64, and 64 more for every GiB of the
	// memory libp2p may use, an eighth of the machine's).
	Inbound int
	// Reserve is how many inbound connections beyond Inbound the kept
	// peers have to themselves; zero means DefaultConnReserve.
	Reserve int
	// PerIP is how many connections, inbound and outbound, one IPv4
	// address or IPv6 /56 may have at once (an IPv6 /48 eight times as
	// many); zero means DefaultConnsPerIP. It is checked when a connection
	// opens, before the peer is known, so it binds kept peers too.
	PerIP int
	// PerPeer is how many inbound connections one peer may hold at once;
	// zero means DefaultConnsPerPeer.
	PerPeer int
	// Exempt are networks without a per-IP limit; nil means loopback
	// (127.0.0.0/8 and ::1), as in libp2p. A non-nil empty list exempts
	// none (tests on 127.0.0.1 use it).
	Exempt []netip.Prefix
}

// Connection limit defaults (see ConnLimits).
const (
	// DefaultConnReserve: room for a small team's worth of kept peers
	// while strangers fill their share.
	DefaultConnReserve = 64
	// DefaultConnsPerIP is twice libp2p's 8: the agents of one team often
	// share a NAT, and one address still gets a small share of the
	// inbound limit.
	DefaultConnsPerIP = 16
	// DefaultConnsPerPeer is libp2p's: a peer rarely needs more than one
	// connection per transport, and 8 match the dials it may race.
	DefaultConnsPerPeer = 8
)

// DefaultSyncInterval is the background sync period used when
// Config.SyncInterval is zero.
const DefaultSyncInterval = 30 * time.Second

// Validate reports the first problem with c, naming the offending input.
func (c Config) Validate() error {
	for _, s := range c.ListenAddrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("bad multiaddr %q: %w", s, err)
		}
		if c.NetworkKey != nil && !isTCP(a) {
			return fmt.Errorf("listen address %q: a private network (network key) runs over TCP only; libp2p's pre-shared key does not cover QUIC, WebTransport or WebRTC", s)
		}
	}
	if c.NetworkKey != nil && len(c.NetworkKey) != NetworkKeySize {
		return fmt.Errorf("%w, not %d", errNetworkKeySize, len(c.NetworkKey))
	}
	switch c.Relay {
	case "", RelayMembers, RelayOpen, RelayOff:
	default:
		return fmt.Errorf("bad relay mode %q: want %q, %q or %q", c.Relay, RelayMembers, RelayOpen, RelayOff)
	}
	if l := c.Conns; l.Inbound < 0 || l.Reserve < 0 || l.PerIP < 0 || l.PerPeer < 0 {
		return fmt.Errorf("connection limits must not be negative (%+v)", l)
	}
	if _, err := parseBootstrap(c.Bootstrap); err != nil {
		return err
	}
	if _, err := dhtMode(c.DHTMode); err != nil {
		return err
	}
	switch c.Reachability {
	case "", ReachabilityAuto, ReachabilityPublic, ReachabilityPrivate:
	default:
		return fmt.Errorf("bad reachability %q: want %q, %q or %q", c.Reachability, ReachabilityAuto, ReachabilityPublic, ReachabilityPrivate)
	}
	if c.SyncWindow < 0 {
		return fmt.Errorf("sync window %v is negative", c.SyncWindow)
	}
	if c.ConnLow < 0 || c.ConnHigh < 0 {
		return fmt.Errorf("connection watermarks must not be negative (low %d, high %d)", c.ConnLow, c.ConnHigh)
	}
	if c.ConnLow != 0 && c.ConnHigh != 0 && c.ConnLow > c.ConnHigh {
		return fmt.Errorf("connection low watermark %d above high watermark %d", c.ConnLow, c.ConnHigh)
	}
	if c.Limits != (protocol.Limits{}) {
		if err := c.Limits.Validate(); err != nil {
			return fmt.Errorf("limits: %w", err)
		}
	}
	return c.Rates.Validate()
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if len(c.ListenAddrs) == 0 {
		c.ListenAddrs = DefaultListenAddrs
		if c.NetworkKey != nil {
			c.ListenAddrs = DefaultPrivateListenAddrs
		}
	}
	if c.Relay == "" {
		c.Relay = RelayMembers
	}
	if c.Conns.Reserve == 0 {
		c.Conns.Reserve = DefaultConnReserve
	}
	if c.Conns.PerIP == 0 {
		c.Conns.PerIP = DefaultConnsPerIP
	}
	if c.Conns.PerPeer == 0 {
		c.Conns.PerPeer = DefaultConnsPerPeer
	}
	if c.DHTMode == "" {
		c.DHTMode = DHTServer
	}
	if c.Reachability == "" {
		c.Reachability = ReachabilityAuto
	}
	if c.ConnLow == 0 {
		c.ConnLow = DefaultConnLow
		if c.ConnHigh != 0 && c.ConnHigh < c.ConnLow {
			c.ConnLow = c.ConnHigh
		}
	}
	if c.ConnHigh == 0 {
		c.ConnHigh = max(DefaultConnHigh, c.ConnLow)
	}
	if c.Limits == (protocol.Limits{}) {
		c.Limits = protocol.DefaultLimits()
	}
	if c.Rates == (RateLimits{}) {
		c.Rates = DefaultRateLimits()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.PunchAgain == 0 {
		c.PunchAgain = DefaultPunchAgain
	}
	return c
}

func parseBootstrap(addrs []string) ([]peer.AddrInfo, error) {
	var out []peer.AddrInfo
	index := make(map[peer.ID]int)
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("bad multiaddr %q: %w", s, err)
		}
		ai, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			return nil, fmt.Errorf("bad bootstrap multiaddr %q: must end in /p2p/<peer id>: %w", s, err)
		}
		if i, ok := index[ai.ID]; ok { // several addresses of one peer
			out[i].Addrs = append(out[i].Addrs, ai.Addrs...)
			continue
		}
		index[ai.ID] = len(out)
		out = append(out, *ai)
	}
	return out, nil
}

// isTCP reports whether a is a plain TCP address (no QUIC, WebSocket or
// other transport on top).
func isTCP(a ma.Multiaddr) bool {
	ps := a.Protocols()
	return len(ps) == 2 && ps[1].Code == ma.P_TCP
}

func parseListen(addrs []string) ([]ma.Multiaddr, error) {
	out := make([]ma.Multiaddr, 0, len(addrs))
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("bad multiaddr %q: %w", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

var errDHTMode = errors.New("bad DHT mode")

func dhtMode(s string) (dht.ModeOpt, error) {
	switch s {
	case "", DHTServer:
		return dht.ModeServer, nil
	case DHTClient:
		return dht.ModeClient, nil
	case DHTAuto:
		return dht.ModeAuto, nil
	}
	return 0, fmt.Errorf("%w %q: want %q, %q or %q", errDHTMode, s, DHTServer, DHTClient, DHTAuto)
}
