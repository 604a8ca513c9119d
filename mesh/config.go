package mesh

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/peer"
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

// Defaults used for zero fields of a Config.
var (
	DefaultListenAddrs = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
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
}

// DefaultSyncInterval is the background sync period used when
// Config.SyncInterval is zero.
const DefaultSyncInterval = 30 * time.Second

// Validate reports the first problem with c, naming the offending input.
func (c Config) Validate() error {
	for _, s := range c.ListenAddrs {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return fmt.Errorf("bad multiaddr %q: %w", s, err)
		}
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
