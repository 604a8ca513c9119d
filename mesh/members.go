package mesh

import (
	"context"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// maxDeparted bounds how many members that left a space's topic (mostly
// by disconnecting) a node keeps remembering, per space: a member that
// reconnects is still kept, but whoever subscribes with ever new peer IDs
// cannot grow the set of kept peers without bound.
const maxDeparted = 256

// members are the peers seen on the topics of the joined spaces. They are
// protected in the connection manager under tagSpace while they are
// subscribed and, after they leave, until maxDeparted more recent
// departures push them out or the space is left. Its methods are safe for
// concurrent use.
type members struct {
	cm     connmgr.ConnManager
	mu     sync.Mutex
	spaces map[protocol.ID]map[peer.ID]time.Time // zero: subscribed now; else when it left
}

func newMembers(cm connmgr.ConnManager) *members {
	return &members{cm: cm, spaces: make(map[protocol.ID]map[peer.ID]time.Time)}
}

// joined records that p subscribed to space's topic.
func (ms *members) joined(space protocol.ID, p peer.ID) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	set := ms.spaces[space]
	if set == nil {
		set = make(map[peer.ID]time.Time)
		ms.spaces[space] = set
	}
	set[p] = time.Time{}
	ms.cm.Protect(p, tagSpace)
}

// left records that p left space's topic, and forgets the member that left
// longest ago if more than maxDeparted have.
func (ms *members) left(space protocol.ID, p peer.ID, now time.Time) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	set := ms.spaces[space]
	if _, ok := set[p]; !ok {
		return
	}
	set[p] = now
	departed, oldest := 0, peer.ID("")
	for q, t := range set {
		if t.IsZero() {
			continue
		}
		departed++
		if oldest == "" || t.Before(set[oldest]) {
			oldest = q
		}
	}
	if departed > maxDeparted {
		delete(set, oldest)
		ms.release(oldest)
	}
}

// forget drops every member of a space left.
func (ms *members) forget(space protocol.ID) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	set := ms.spaces[space]
	delete(ms.spaces, space)
	for p := range set {
		ms.release(p)
	}
}

// release unprotects p unless it is a member of another space. The caller
// holds mu.
func (ms *members) release(p peer.ID) {
	for _, set := range ms.spaces {
		if _, ok := set[p]; ok {
			return
		}
	}
	ms.cm.Unprotect(p, tagSpace)
}

// watchMembers records the peers joining and leaving s's topic until ctx
// ends.
func (m *Mesh) watchMembers(ctx context.Context, s *space) {
	h, err := s.topic.EventHandler()
	if err != nil {
		m.log.Warn("space members not tracked", "space", s.id, "err", err)
		return
	}
	defer h.Cancel()
	for {
		ev, err := h.NextPeerEvent(ctx)
		if err != nil {
			return
		}
		if ev.Type == pubsub.PeerJoin {
			m.members.joined(s.id, ev.Peer)
		} else {
			m.members.left(s.id, ev.Peer, m.now())
		}
	}
}
