package mesh

import (
	"strings"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// topicSpace returns the space of a weft topic.
func topicSpace(topic string) (protocol.ID, bool) {
	prefix := strings.TrimSuffix(protocol.Topic(protocol.ID{}), protocol.ID{}.String())
	rest, ok := strings.CutPrefix(topic, prefix)
	if !ok {
		return protocol.ID{}, false
	}
	id, err := protocol.ParseID(rest)
	return id, err == nil
}

// spaceAccessOptions are the gossipsub options that keep a space's
// messages from the peers access refuses (Config.SpaceAccess): their
// subscriptions to its topic are ignored, so neither flood publishing nor
// the mesh ever sends them its messages, and the router neither grafts
// them nor answers their IHAVE/IWANT. A peer that becomes a member later
// is taken in when it next announces its subscriptions (it joins after
// its membership, or reconnects).
func spaceAccessOptions(access func(protocol.ID, peer.ID) bool) []pubsub.Option {
	if access == nil {
		return nil
	}
	allowed := func(p peer.ID, topic string) bool {
		id, ok := topicSpace(topic)
		return !ok || access(id, p)
	}
	return []pubsub.Option{
		pubsub.WithPeerFilter(allowed),
		pubsub.WithSubscriptionFilter(subFilter(allowed)),
	}
}

// subFilter drops the subscriptions of peers a space does not admit.
type subFilter func(peer.ID, string) bool

func (f subFilter) CanSubscribe(string) bool { return true }

func (f subFilter) FilterIncomingSubscriptions(from peer.ID, subs []*pb.RPC_SubOpts) ([]*pb.RPC_SubOpts, error) {
	out := subs[:0:0]
	for _, s := range subs {
		// Unsubscribing is always taken.
		if !s.GetSubscribe() || f(from, s.GetTopicid()) {
			out = append(out, s)
		}
	}
	return out, nil
}

// DropPeer closes every connection to p: a peer that lost its access to a
// space must announce its subscriptions again, to be filtered anew.
func (m *Mesh) DropPeer(p peer.ID) error { return m.h.Network().ClosePeer(p) }
