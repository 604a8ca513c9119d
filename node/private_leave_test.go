package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh/admit"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// TestPrivateLeaveUnconfirmed: a leave no member confirms stays pending,
// and the same signed leave is delivered later. The leaver l sends a
// message M its members a and b refuse (their quota for l's messages is
// set below it), then leaves: its leave names M, which the members lack,
// so both refuse the presented leave, and gossip and sync cannot bring M
// either. l must then keep its signed leave (also across a restart), stay
// in the space without taking part (its sends refused), and leave only
// once a member confirms; a and b keep counting it a member meanwhile.
// Once the members lift the quota, leaving again presents the same leave,
// which they take in (fetching M from l), and they drop l: one leave of
// l in their stores, the one first signed.
func TestPrivateLeaveUnconfirmed(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	b := privNode(t, "", a, nil)
	lhome := t.TempDir()
	l := privNode(t, lhome, a, nil)
	sp, err := a.CreatePrivate(ctx, "club", false)
	if err != nil {
		t.Fatal(err)
	}
	space := sp.ID
	for _, n := range []*Node{b, l} {
		_, tok, err := a.Invite("club", InviteOptions{Peer: n.ID()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.JoinInvite(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	isMember := func(n *Node, p *Node) bool { return n.private.get(space).current.Load().IsMember(p.ID()) }
	within(t, 20*time.Second, "three members on every node", func() bool {
		for _, n := range []*Node{a, b, l} {
			for _, p := range []*Node{a, b, l} {
				if !isMember(n, p) {
					return false
				}
			}
		}
		return true
	})
	within(t, 20*time.Second, "l connected to a and b", func() bool {
		net := l.mesh.Host().Network()
		return net.Connectedness(a.ID()) == network.Connected && net.Connectedness(b.ID()) == network.Connected
	})

	// The members take no more than 3,000 bytes more from l.
	setQuota := func(n *Node, on bool) {
		t.Helper()
		var lim store.SpaceLimits
		if on {
			u, err := n.store.SenderUsage(space, l.ID().String())
			if err != nil {
				t.Fatal(err)
			}
			lim.MaxSenderBytes = u.Bytes + 3000
		}
		if _, err := n.SetSpaceLimits(space.String(), lim); err != nil {
			t.Fatal(err)
		}
	}
	setQuota(a, true)
	setQuota(b, true)
	content, _ := json.Marshal(map[string]string{"text": strings.Repeat("m", 20_000)})
	big, err := l.Send(ctx, space, Post{Content: content})
	if err != nil {
		t.Fatal(err)
	}

	wantUnconfirmed := func(err error, when string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Code != api.CodeUnreachable || !strings.Contains(e.Msg, "confirmed") {
			t.Fatalf("%s: leave answered %v, want unreachable: no member confirmed", when, err)
		}
	}
	wantUnconfirmed(l.Leave(ctx, "club"), "members lacking the leave's parent")
	ls := l.private.get(space)
	first := ls.leave.Load()
	if first == nil {
		t.Fatal("l does not keep its unconfirmed leave")
	}
	leave, err := protocol.Validate(*first, time.Now(), l.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(leave.Prev, big.ID) {
		t.Fatalf("the leave's parents %v do not name M %s", leave.Prev, big.ID)
	}
	stillIn := func(when string) {
		t.Helper()
		sps, err := l.Spaces()
		if err != nil {
			t.Fatal(err)
		}
		if len(sps) != 1 || sps[0].ID != space {
			t.Fatalf("%s: l's spaces are %+v, want the club still", when, sps)
		}
		_, err = l.Send(ctx, space, Post{Content: json.RawMessage(`{"text":"after my leave"}`)})
		var e *Error
		if !errors.As(err, &e) || e.Code != api.CodeNotMember {
			t.Fatalf("%s: l sent after its leave: %v, want not_member", when, err)
		}
		for name, n := range map[string]*Node{"a": a, "b": b} {
			if !isMember(n, l) {
				t.Fatalf("%s: %s dropped l without its leave", when, name)
			}
			for _, id := range []protocol.ID{big.ID, leave.ID} {
				if has, _ := n.store.Has(id); has {
					t.Fatalf("%s: %s holds %s over its quota", when, name, id)
				}
			}
		}
	}
	stillIn("after the first leave")

	// Nor does l take in a join presented to it (its copy of the space is
	// no longer the members').
	j := privNode(t, "", a, nil)
	_, tok, err := a.Invite("club", InviteOptions{Peer: j.ID()})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := member.ParseInvite(tok)
	if err != nil {
		t.Fatal(err)
	}
	jc, _ := json.Marshal(member.Change{Op: member.OpJoin, Peer: j.ID().String(), Invite: tok})
	join, err := protocol.Sign(j.key, protocol.Draft{Space: space, CreatedAt: time.Now(), Prev: inv.Heads, Type: member.TypeMember, Content: jc}, j.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	laddr, err := ma.NewMultiaddr(l.mesh.Addrs()[0].String() + "/p2p/" + l.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.mesh.Connect(ctx, laddr); err != nil {
		t.Fatal(err)
	}
	err = admit.Present(ctx, j.mesh.Host(), l.ID(), join.Wire())
	var ref *admit.Refused
	if !errors.As(err, &ref) || ref.Code != api.CodeNotMember {
		t.Fatalf("a join presented to l while it leaves: %v, want refused as not_member", err)
	}
	if has, _ := l.store.Has(join.ID); has {
		t.Fatal("l stored a join presented to it while it leaves")
	}

	// Again: the same signed leave, refused again.
	wantUnconfirmed(l.Leave(ctx, "club"), "the second leave")
	if w := ls.leave.Load(); w == nil || !bytes.Equal(*w, *first) {
		t.Fatal("the second leave is not the first one")
	}
	stillIn("after the second leave")

	// After a restart l still holds its leave and presents it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = privNode(t, lhome, a, nil)
	ls = l.private.get(space)
	if w := ls.leave.Load(); w == nil || !bytes.Equal(*w, *first) {
		t.Fatal("after a restart l does not hold its unconfirmed leave")
	}
	within(t, 20*time.Second, "l connected to a again", func() bool {
		return l.mesh.Host().Network().Connectedness(a.ID()) == network.Connected
	})
	wantUnconfirmed(l.Leave(ctx, "club"), "the leave after a restart")
	stillIn("after a restart")

	// The members take l's messages again: the same leave is delivered, by
	// a leave or by l's background presenting it again, whichever comes
	// first (the other finds the space left). A member syncs a leave's
	// parents from its sender once per leaveSyncEvery: the presentations
	// above made it sync a moment ago, so the first leaves may be refused.
	setQuota(a, false)
	setQuota(b, false)
	for deadline := time.Now().Add(3 * leaveSyncEvery); !left(ctx, l); {
		if time.Now().After(deadline) {
			t.Fatalf("l's leave not taken %v after the members take its messages again", 3*leaveSyncEvery)
		}
		time.Sleep(500 * time.Millisecond) // polling: each try presents the leave to the members
	}
	if sps, err := l.Spaces(); err != nil || len(sps) != 0 {
		t.Fatalf("l's spaces after its leave: %+v (%v), want none", sps, err)
	}
	for name, n := range map[string]*Node{"a": a, "b": b} {
		within(t, 20*time.Second, name+" to drop l", func() bool { return !isMember(n, l) })
		page, _, err := n.readStored(space, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var leaves []protocol.ID
		for _, m := range page {
			if c, _, err := member.ParseChange(m.Message); err == nil && c.Op == member.OpLeave {
				leaves = append(leaves, m.ID)
			}
		}
		if len(leaves) != 1 || leaves[0] != leave.ID {
			t.Fatalf("%s holds the leaves %v, want the first one signed, %s", name, leaves, leave.ID)
		}
	}
}

// TestPrivateLeaveDeliveredBySync: a leave no member confirmed reaches
// them by sync (a member's background sync with the leaver, done here at
// once), and they drop the leaver, closing its connections; the leaver,
// presenting its leave again in the background, dials them, finds it
// taken and leaves, with no one running leave again.
func TestPrivateLeaveDeliveredBySync(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	l := privNode(t, "", a, nil)
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
	u, err := a.store.SenderUsage(space, l.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetSpaceLimits(space.String(), store.SpaceLimits{MaxSenderBytes: u.Bytes + 3000}); err != nil {
		t.Fatal(err)
	}
	content, _ := json.Marshal(map[string]string{"text": strings.Repeat("m", 20_000)})
	if _, err := l.Send(ctx, space, Post{Content: content}); err != nil {
		t.Fatal(err)
	}
	if err := l.Leave(ctx, "club"); err == nil {
		t.Fatal("the leave was confirmed by a member lacking its parent")
	}
	first := l.private.get(space).leave.Load()
	if first == nil {
		t.Fatal("l does not keep its unconfirmed leave")
	}
	leave, err := protocol.Validate(*first, time.Now(), l.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := a.SetSpaceLimits(space.String(), store.SpaceLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.mesh.Sync(ctx, l.ID(), space); err != nil {
		t.Fatalf("a's sync with l: %v", err)
	}
	within(t, 20*time.Second, "a to take in l's leave", func() bool { return !a.private.get(space).current.Load().IsMember(l.ID()) })
	if has, _ := a.store.Has(leave.ID); !has {
		t.Fatal("a dropped l without its leave")
	}
	within(t, 20*time.Second, "a to close l's connections", func() bool {
		return l.mesh.Host().Network().Connectedness(a.ID()) != network.Connected
	})
	within(t, 30*time.Second, "l to leave in the background", func() bool {
		sps, err := l.Spaces()
		return err == nil && len(sps) == 0
	})
	if l.private.get(space).leave.Load() != nil {
		t.Fatal("l left with its leave still pending")
	}
}

// TestPrivateLeaveDials: a member with no other member connected dials
// those it knows the addresses of to present its leave, rather than
// refusing to leave (a member that took its leave by sync has closed its
// connections, for one).
func TestPrivateLeaveDials(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	l := privNode(t, "", a, nil)
	sp, err := a.CreatePrivate(ctx, "club", false)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := a.Invite("club", InviteOptions{Peer: l.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.JoinInvite(ctx, tok); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "l a member on a", func() bool { return a.private.get(sp.ID).current.Load().IsMember(l.ID()) })
	if err := l.mesh.DropPeer(a.ID()); err != nil {
		t.Fatal(err)
	}
	if l.mesh.Host().Network().Connectedness(a.ID()) == network.Connected {
		t.Fatal("l still connected to a")
	}
	if err := l.Leave(ctx, "club"); err != nil {
		t.Fatalf("leave with the owner known but not connected: %v", err)
	}
	within(t, 20*time.Second, "a to drop l", func() bool { return !a.private.get(sp.ID).current.Load().IsMember(l.ID()) })
}
