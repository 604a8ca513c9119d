package node

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// pendingLeave makes l, a member of a's private space "club", sign a leave
// that a cannot take: a refuses l's last message by its quota per sender,
// so the leave names a parent a lacks (as TestPrivateLeaveUnconfirmed).
// It returns the space and l's home.
func pendingLeave(t *testing.T, a *Node) (protocol.ID, *Node, string) {
	t.Helper()
	ctx := t.Context()
	lhome := t.TempDir()
	l := privNode(t, lhome, a, nil)
	sp, err := a.CreatePrivate(ctx, "club", false)
	if err != nil {
		t.Fatal(err)
	}
	space := sp.ID
	_, tok, err := a.Invite("club", InviteOptions{Peer: l.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.JoinInvite(ctx, tok); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "l a member on a", func() bool { return a.private.get(space).current.Load().IsMember(l.ID()) })
	u, _ := a.store.SenderUsage(space, l.ID().String())
	if _, err := a.SetSpaceLimits(space.String(), store.SpaceLimits{MaxSenderBytes: u.Bytes + 3000}); err != nil {
		t.Fatal(err)
	}
	content, _ := json.Marshal(map[string]string{"text": strings.Repeat("m", 20_000)})
	if _, err := l.Send(ctx, space, Post{Content: content}); err != nil {
		t.Fatal(err)
	}
	if err := l.Leave(ctx, "club"); err == nil {
		t.Fatal("the leave was confirmed: the test needs a member that cannot take it")
	}
	if l.private.get(space).leave.Load() == nil {
		t.Fatal("no pending leave")
	}
	return space, l, lhome
}

// left reports whether n has left space "club" (Leave succeeded, now or
// before).
func left(ctx context.Context, n *Node) bool {
	err := n.Leave(ctx, "club")
	var e *Error
	return err == nil || (errors.As(err, &e) && e.Code == api.CodeUnknownSpace)
}

// TestPrivateRemovedLeaverLeaves: a member whose leave no member confirmed,
// then removed (and told so), leaves: weft leave no longer presents a
// leave that members refuse for ever (its sender is no member there).
// After a restart, its removal, not its leave, is the change in force: the
// leave is not restored.
func TestPrivateRemovedLeaverLeaves(t *testing.T) {
	ctx := t.Context()
	for _, restart := range []bool{false, true} {
		a := privNode(t, "", nil, nil)
		space, l, lhome := pendingLeave(t, a)
		rm, err := a.Remove(ctx, "club", l.ID())
		if err != nil {
			t.Fatal(err)
		}
		within(t, 20*time.Second, "l to take in its removal", func() bool { return l.private.get(space).has(rm.ID) })
		if restart {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = privNode(t, lhome, a, nil)
			if s := l.private.get(space); s == nil || s.leave.Load() != nil {
				t.Fatalf("after a restart the removed node restores its leave, which its removal overrode (space restored: %v)", s != nil)
			}
		}
		if err := l.Leave(ctx, "club"); err != nil {
			t.Errorf("restart %v: a removed node with a pending leave cannot leave: %v", restart, err)
		}
		if _, err := l.Space("club"); err == nil {
			t.Errorf("restart %v: still in the space", restart)
		}
	}
}

// TestPrivateLeaveOfRemovedPeerTaken: a member presented the leave of a
// peer it has removed answers it as taken, so that the leaver, which does
// not know of its removal (it was down), leaves instead of presenting it
// for ever (the member syncs no parents from a non-member).
func TestPrivateLeaveOfRemovedPeerTaken(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	space, l, lhome := pendingLeave(t, a)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Remove(ctx, "club", l.ID()); err != nil {
		t.Fatal(err)
	}
	l = privNode(t, lhome, a, nil)
	s := l.private.get(space)
	if s == nil || s.leave.Load() == nil {
		t.Fatal("the restarted leaver did not restore its pending leave")
	}
	within(t, 30*time.Second, "the removed leaver to leave", func() bool { return left(ctx, l) })
}
