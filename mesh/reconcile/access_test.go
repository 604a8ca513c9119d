package reconcile

import (
	"sync/atomic"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// TestAccessWithdrawnMidSession: a peer that loses access to a space while
// its session runs (removed from a private space meanwhile) is sent no
// message after that: access is checked before every exchange that
// carries messages, not only when the session starts.
func TestAccessWithdrawnMidSession(t *testing.T) {
	var calls atomic.Int32
	a := newNode(t)
	b := newNode(t, WithAccess(func(protocol.ID, peer.ID) bool {
		return calls.Add(1) == 1 // the session's start only
	}))
	msgs := newAuthor(t).chain(t, 200, 0)
	connect(t, a.h, b.h)
	addAll(b.st, msgs)
	stats, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace)
	if err == nil {
		t.Errorf("sync went on after the peer lost access (%d received)", stats.Received)
	}
	if got := len(a.st.ids(testSpace)); got != 0 {
		t.Errorf("the peer got %d of %d messages after it lost access, want none", got, len(msgs))
	}
	if calls.Load() < 2 {
		t.Errorf("access checked %d times, want again before messages went", calls.Load())
	}
}
