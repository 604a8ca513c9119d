package mesh

import (
	"fmt"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestCircuitPeersBounded: a space's circuit members are bounded, added
// once, dropped once their connection is no longer limited-only, and
// dropped after circuitFailures failed sessions in a row. (The
// whole path, two members behind NATs reaching each other only through a
// relay, is examples/netbed's TestNAT.)
func TestCircuitPeersBounded(t *testing.T) {
	var c circuitPeers
	ids := make([]peer.ID, maxCircuitPeers+5)
	for i := range ids {
		ids[i] = peer.ID(fmt.Sprintf("peer-%02d", i))
	}
	for i, p := range ids {
		if got, want := c.add(p, nil), i < maxCircuitPeers; got != want {
			t.Fatalf("add #%d = %v, want %v", i, got, want)
		}
	}
	if c.add(ids[0], nil) {
		t.Fatal("a peer already in was added again")
	}
	// Keep the even ones: the odd ones leave, which makes room.
	even := func(p peer.ID) bool { return slices.Index(ids, p)%2 == 0 }
	kept := c.keep(even)
	if len(kept) != maxCircuitPeers/2 {
		t.Fatalf("kept %d, want %d", len(kept), maxCircuitPeers/2)
	}
	for _, p := range kept {
		if !even(p) {
			t.Fatalf("kept %s", p)
		}
	}
	if !c.add(ids[maxCircuitPeers], nil) {
		t.Fatal("no room after peers left")
	}
	if n := len(c.keep(func(peer.ID) bool { return true })); n != maxCircuitPeers/2+1 {
		t.Fatalf("%d members, want %d", n, maxCircuitPeers/2+1)
	}
	// Failed sessions: a success between them starts the count again; the
	// circuitFailures-th in a row lets the peer go.
	p := ids[0]
	has := func() bool { return slices.Contains(c.keep(func(peer.ID) bool { return true }), p) }
	for range circuitFailures - 1 {
		c.failed(p)
	}
	c.add(p, nil) // a session went well
	for range circuitFailures - 1 {
		c.failed(p)
	}
	if !has() {
		t.Fatal("dropped before circuitFailures failures in a row")
	}
	c.failed(p)
	if has() {
		t.Fatalf("kept after %d failures in a row", circuitFailures)
	}
}
