package mesh

import (
	"fmt"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// TestGapsCoalesce: gaps noted while a check is armed join it (one check,
// so one repair session at most, per space); parents that arrived by the
// check start nothing; the first still missing names the peer to repair
// from; the records are bounded.
func TestGapsCoalesce(t *testing.T) {
	var g gaps
	id := func(i int) protocol.ID { return protocol.SpaceID(fmt.Sprint("msg", i)) }
	if !g.note([]protocol.ID{id(1)}, "p1") {
		t.Fatal("first gap did not arm the check")
	}
	for i := 2; i < 10; i++ {
		if g.note([]protocol.ID{id(i)}, peer.ID(fmt.Sprint("p", i))) {
			t.Fatalf("gap %d armed a second check", i)
		}
	}
	pending := g.take()
	if len(pending) != 9 {
		t.Fatalf("%d parents noted, want 9", len(pending))
	}
	arrived := func(protocol.ID) (bool, error) { return true, nil }
	if ps := stillMissing(pending, arrived); len(ps) != 0 {
		t.Errorf("every parent arrived, yet repair from %v", ps)
	}
	lacks := func(x protocol.ID) (bool, error) { return x != id(3) && x != id(5) && x != id(6), nil }
	g.note([]protocol.ID{id(6)}, "p3") // a second parent relayed by p3
	pending = append(pending, g.take()...)
	if ps := stillMissing(pending, lacks); !slices.Equal(ps, []peer.ID{"p3", "p5", "p6"}) {
		t.Errorf("repair from %v, want [p3 p5 p6] (each relay of a parent still missing, once)", ps)
	}
	if !g.note([]protocol.ID{id(1)}, "p1") {
		t.Error("after take, a new gap did not arm the check")
	}
	g.take()
	many := make([]protocol.ID, 2*maxGapParents)
	for i := range many {
		many[i] = id(i)
	}
	g.note(many, "p")
	if n := len(g.take()); n != maxGapParents {
		t.Errorf("%d parents kept, want at most %d", n, maxGapParents)
	}
}
