package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestRaisedLimitsReadBack: a message accepted under raised limits reads
// back (page, message, thread, events) after the daemon restarts with the
// default limits again. Stored messages were read under the default limits
// before, so an 80-parent message made the whole page unreadable (503).
func TestRaisedLimitsReadBack(t *testing.T) {
	home := tempHome(t)
	raised := func(c *Config) {
		c.Home = home
		c.Limits.MaxPrev = 100
	}
	d, c, stop := runNode(t, raised)
	ctx := context.Background()
	if _, err := c.Join(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	prev := make([]protocol.ID, 80)
	for i := range prev {
		prev[i] = protocol.ID(sha256.Sum256(fmt.Appendf(nil, "parent %d", i)))
	}
	m, err := protocol.Sign(keyOf(t, d), protocol.Draft{Space: protocol.SpaceID("wide"), CreatedAt: time.Now(), Prev: prev,
		Type: "text", Content: json.RawMessage(`{"text":"eighty parents"}`)}, d.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.node.Accept(ctx, m); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		page, err := c.Read(ctx, "wide", "", 10)
		if err != nil || len(page.Messages) != 1 || len(page.Messages[0].Prev) != 80 {
			t.Fatalf("%s: page %+v, %v", when, page, err)
		}
		if got, err := c.Message(ctx, m.ID.String()); err != nil || got.ID != m.ID.String() {
			t.Fatalf("%s: message %v, %v", when, got.ID, err)
		}
	}
	check("with the raised limits")
	stop()
	_, c, stop = runNode(t, func(c *Config) { c.Home = home })
	defer stop()
	check("after a restart with the default limits")
}
