package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// TestLeavePrivate: a member that leaves a private space is gone from
// every member's list; a member with no other member connected cannot
// leave (it stays joined, and a member in its own view) and is told why.
func TestLeavePrivate(t *testing.T) {
	ctx := context.Background()
	a, ca, stopA := runNode(t, nil)
	boot := a.Addrs()[0].String()
	b, cb := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	c, cc := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	if _, err := ca.CreatePrivate(ctx, "club"); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client.Client{cb, cc} {
		inv, err := ca.Invite(ctx, "club", api.InviteRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.JoinInvite(ctx, inv.Token); err != nil {
			t.Fatal(err)
		}
	}
	isMember := func(cl *client.Client, p string) bool {
		ms, err := cl.Members(ctx, "club")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms.Members {
			if m.Peer == p {
				return true
			}
		}
		return false
	}
	cID := c.ID().String()
	eventually(t, 20*time.Second, "c a member on b", func() bool { return isMember(cb, cID) })

	if err := cc.Leave(ctx, "club"); err != nil {
		t.Fatalf("c leaving: %v", err)
	}
	for name, cl := range map[string]*client.Client{"a": ca, "b": cb} {
		eventually(t, 20*time.Second, "c gone from the members on "+name, func() bool { return !isMember(cl, cID) })
	}

	// b, with the owner stopped and no other member left: refused.
	stopA()
	eventually(t, 20*time.Second, "b to lose its connection to a", func() bool {
		ps, err := cb.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.ID == a.ID().String() {
				return false
			}
		}
		return true
	})
	err := cb.Leave(ctx, "club")
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUnreachable || !strings.Contains(ae.Message, "no other member") {
		t.Fatalf("leaving with no member connected: %v, want unreachable", err)
	}
	sps, err := cb.Spaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sps) != 1 || sps[0].Name != "club" {
		t.Fatalf("b's spaces after the refused leave: %+v, want club still", sps)
	}
	if !isMember(cb, b.ID().String()) {
		t.Fatal("b is no member in its own view after a refused leave")
	}
}

// TestRemovedServesNoOne: a member removed from a private space takes no
// part in it any more: a joiner whose invite names it and the owner (who
// is down) cannot join through it, nor take its stale copy of the space
// for the members'.
func TestRemovedServesNoOne(t *testing.T) {
	ctx := context.Background()
	a, ca, stopA := runNode(t, nil)
	boot := a.Addrs()[0].String()
	x, cx := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	_, cy := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	if _, err := ca.CreatePrivate(ctx, "club"); err != nil {
		t.Fatal(err)
	}
	inv, err := ca.Invite(ctx, "club", api.InviteRequest{Peer: x.ID().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cx.JoinInvite(ctx, inv.Token); err != nil {
		t.Fatal(err)
	}
	forY, err := ca.Invite(ctx, "club", api.InviteRequest{}) // names a and x
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.RemoveMember(ctx, "club", x.ID().String()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "x to learn of its removal", func() bool {
		ms, err := cx.Members(ctx, "club")
		return err == nil && len(ms.Members) == 1
	})
	stopA()
	if sp, err := cy.JoinInvite(ctx, forY.Token); err == nil {
		t.Fatalf("y joined %+v through the removed member", sp)
	}
}
