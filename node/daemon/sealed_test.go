package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// TestSealedConcurrent runs a sealed space's paths at once in one process
// (for the race detector): two members sending concurrently while a third
// is removed (a rekey), then a fourth joins and is given the older epoch's
// key by the owner's node; every member ends up reading every message in
// clear.
func TestSealedConcurrent(t *testing.T) {
	a, ca := startNode(t, nil)
	boot := a.Addrs()[0].String()
	b, cb := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	x, cx := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	_, cy := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	ctx := context.Background()
	sp, err := ca.CreateSealed(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Sealed || !sp.Private {
		t.Fatalf("created %+v", sp)
	}
	join := func(c *client.Client, peer string) {
		t.Helper()
		inv, err := ca.Invite(ctx, "vault", api.InviteRequest{Peer: peer})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.JoinInvite(ctx, inv.Token); err != nil {
			t.Fatal(err)
		}
	}
	join(cb, "") // a bearer invite
	join(cx, x.ID().String())
	const each = 30
	var wg sync.WaitGroup
	for i, c := range []*client.Client{ca, cb} {
		wg.Go(func() {
			for k := range each {
				if _, err := c.SendText(ctx, sp.ID, fmt.Sprintf("%d-%d", i, k)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	if _, err := ca.RemoveMember(ctx, "vault", x.ID().String()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	join(cy, "") // after the rekey: its invite carries epoch 1 only

	// clear counts the posts a client reads in clear, and fails on a
	// sealed marker that stays.
	clear := func(c *client.Client) (int, string) {
		p, err := c.Read(ctx, sp.ID, "", 1000)
		if err != nil {
			return -1, err.Error()
		}
		n, marker := 0, ""
		for _, m := range p.Messages {
			var v struct{ Text, Sealed string }
			_ = json.Unmarshal(m.Content, &v)
			if v.Text != "" {
				n++
			}
			if v.Sealed != "" {
				marker = v.Sealed
			}
		}
		return n, marker
	}
	for name, c := range map[string]*client.Client{"a": ca, "b": cb, "y": cy} {
		eventually(t, 60*time.Second, name+" to read every post in clear", func() bool {
			n, _ := clear(c)
			return n == 2*each
		})
		if _, marker := clear(c); marker != "" {
			t.Errorf("%s still shows %q", name, marker)
		}
	}
	eventually(t, 30*time.Second, "x to learn of its removal", func() bool {
		ms, err := cx.Members(ctx, "vault")
		return err == nil && len(ms.Members) == 2 && ms.Sealed
	})
	_ = b
}
