package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/weftmesh/weft/node/metrics"
	"go.opentelemetry.io/otel/trace"

	"github.com/libp2p/go-libp2p/core/connmgr"

	"github.com/weftmesh/weft/internal/version"
	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// Version is the daemon's version with the commit it was built from,
// reported by GET /v1/node and in agent cards.
var Version = version.String()

// Config configures a daemon.
type Config struct {
	// Metrics, when set, counts what the node does, and libp2p registers
	// its own metrics on its registry (see node/metrics). Nil: none.
	Metrics *metrics.Metrics
	// ResourceMetrics adds libp2p's resource manager metrics
	// (libp2p_rcmgr_…) to Metrics; they cost CPU on every stream (see
	// mesh.Config.ResourceMetrics), so they are off unless asked for.
	ResourceMetrics bool
	// Tracer, when set, records the node's OpenTelemetry spans (see
	// observe.go; node/telemetry makes one from the OTEL_* variables).
	// Nil: no spans, and call meta carries the trace context as always.
	Tracer trace.TracerProvider

	Home      string   // data dir: identity, store, socket
	Listen    []string // libp2p listen multiaddrs; empty = all interfaces, random ports
	Bootstrap []string // peers to connect at start (multiaddrs with /p2p/ID)
	MDNS      bool     // LAN discovery
	DHTMode   string   // "server", "client" or "auto"
	// Reachability is "auto" (AutoNAT finds out; empty means auto),
	// "public" or "private" (behind NAT): see mesh.Config.Reachability.
	Reachability string
	// PunchAgain is how long a peer may be reached only through relays
	// before hole punching is tried again with it (0: 15 s; negative:
	// never): see mesh.Config.PunchAgain.
	PunchAgain time.Duration
	Limits     protocol.Limits
	Logger     *slog.Logger

	// Retention is what the node keeps of each space unless set per space
	// (zero: everything until TTLs end).
	Retention store.Retention
	// SyncInterval is how often each space is synced with a random member
	// (0: mesh.DefaultSyncInterval; negative: only on joins and gaps).
	SyncInterval time.Duration
	// SyncWindow limits sync, and so history on join, to messages created
	// this long before now (0: all history the limits accept). Sync never
	// reaches further back than Limits.MaxAge: older messages would be
	// refused, so peers agree not to offer them.
	SyncWindow time.Duration
	// SweepInterval is how often expired messages and those beyond
	// retention are removed (0: store.DefaultSweepInterval).
	SweepInterval time.Duration

	// DM is who may put direct messages in this node's inbox, and how
	// many: the policy ("anyone", the default, or "trusted") and the
	// strangers' rates and quotas (zero fields: policy.DefaultDM's).
	// Trusted peers (Node.Trust) are never limited.
	DM policy.DMConfig

	// Flood resistance (see README, "Flood resistance").

	// Rates bound how fast gossip brings each space new messages: per
	// author, per forwarding peer, and for the authors this node does not
	// know yet together (the zero value: mesh.DefaultRateLimits()). This
	// node's own agents are paced below the author rate, so that its
	// peers never throttle it.
	Rates mesh.RateLimits
	// StrangerProbation is how long this node must have held a message of
	// an author before that author is a known member of the space, with a
	// publish rate of its own; until then it shares Rates.Strangers with
	// every other new author (0: DefaultStrangerProbation; negative: known
	// from its first message).
	StrangerProbation time.Duration
	// SpaceLimits are every space's quotas and message size unless set
	// per space (weft join --max-bytes…): zero fields take
	// DefaultSpaceLimits, negative ones are no bound. The message size is
	// never above Limits.MaxSize.
	SpaceLimits store.SpaceLimits

	// Card sets this node's agent card name, description and static
	// capabilities (stored; empty fields keep the stored ones; ID and
	// Version are ignored).
	Card protocol.Card

	// Gater, when set, decides which connections the host accepts and
	// makes (tests partition a mesh with it).
	Gater connmgr.ConnectionGater

	// NetworkKeyFile, when set, names a network key file (`weft
	// network-key new`): only nodes with the same key can connect, over
	// TCP only (see mesh.Config.NetworkKey).
	NetworkKeyFile string
	// AllowPeers, when non-nil, closes the mesh to every peer it does not
	// list (peer IDs), but the bootstrap peers: see mesh.Config.Allow.
	AllowPeers []string
	// Relay is whom the relay service (while this node is public) serves:
	// "members" (the default; empty means it), "open" or "off" (see
	// mesh.Config.Relay).
	Relay string
	// Conns limits inbound connections (zero fields: the defaults of
	// mesh.ConnLimits).
	Conns mesh.ConnLimits
}

// DefaultStrangerProbation is Config.StrangerProbation's default: long
// enough that a flooder cannot mint authors as fast as it floods (each
// one's first message goes through the strangers' shared rate, and waits
// this long before it earns a rate of its own), short enough that a new
// agent is a member within the hour it joins.
const DefaultStrangerProbation = 10 * time.Minute

// DefaultSpaceLimits are the quotas of a space: 1 GiB in all and 64 MiB
// per sender (a flooder fills at most its own share, and only 16 of them
// fill a space), for messages up to the protocol's size (Limits.MaxSize).
var DefaultSpaceLimits = store.SpaceLimits{MaxBytes: 1 << 30, MaxSenderBytes: 64 << 20}

// Default returns the configuration of `weft daemon` without flags.
func Default() Config {
	return Config{
		Home:    client.DefaultHome(),
		MDNS:    true,
		DHTMode: "server",
		Limits:  protocol.DefaultLimits(),
		DM:      policy.DefaultDM(),
	}
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.Home == "" {
		return errors.New("config: no home directory")
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.Retention.MaxCount < 0 || c.Retention.MaxAge < 0 {
		return fmt.Errorf("config: negative retention %+v", c.Retention)
	}
	if err := c.DM.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.SyncWindow < 0 {
		return fmt.Errorf("config: negative sync window %v", c.SyncWindow)
	}
	if c.Limits.MaxAge > 0 && c.SyncWindow > c.Limits.MaxAge {
		return fmt.Errorf("config: the sync window %v reaches further back than the max age %v, and messages older than that are refused: raise the max age (0: no bound) or shorten the window",
			c.SyncWindow, c.Limits.MaxAge)
	}
	if err := c.Rates.Validate(); err != nil {
		return fmt.Errorf("config: rates: %w", err)
	}
	if c.SpaceLimits.MaxMessageSize > c.Limits.MaxSize {
		return fmt.Errorf("config: max message size %d above the message limit %d", c.SpaceLimits.MaxMessageSize, c.Limits.MaxSize)
	}
	switch c.DHTMode {
	case "server", "client", "auto":
	default:
		return fmt.Errorf("config: dht mode %q: want server, client or auto", c.DHTMode)
	}
	switch c.Reachability {
	case "", "auto", "public", "private":
	default:
		return fmt.Errorf("config: reachability %q: want auto, public or private", c.Reachability)
	}
	return c.validateAccess()
}

// syncWindow is how far back sync reaches: the configured window, within
// the max age (0: no bound).
func (c Config) syncWindow() time.Duration {
	if c.SyncWindow == 0 {
		return c.Limits.MaxAge
	}
	return c.SyncWindow
}

func (c Config) identityPath() string { return filepath.Join(c.Home, "identity.key") }

// IdentityPath returns the file holding the node's identity key.
func (c Config) IdentityPath() string { return c.identityPath() }
func (c Config) storeDir() string     { return filepath.Join(c.Home, "store") }
