package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// TestLateJoinWithinQuota: a late joiner whose quota per sender is far
// below what one sender holds in the space fetches the history by sync
// (batches stored at once) and keeps exactly its quota's worth: no more,
// the rest declined, not a failed session, and what it keeps has the
// heads a Put of each would give.
func TestLateJoinWithinQuota(t *testing.T) {
	const senderQuota = 24 << 10
	a, _ := startNode(t, func(c *Config) { c.Rates = mesh.RateLimits{Off: true} })
	sp, _, err := a.node.Join("capped", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		if _, err := a.node.Send(context.Background(), sp.ID, node.Post{Content: []byte(kib(i))}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := startNode(t, func(c *Config) {
		bootstrapTo(a)(c)
		c.Rates = mesh.RateLimits{Off: true}
		c.SpaceLimits = store.SpaceLimits{MaxBytes: 1 << 20, MaxSenderBytes: senderQuota}
	})
	if _, _, err := b.node.Join("capped", nil); err != nil {
		t.Fatal(err)
	}
	st := b.node.Store()
	eventually(t, time.Minute, "B to fill the sender's quota by sync", func() bool {
		u, _ := st.Usage(sp.ID)
		return u.Bytes > senderQuota-2<<10 && b.node.Mesh().SyncStats().Dropped > 0
	})
	u, _ := st.Usage(sp.ID)
	if u.Bytes > senderQuota {
		t.Errorf("B holds %d bytes of one sender, quota %d", u.Bytes, senderQuota)
	}
	if n := count(t, b, sp.ID); int64(n) != u.Count {
		t.Errorf("B holds %d messages, its usage counts %d", n, u.Count)
	}
	// Heads: what no stored message names (a's messages form a chain).
	entries, _, err := st.Read(sp.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	named := map[protocol.ID]bool{}
	for _, e := range entries {
		for _, p := range e.Prev {
			named[p] = true
		}
	}
	heads, err := st.Heads(sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, e := range entries {
		if !named[e.ID] {
			want++
		}
	}
	if len(heads) != want {
		t.Errorf("B has %d heads, %d messages no stored one names", len(heads), want)
	}
	stats := b.node.Mesh().SyncStats()
	t.Logf("B: %d messages, %d bytes; sync received %d, dropped %d, %d sessions", u.Count, u.Bytes, stats.Received, stats.Dropped, stats.Sessions)
}
