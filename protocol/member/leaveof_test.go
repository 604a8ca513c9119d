package member

import (
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestLeaveOf: a member's leave is found while it is the change in force
// that names the member; not once the member is let in again, nor for a
// member removed, nor for one that never left.
func TestLeaveOf(t *testing.T) {
	a, b, c := newActor(t), newActor(t), newActor(t)
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
	change := func(by actor, c Change, prev protocol.ID) *protocol.Message {
		t.Helper()
		at = at.Add(time.Second)
		return add(sign(t, by, g.Space, TypeMember, c, at, prev))
	}
	joinB := change(b, Change{Op: OpJoin, Peer: b.id.String(), Invite: invite(t, a, g, Member, b.id, g.ID)}, g.ID)
	joinC := change(c, Change{Op: OpJoin, Peer: c.id.String(), Invite: invite(t, a, g, Member, c.id, joinB.ID)}, joinB.ID)
	if gr.LeaveOf(b.id) != nil || gr.LeaveOf(a.id) != nil {
		t.Fatal("a leave found for a member that never left")
	}
	leaveB := change(b, Change{Op: OpLeave, Peer: b.id.String()}, joinC.ID)
	if got := gr.LeaveOf(b.id); got == nil || got.ID != leaveB.ID {
		t.Fatalf("LeaveOf(b) = %v, want its leave %s", got, leaveB.ID)
	}
	again := change(b, Change{Op: OpJoin, Peer: b.id.String(), Invite: invite(t, a, g, Member, b.id, leaveB.ID)}, leaveB.ID)
	if got := gr.LeaveOf(b.id); got != nil {
		t.Fatalf("LeaveOf(b) after it joined again = %s, want none", got.ID)
	}
	rm := change(a, Change{Op: OpRemove, Peer: c.id.String()}, again.ID)
	if got := gr.LeaveOf(c.id); got != nil {
		t.Fatalf("LeaveOf(c), removed = %s, want none", got.ID)
	}
	// Concurrent with its removal, shallower: applied first, so the
	// removal (of a non-member by then) is skipped and the leave is the
	// change in force.
	leaveC := change(c, Change{Op: OpLeave, Peer: c.id.String()}, joinC.ID)
	if got := gr.LeaveOf(c.id); got == nil || got.ID != leaveC.ID {
		t.Fatalf("LeaveOf(c), a leave concurrent with its deeper removal %s = %v, want the leave %s (applied first; the removal is skipped)", rm.ID, got, leaveC.ID)
	}
}
