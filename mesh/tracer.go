package mesh

import (
	"sync"

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
	mu   sync.Mutex
	mesh map[string]map[peer.ID]struct{}
}

var _ pubsub.RawTracer = (*meshTracer)(nil)

func newMeshTracer() *meshTracer {
	return &meshTracer{mesh: make(map[string]map[peer.ID]struct{})}
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

// The rest of pubsub.RawTracer is of no interest.

func (*meshTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (*meshTracer) Join(string)                              {}
func (*meshTracer) ValidateMessage(*pubsub.Message)          {}
func (*meshTracer) DeliverMessage(*pubsub.Message)           {}
func (*meshTracer) RejectMessage(*pubsub.Message, string)    {}
func (*meshTracer) DuplicateMessage(*pubsub.Message)         {}
func (*meshTracer) ThrottlePeer(peer.ID)                     {}
func (*meshTracer) RecvRPC(*pubsub.RPC)                      {}
func (*meshTracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (*meshTracer) DropRPC(*pubsub.RPC, peer.ID)             {}
func (*meshTracer) UndeliverableMessage(*pubsub.Message)     {}
