package node

import (
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/weftmesh/weft/mesh/admit"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/member"
)

// TestPrivateLeaveSyncsBounded: a member presenting leaves that name
// parents that do not exist cannot make a node sync with it on demand: at
// most one sync per member at a time and per leaveSyncEvery (the answering
// side's limit per peer does not cover a sync this node starts).
func TestPrivateLeaveSyncsBounded(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	b := privNode(t, "", a, nil)
	sp, err := a.CreatePrivate(ctx, "club", false)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := a.Invite("club", InviteOptions{Peer: b.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JoinInvite(ctx, tok); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "b a member on a", func() bool { return a.private.get(sp.ID).current.Load().IsMember(b.ID()) })
	before := a.mesh.SyncStats().Initiated
	const n = 20
	for i := range n {
		var fake protocol.ID
		_, _ = rand.Read(fake[:])
		c, _ := json.Marshal(member.Change{Op: member.OpLeave, Peer: b.ID().String()})
		m, err := protocol.Sign(b.key, protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Prev: []protocol.ID{fake}, Type: member.TypeMember, Content: c}, b.cfg.Limits)
		if err != nil {
			t.Fatal(err)
		}
		err = admit.Present(ctx, b.mesh.Host(), a.ID(), m.Wire())
		if i == 0 {
			t.Logf("bogus leave answered: %v", err)
		}
	}
	got := a.mesh.SyncStats().Initiated - before
	t.Logf("a initiated %d sync sessions with b for %d bogus leaves", got, n)
	// One for the leaves; a sync of the space's own (after the join) may
	// start meanwhile. Unbounded, it was one per leave.
	if got > 3 {
		t.Errorf("%d sync sessions started for %d leaves presented at once by one member, want at most 1 (and 2 others)", got, n)
	}
	if !a.private.get(sp.ID).current.Load().IsMember(b.ID()) {
		t.Fatal("b no longer a member")
	}
}
