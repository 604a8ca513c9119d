package mesh

import (
	"testing"

	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

func TestTopicSpace(t *testing.T) {
	id := protocol.SpaceID("audit")
	if got, ok := topicSpace(protocol.Topic(id)); !ok || got != id {
		t.Fatalf("topicSpace(%s) = %s, %v", protocol.Topic(id), got, ok)
	}
	for _, bad := range []string{"", "/weft/space/1/", "/other/" + id.String(), protocol.Topic(id) + "x"} {
		if _, ok := topicSpace(bad); ok {
			t.Errorf("topicSpace(%q) ok", bad)
		}
	}
}

// TestSubFilter: a non-member's subscription to a private space's topic
// is dropped, its unsubscription and its other subscriptions kept.
func TestSubFilter(t *testing.T) {
	private, open := protocol.SpaceID("private"), protocol.SpaceID("open")
	member, stranger := peer.ID("member"), peer.ID("stranger")
	access := func(space protocol.ID, p peer.ID) bool { return space != private || p == member }
	opts := spaceAccessOptions(access)
	if len(opts) != 2 || spaceAccessOptions(nil) != nil {
		t.Fatalf("options: %d", len(opts))
	}
	f := subFilter(func(p peer.ID, topic string) bool {
		id, ok := topicSpace(topic)
		return !ok || access(id, p)
	})
	sub := func(topic string, on bool) *pb.RPC_SubOpts { return &pb.RPC_SubOpts{Topicid: &topic, Subscribe: &on} }
	in := []*pb.RPC_SubOpts{sub(protocol.Topic(private), true), sub(protocol.Topic(open), true), sub(protocol.Topic(private), false), sub("chat", true)}
	got, _ := f.FilterIncomingSubscriptions(stranger, in)
	if len(got) != 3 || got[0].GetTopicid() != protocol.Topic(open) {
		t.Fatalf("stranger kept %v", got)
	}
	if got, _ := f.FilterIncomingSubscriptions(member, in); len(got) != 4 {
		t.Fatalf("member kept %d of 4", len(got))
	}
}
