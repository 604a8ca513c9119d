package daemon

import (
	"context"
	"slices"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestPrivateByName: a private space is found by its name: of two with
// one name, the lower ID; once that one is left, the other; once both
// are, none (an open space of that name is another space).
func TestPrivateByName(t *testing.T) {
	ctx := context.Background()
	_, c := startNode(t, nil)
	var ids []string
	for range 2 {
		sp, err := c.CreatePrivate(ctx, "club")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sp.ID)
	}
	slices.SortFunc(ids, func(a, b string) int {
		x, _ := protocol.ParseID(a)
		y, _ := protocol.ParseID(b)
		return slices.Compare(x[:], y[:])
	})
	sentTo := func() string {
		t.Helper()
		m, err := c.SendText(ctx, "club", "hi")
		if err != nil {
			t.Fatalf("send to club: %v", err)
		}
		return m.Space
	}
	if got := sentTo(); got != ids[0] {
		t.Fatalf("sent to %s, want the lower ID %s", got, ids[0])
	}
	if err := c.Leave(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if got := sentTo(); got != ids[1] {
		t.Fatalf("after leaving %s: sent to %s, want %s", ids[0], got, ids[1])
	}
	if err := c.Leave(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendText(ctx, "club", "hi"); err == nil {
		t.Fatal("sent to club with both private spaces of that name left (and the open one not joined)")
	}
}
