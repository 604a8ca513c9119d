package mesh

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// coneNAT gates a node as a NAT would that hole punching cannot cross: it
// dials the relay, and the others only through the relay; it accepts a
// connection only when it comes through a relay.
type coneNAT struct{ relay peer.ID }

func (coneNAT) InterceptPeerDial(peer.ID) bool { return true }
func (g coneNAT) InterceptAddrDial(p peer.ID, a ma.Multiaddr) bool {
	return p == g.relay || isCircuit(a)
}
func (coneNAT) InterceptAccept(cm network.ConnMultiaddrs) bool {
	return isCircuit(cm.RemoteMultiaddr())
}
func (coneNAT) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
func (coneNAT) InterceptSecured(d network.Direction, _ peer.ID, cm network.ConnMultiaddrs) bool {
	return d == network.DirOutbound || isCircuit(cm.RemoteMultiaddr())
}

// TestCircuitRedial: two members behind NATs reach each other only
// through a relay, and sync a space they share over the circuit. When the
// circuit ends (its relay's limits, a restart), each dials the other again
// through the relay and syncs at once, with no rendezvous to find it (here
// there is none; it takes up to a minute). A member gone for good is
// dropped after circuitFailures failed redials.
func TestCircuitRedial(t *testing.T) {
	space := protocol.SpaceID("test/circuit/redial")
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	var synced atomic.Int64 // sessions with b that went well, at a
	var bID atomic.Value
	natted := func(onSync func(reconcile.Session)) Config {
		return Config{
			ListenAddrs:     []string{"/ip4/127.0.0.1/tcp/0"},
			Reachability:    ReachabilityPrivate,
			Gater:           coneNAT{relay.ID()},
			History:         emptyHistory{},
			SpaceRendezvous: func(protocol.ID) string { return "" },
			OnSync:          onSync,
			PunchAgain:      -1, // its dials are punch_test.go's
		}
	}
	var refuseB atomic.Bool // a's access rule refuses b
	ca := natted(func(se reconcile.Session) {
		if se.Err == nil && se.Space == space && se.Peer == bID.Load() {
			synced.Add(1)
		}
	})
	ca.SpaceAccess = func(_ protocol.ID, p peer.ID) bool { return !refuseB.Load() || p != bID.Load() }
	a, _ := newTestMesh(t, ca, relay)
	b, _ := newTestMesh(t, natted(nil), relay)
	bID.Store(b.ID())
	joinThroughRelay(t, space, a, b)
	if c := a.h.Network().Connectedness(b.ID()); c != network.Limited {
		t.Fatalf("a–b connectedness %v, want Limited", c)
	}
	if _, err := b.Sync(t.Context(), a.ID(), space); err != nil {
		t.Fatal(err)
	}
	isMember := func(m, of *Mesh) bool { return slices.Contains(circuitMembers(m, space), of.ID()) }
	waitFor(t, 5*time.Second, "a and b circuit members of each other", func() bool { return isMember(a, b) && isMember(b, a) })

	// The circuit ends.
	for round := range 2 {
		n := synced.Load()
		if err := a.h.Network().ClosePeer(b.ID()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 15*time.Second, "a circuit between a and b again, and a session of the space over it", func() bool {
			return a.h.Network().Connectedness(b.ID()) == network.Limited && synced.Load() > n &&
				isMember(a, b) && isMember(b, a)
		})
		t.Logf("round %d: circuit back, %d sessions with b at a", round, synced.Load())
	}

	// b loses its access (removed from the space, say), then its circuit
	// ends: a drops it and does not dial it again (nor take it back when
	// b dials a).
	refuseB.Store(true)
	if err := a.h.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a drops b, who lost access", func() bool { return !isMember(a, b) })
	time.Sleep(2 * redialFirst) // room for redials, were there any
	if isMember(a, b) {
		t.Error("a took b back after b lost access")
	}
	refuseB.Store(false)
	waitFor(t, 15*time.Second, "b, allowed again, a circuit member of a again", func() bool {
		if !isMember(a, b) {
			a.noteCircuit(space, b.ID()) // as the rendezvous would
		}
		return isMember(a, b)
	})

	// b goes for good: a's redials fail, and a drops it.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a drops b after failed redials", func() bool { return !isMember(a, b) })
	if c := a.h.Network().Connectedness(b.ID()); c != network.NotConnected {
		t.Errorf("a–b connectedness %v after b closed", c)
	}
}

// TestCircuitFlapBacksOff: a member whose circuits end shortly after each
// redial (a peer, or a relay, that cuts them) is redialled after a wait
// that doubles, and dropped after circuitFailures such circuits in a row,
// not dialled again every round. (Before, each redial that connected
// reset the member's count, and a peer closing every circuit after 300 ms
// was dialled 31 times in 10 s, and kept.)
func TestCircuitFlapBacksOff(t *testing.T) {
	space := protocol.SpaceID("test/circuit/flap")
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	natted := func() Config {
		return Config{
			ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Reachability: ReachabilityPrivate,
			Gater: coneNAT{relay.ID()}, History: emptyHistory{},
			SpaceRendezvous: func(protocol.ID) string { return "" },
			PunchAgain:      -1, // its dials would count here
		}
	}
	a, _ := newTestMesh(t, natted(), relay)
	b, _ := newTestMesh(t, natted(), relay)
	joinThroughRelay(t, space, a, b)
	if _, err := b.Sync(t.Context(), a.ID(), space); err != nil {
		t.Fatal(err)
	}
	isMember := func(m, of *Mesh) bool { return slices.Contains(circuitMembers(m, space), of.ID()) }
	waitFor(t, 5*time.Second, "members of each other", func() bool { return isMember(a, b) && isMember(b, a) })

	var dials atomic.Int64
	var flap atomic.Bool
	a.h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == b.ID() && c.Stat().Direction == network.DirOutbound {
			dials.Add(1)
		}
	}})
	b.h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == a.ID() && flap.Load() {
			go func() {
				time.Sleep(300 * time.Millisecond) // the circuit lives a moment
				_ = c.Close()
			}()
		}
	}})
	flap.Store(true)
	defer flap.Store(false)
	_ = b.h.Network().ClosePeer(a.ID())

	// 1 redial at once, then after 1 s and 2 s; the third short circuit
	// drops b (about 3.5 s in all).
	waitFor(t, 30*time.Second, "a drops b, whose circuits keep ending", func() bool { return !isMember(a, b) })
	n := dials.Load()
	t.Logf("a dialled b %d times before it dropped it", n)
	if n > circuitFailures+1 {
		t.Errorf("a dialled b %d times before dropping it, want at most %d", n, circuitFailures+1)
	}
}

// joinThroughRelay has a and b, both behind coneNAT, join space, and waits
// until b reaches a (through their relay).
func joinThroughRelay(t *testing.T, space protocol.ID, a, b *Mesh) {
	t.Helper()
	for _, m := range []*Mesh{a, b} {
		if err := m.JoinSpace(space, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "b reaches a through the relay", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return b.Dial(ctx, a.ID()) == nil
	})
}
