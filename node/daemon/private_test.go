package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

// TestPrivateConcurrent runs a private space's paths at once in one
// process (for the race detector): two members sending concurrently while
// a third joins, syncs and is removed.
func TestPrivateConcurrent(t *testing.T) {
	a, ca := startNode(t, nil)
	boot := a.Addrs()[0].String()
	b, cb := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	x, cx := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	ctx := context.Background()
	sp, err := ca.CreatePrivate(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		c interface {
			JoinInvite(context.Context, string) (api.Space, error)
		}
		id string
	}{{cb, b.ID().String()}, {cx, x.ID().String()}} {
		inv, err := ca.Invite(ctx, "team", api.InviteRequest{Peer: p.id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.c.JoinInvite(ctx, inv.Token); err != nil {
			t.Fatal(err)
		}
	}
	const each = 40
	var wg sync.WaitGroup
	for i, c := range []interface {
		SendText(context.Context, string, string) (api.Message, error)
	}{ca, cb} {
		wg.Go(func() {
			for k := range each {
				if _, err := c.SendText(ctx, sp.ID, fmt.Sprintf("%d-%d", i, k)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	if _, err := ca.RemoveMember(ctx, "team", x.ID().String()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	count := func(c interface {
		Read(context.Context, string, string, int) (api.Page, error)
	}) int {
		p, err := c.Read(ctx, sp.ID, "", 1000)
		if err != nil {
			return -1
		}
		return len(p.Messages)
	}
	// genesis, two joins, the removal and the posts
	want := 4 + 2*each
	eventually(t, 60*time.Second, "both members to hold everything", func() bool { return count(ca) == want && count(cb) == want })
	eventually(t, 30*time.Second, "x to learn of its removal", func() bool {
		ms, err := cx.Members(ctx, "team")
		return err == nil && len(ms.Members) == 2
	})
	if _, err := cx.SendText(ctx, "team", "x after"); err == nil {
		t.Fatal("x posted after its removal")
	}
}
