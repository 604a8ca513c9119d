package daemon

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
)

// TestGapRepairManyHeads: TestGapRepair with a space of 8 heads
// (7 siblings both nodes hold, and the lost one): the next send from A
// must still let B notice and fetch the lost message without a periodic
// sync: the next send names the newest heads, the lost one among them.
func TestGapRepairManyHeads(t *testing.T) {
	noTimer := func(c *Config) { c.SyncInterval = -1 }
	a, _ := startNode(t, noTimer)
	b, _ := startNode(t, func(c *Config) { noTimer(c); bootstrapTo(a)(c) })
	sp, _, err := a.node.Join("gaps-many", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.node.Join("gaps-many", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a and b to be topic peers", func() bool {
		return len(a.node.Mesh().SpacePeers(sp.ID)) == 1 && len(b.node.Mesh().SpacePeers(sp.ID)) == 1
	})
	eventually(t, 30*time.Second, "the join-time syncs to finish", func() bool {
		return a.node.Mesh().SyncStats().Initiated > 0 && b.node.Mesh().SyncStats().Initiated > 0 && a.node.Mesh().SyncIdle() && b.node.Mesh().SyncIdle()
	})
	for i := range 7 { // concurrent sends elsewhere, which both hold
		m, err := protocol.Sign(keyOf(t, b), protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Type: "text",
			Content: fmt.Appendf(nil, `{"text":"sibling %d"}`, i)}, b.cfg.Limits)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []*Daemon{a, b} {
			if _, _, err := d.node.Accept(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	lost, err := protocol.Sign(keyOf(t, a), protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Type: "text",
		Content: []byte(`{"text":"lost in gossip"}`)}, a.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.node.Accept(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	next, err := a.node.Send(context.Background(), sp.ID, node.Post{Content: []byte(`{"text":"after it"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(next.Prev, lost.ID) {
		t.Fatalf("the next send names %v, not the lost message, the newest head", next.Prev)
	}
	eventually(t, 30*time.Second, "b to get the next message", func() bool {
		has, err := b.node.Store().Has(next.ID)
		return err == nil && has
	})
	eventually(t, 10*time.Second, "b to fetch the lost message", func() bool {
		has, err := b.node.Store().Has(lost.ID)
		return err == nil && has
	})
}
