package member

import (
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestLeaveOfFollowsResolution: LeaveOf gives the change in force, as the
// resolution applies it, not the deepest one naming the member.
func TestLeaveOfFollowsResolution(t *testing.T) {
	a, b, c, x := newActor(t), newActor(t), newActor(t), newActor(t)
	g := genesis(t, a)
	gr, err := NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	add := func(m *protocol.Message) *protocol.Message {
		t.Helper()
		if _, err := gr.Check(m); err != nil {
			t.Fatal(err)
		}
		if err := gr.Add(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	msg := func(by actor, typ string, c any, prev protocol.ID) *protocol.Message {
		t.Helper()
		at = at.Add(time.Second)
		return add(sign(t, by, g.Space, typ, c, at, prev))
	}
	joinB := msg(b, TypeMember, Change{Op: OpJoin, Peer: b.id.String(), Invite: invite(t, a, g, Member, b.id, g.ID)}, g.ID)
	joinC := msg(c, TypeMember, Change{Op: OpJoin, Peer: c.id.String(), Invite: invite(t, a, g, Member, c.id, joinB.ID)}, joinB.ID)
	joinX := msg(x, TypeMember, Change{Op: OpJoin, Peer: x.id.String(), Invite: invite(t, a, g, Admin, x.id, joinC.ID)}, joinC.ID) // depth 3

	// Case 1: c is removed (depth 4) concurrently with c's own leave made
	// deeper (depth 6) after two posts: the leave is skipped (c was no
	// member by then), yet LeaveOf(c) gives it.
	rmC := msg(a, TypeMember, Change{Op: OpRemove, Peer: c.id.String()}, joinX.ID)
	p1 := msg(c, "text", map[string]string{"text": "1"}, joinX.ID)
	p2 := msg(c, "text", map[string]string{"text": "2"}, p1.ID)
	leaveC := msg(c, TypeMember, Change{Op: OpLeave, Peer: c.id.String()}, p2.ID)
	_ = rmC
	st := gr.Current()
	if st.IsMember(c.id) {
		t.Fatal("c still a member")
	}
	if got := gr.LeaveOf(c.id); got != nil {
		t.Errorf("case 1: LeaveOf(c) = %s (the leave %s is at depth 6), want none: the leave was skipped, c was removed at depth 4", got.ID, leaveC.ID)
	}

	// Case 2: b's leave (depth 5) is in force, but an admin x, removed
	// by the owner at depth 4 concurrently, "removes" b at depth 6; that
	// removal is skipped. LeaveOf(b) returns nil although b's leave is
	// the change that made b a non-member: restoreLeave would not restore it.
	rmX := msg(a, TypeMember, Change{Op: OpRemove, Peer: x.id.String()}, joinX.ID) // depth 4
	q1 := msg(b, "text", map[string]string{"text": "q"}, joinX.ID)                 // depth 4
	leaveB := msg(b, TypeMember, Change{Op: OpLeave, Peer: b.id.String()}, q1.ID)  // depth 5
	r1 := msg(x, "text", map[string]string{"text": "r1"}, joinX.ID)                // 4
	r2 := msg(x, "text", map[string]string{"text": "r2"}, r1.ID)                   // 5
	xrmB := msg(x, TypeMember, Change{Op: OpRemove, Peer: b.id.String()}, r2.ID)   // 6, skipped: x removed at 4
	_, _ = rmX, xrmB
	st = gr.Current()
	if st.IsMember(b.id) || st.IsMember(x.id) {
		t.Fatal("b or x still a member")
	}
	if got := gr.LeaveOf(b.id); got == nil || got.ID != leaveB.ID {
		t.Errorf("case 2: LeaveOf(b) = %v, want b's leave %s, which is the change in force", got, leaveB.ID)
	}
}
