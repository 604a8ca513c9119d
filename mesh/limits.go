package mesh

import (
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/mesh/direct"
	"github.com/weftmesh/weft/mesh/reconcile"
)

// serviceLimit is the resource manager's limits of one of weft's stream
// protocols: its streams are attached to the named service by their
// handlers (and callers), so these bound them as libp2p's own limits bound
// identify or ping. total is the whole service's limit, scaled up by
// totalInc for every GiB the host gives libp2p (as libp2p's defaults are);
// perPeer is each peer's share, fixed. Memory counts what the protocol's
// streams reserve in their scopes (each package's MaxStreamMemory), not
// the muxer's buffers, which the connection's scope holds.
type serviceLimit struct {
	name     string
	total    rcmgr.BaseLimit
	totalInc rcmgr.BaseLimitIncrease
	perPeer  rcmgr.BaseLimit
}

// serviceLimits are the limits of weft's protocols. Each per-peer limit is
// below libp2p's default per-peer limit of a protocol (64 inbound streams),
// so the service's limit is the one that binds; together the per-peer
// memory limits (about 44 MiB) stay under libp2p's default memory of a
// peer (64 MiB).
var serviceLimits = []serviceLimit{
	{
		// Calls (invoke and stream invoke, one stream each) are the
		// protocol agents use most, and a call may stay open a long time
		// (a stream invoke), so calls get many concurrent streams: as many
		// as the call service serves at once (call.DefaultMaxCalls), each
		// way. Memory is the requests held by calls in flight (a call
		// reserves its request's size, at most call.MaxStreamMemory, 1.5
		// MiB): 64 MiB holds over 40 requests at the size limit at once, or
		// thousands of small ones, plus 64 MiB per GiB for libp2p.
		name: call.ServiceName,
		total: rcmgr.BaseLimit{
			StreamsInbound:  call.DefaultMaxCalls,
			StreamsOutbound: call.DefaultMaxCalls,
			Streams:         2 * call.DefaultMaxCalls,
			Memory:          64 << 20,
		},
		totalInc: rcmgr.BaseLimitIncrease{Memory: 64 << 20},
		// One peer may have as many calls in flight as the call service
		// admits from one peer (call.DefaultMaxPerPeer), and this node as
		// many to it, since the peer would refuse more. Streams still
		// sending their request, which the call service does not count
		// yet, count here. 16 MiB is ten requests at the size limit at
		// once: one peer cannot fill the service's memory.
		perPeer: rcmgr.BaseLimit{
			StreamsInbound:  call.DefaultMaxPerPeer,
			StreamsOutbound: call.DefaultMaxPerPeer,
			Streams:         2 * call.DefaultMaxPerPeer,
			Memory:          16 << 20,
		},
	},
	{
		// Direct messages: a sender's outbox delivers to a recipient over
		// one stream at a time, batching what is queued, so streams are
		// few per peer; a node may receive from many peers at once. A
		// served stream reserves one message at the size limit for its
		// life (direct.MaxStreamMemory, about 1 MiB), so memory binds
		// before streams: 64 MiB (and 64 MiB per GiB for libp2p) is about
		// 60 senders at once. A refused stream costs the sender a retry,
		// not the message: the outbox keeps it.
		name: direct.ServiceName,
		total: rcmgr.BaseLimit{
			StreamsInbound:  256,
			StreamsOutbound: 256,
			Streams:         512,
			Memory:          64 << 20,
		},
		totalInc: rcmgr.BaseLimitIncrease{Memory: 64 << 20},
		// Four streams a peer: the one delivering, one still closing as
		// the next batch starts, and room for a retry racing them.
		perPeer: rcmgr.BaseLimit{
			StreamsInbound:  4,
			StreamsOutbound: 4,
			Streams:         8,
			Memory:          4 * direct.MaxStreamMemory,
		},
	},
	{
		// Agent cards and health: one small request and answer per stream,
		// over in a round trip. Inbound, as many as the agent service
		// answers at once (64); outbound more, since a Discover asks 8
		// candidates at once and several may run with the API's card and
		// health requests. A served request reserves its query
		// (agent.MaxStreamMemory, 1 KiB): 1 MiB is plenty.
		name: agent.ServiceName,
		total: rcmgr.BaseLimit{
			StreamsInbound:  64,
			StreamsOutbound: 256,
			Streams:         320,
			Memory:          1 << 20,
		},
		// A peer asks for a card or a health at a time, a few at most;
		// eight keep one peer from taking more than an eighth of the 64
		// requests answered at once.
		perPeer: rcmgr.BaseLimit{
			StreamsInbound:  8,
			StreamsOutbound: 8,
			Streams:         16,
			Memory:          8 * agent.MaxStreamMemory,
		},
	},
	{
		// Sync sessions run one per space at a time on a node, each on one
		// stream, and a node answers at most 32 at once (more are told
		// busy and come back later). A session holds the frame it is
		// processing, at most reconcile.MaxStreamMemory (about 9 MiB) but
		// usually far less: 64 MiB (and 64 MiB per GiB for libp2p) holds
		// seven frames at the limit at once.
		name: reconcile.ServiceName,
		total: rcmgr.BaseLimit{
			StreamsInbound:  32,
			StreamsOutbound: 32,
			Streams:         64,
			Memory:          64 << 20,
		},
		totalInc: rcmgr.BaseLimitIncrease{Memory: 64 << 20},
		// Few per peer: one session per space the two nodes share, at a
		// time; four at once (more are told busy and retried), so one peer
		// takes at most an eighth of the sessions answered. 24 MiB holds
		// two frames at the limit at once.
		perPeer: rcmgr.BaseLimit{
			StreamsInbound:  4,
			StreamsOutbound: 4,
			Streams:         8,
			Memory:          24 << 20,
		},
	},
}

// addServiceLimits adds serviceLimits to cfg.
func addServiceLimits(cfg *rcmgr.ScalingLimitConfig) {
	for _, l := range serviceLimits {
		cfg.AddServiceLimit(l.name, l.total, l.totalInc)
		cfg.AddServicePeerLimit(l.name, l.perPeer, rcmgr.BaseLimitIncrease{})
	}
}
