package mesh

import (
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestPunchAgainKeepsCircuitMembers: the circuits punch-again closes must
// not count as circuits that ended too soon after a redial (circuitStable)
// and get a circuit member dropped: with a short PunchAgain its tries came
// a few seconds apart, and the side that did not try cannot tell its
// close from a cut (found by an adversarial review). The tries are now at
// least punchGap apart, and the trying side does not count its own.
func TestPunchAgainKeepsCircuitMembers(t *testing.T) {
	space := protocol.SpaceID("test/punch/members")
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	natted := Config{
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Reachability: ReachabilityPrivate,
		Gater: coneNAT{relay.ID()}, History: emptyHistory{},
		SpaceRendezvous: func(protocol.ID) string { return "" },
		PunchAgain:      time.Second,
	}
	a, _ := newTestMesh(t, natted, relay)
	b, _ := newTestMesh(t, natted, relay)
	joinThroughRelay(t, space, a, b)
	if _, err := b.Sync(t.Context(), a.ID(), space); err != nil {
		t.Fatal(err)
	}
	isMember := func(m, of *Mesh) bool { return slices.Contains(circuitMembers(m, space), of.ID()) }
	waitFor(t, 5*time.Second, "members of each other", func() bool { return isMember(a, b) && isMember(b, a) })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if !isMember(a, b) || !isMember(b, a) {
			t.Fatalf("a circuit member dropped after punch-again's closes (a has b: %v, b has a: %v)", isMember(a, b), isMember(b, a))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
