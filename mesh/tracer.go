package mesh

import (
	"sync"
	"sync/atomic"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// meshTracer follows gossipsub's mesh: for each topic, the peers this node
// exchanges full messages with (a subset of the topic's subscribers). A
// message that arrives before a new subscriber is grafted reaches it only
// by sync, so tests wait for the mesh, not just the subscription. It is
// called from gossipsub's event loop and only updates a map.
type meshTracer struct {
	mu     sync.Mutex
	mesh   map[string]map[peer.ID]struct{}
	flight *inflight // told of accepted messages gossipsub then drops

	// Counts of what gossipsub did with the messages it received.
	delivered, duplicates, rejected, queueFull, throttled, undeliverable atomic.Int64
	// Messages (in RPCs) not sent to a peer: its outbound queue was full.
	dropped atomic.Int64
}

// GossipStats counts what gossipsub did with the messages this node
// received since it started: copies beyond the first of each message
// (Duplicates) cost a read and an ID each; messages dropped before
// validation because its queue was full or its throttle reached
// (QueueFull, Throttled), or after it because a subscriber's buffer was
// full (Undeliverable), reach the node only by another copy or by sync.
// SendDropped counts the messages this node did not send (publish or
// forward) to a peer because that peer's outbound queue was full.
// GapRepairs counts the sync sessions gap repair asked for (see
// repairGap).
type GossipStats struct {
	Delivered, Duplicates, Rejected, QueueFull, Throttled, Undeliverable int64
	SendDropped, GapRepairs                                              int64
}

func (t *meshTracer) stats() GossipStats {
	return GossipStats{
		Delivered: t.delivered.Load(), Duplicates: t.duplicates.Load(), Rejected: t.rejected.Load(),
		QueueFull: t.queueFull.Load(), Throttled: t.throttled.Load(), Undeliverable: t.undeliverable.Load(),
		SendDropped: t.dropped.Load(),
	}
}

var _ pubsub.RawTracer = (*meshTracer)(nil)

func newMeshTracer(flight *inflight) *meshTracer {
	return &meshTracer{mesh: make(map[string]map[peer.ID]struct{}), flight: flight}
}

// peers returns the mesh peers of topic.
func (t *meshTracer) peers(topic string) []peer.ID {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]peer.ID, 0, len(t.mesh[topic]))
	for p := range t.mesh[topic] {
		out = append(out, p)
	}
	return out
}

func (t *meshTracer) Graft(p peer.ID, topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mesh[topic] == nil {
		t.mesh[topic] = make(map[peer.ID]struct{})
	}
	t.mesh[topic][p] = struct{}{}
}

func (t *meshTracer) Prune(p peer.ID, topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mesh[topic], p)
}

func (t *meshTracer) Leave(topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mesh, topic)
}

// OnClosedOutboundStream is gossipsub dropping a peer.
func (t *meshTracer) OnClosedOutboundStream(p peer.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.mesh {
		delete(m, p)
	}
}

func (t *meshTracer) DeliverMessage(*pubsub.Message)   { t.delivered.Add(1) }
func (t *meshTracer) DuplicateMessage(*pubsub.Message) { t.duplicates.Add(1) }

// UndeliverableMessage is a message accepted, then dropped because the
// subscription's buffer was full: it is no longer on its way to the Sink
// (see inflight), so gap repair and sync fetch it at once.
func (t *meshTracer) UndeliverableMessage(pm *pubsub.Message) {
	t.undeliverable.Add(1)
	if a, ok := pm.ValidatorData.(*accepted); ok {
		t.flight.done(a.msg.ID)
	}
}

func (t *meshTracer) RejectMessage(_ *pubsub.Message, reason string) {
	switch reason {
	case pubsub.RejectValidationQueueFull:
		t.queueFull.Add(1)
	case pubsub.RejectValidationThrottled:
		t.throttled.Add(1)
	default:
		t.rejected.Add(1)
	}
}

// The rest of pubsub.RawTracer is of no interest.

func (*meshTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (*meshTracer) Join(string)                              {}
func (*meshTracer) ValidateMessage(*pubsub.Message)          {}
func (*meshTracer) ThrottlePeer(peer.ID)                     {}
func (*meshTracer) RecvRPC(*pubsub.RPC)                      {}
func (*meshTracer) SendRPC(*pubsub.RPC, peer.ID)             {}

// DropRPC is an RPC not sent to a peer whose outbound queue was full.
func (t *meshTracer) DropRPC(rpc *pubsub.RPC, _ peer.ID) {
	t.dropped.Add(int64(len(rpc.GetPublish())))
}
