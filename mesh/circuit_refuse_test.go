package mesh

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// emptyHistory is a reconcile.Store that holds nothing.
// emptyHistory is a sync History holding nothing.
type emptyHistory struct{}

func (emptyHistory) Heads(protocol.ID) ([]protocol.ID, error) { return nil, nil }
func (emptyHistory) Summary(protocol.ID, protocol.SyncKey, protocol.SyncKey) (int, protocol.Sum, error) {
	return 0, protocol.Sum{}, nil
}
func (emptyHistory) Keys(protocol.ID, protocol.SyncKey, protocol.SyncKey, int) ([]protocol.SyncKey, error) {
	return nil, nil
}
func (emptyHistory) Split(protocol.ID, protocol.SyncKey, protocol.SyncKey, int) ([]protocol.SyncKey, error) {
	return nil, nil
}
func (emptyHistory) Wire(protocol.ID, protocol.ID) ([]byte, bool, error) { return nil, false, nil }
func (emptyHistory) Has(protocol.ID) (bool, error)                       { return false, nil }
func (emptyHistory) Floor(protocol.ID) (protocol.SyncKey, error)         { return protocol.MinSyncKey, nil }

// circuitMembers returns the circuit members of a joined space.
func circuitMembers(m *Mesh, space protocol.ID) []peer.ID {
	m.mu.RLock()
	s, ok := m.spaces[space]
	m.mu.RUnlock()
	if !ok {
		return nil
	}
	return s.circuit.keep(func(peer.ID) bool { return true })
}

// TestCircuitRefusesStrangers: A, behind a NAT, is the only
// member of a private space (SpaceAccess admits no one else). A stranger S
// reaches A through an open relay (a limited connection) and starts a sync
// session for the space. A answers "not a member" — but finish reports the
// session with Err == nil, so onSession → noteCircuit takes S in as a
// circuit member of the private space. Fails on e533ede.
// TestCircuitRefusesStrangers: a peer that the space's access rule
// refuses never becomes a circuit member of the space, whether it syncs
// with the node over a relay circuit or the rendezvous finds it (a
// private space's members decide who may take part), and the node syncs
// nothing with it when it publishes. (Two members that reach each other
// only through a relay exchanging a sealed space's messages is
// examples/netbed's TestNAT.)
func TestCircuitRefusesStrangers(t *testing.T) {
	space := protocol.SpaceID("test/review/private")
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	a, akey := newTestMesh(t, Config{
		ListenAddrs:  []string{"/ip4/127.0.0.1/tcp/0"},
		Reachability: ReachabilityPrivate,
		Gater:        behindNAT{relay.ID()},
		History:      emptyHistory{},
		SpaceAccess:  func(protocol.ID, peer.ID) bool { return false }, // no member but A
	}, relay)
	s, _ := newTestMesh(t, Config{History: emptyHistory{}}, relay)
	if err := a.JoinSpace(space, newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := s.JoinSpace(space, newRecorder()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the stranger reaches A through the relay", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return s.Dial(ctx, a.ID()) == nil
	})
	if c := a.h.Network().Connectedness(s.ID()); c != network.Limited {
		t.Fatalf("A–S connectedness %v, want Limited", c)
	}
	_, err := s.Sync(t.Context(), a.ID(), space)
	t.Logf("stranger's session: %v", err)
	if err == nil {
		t.Fatal("the stranger's session succeeded: A let it in")
	}
	// onSession runs in A's handler after the reply: give it a moment.
	// Given time to be taken in (A's side of the session ends as it
	// answers, and is told to the circuit then), it is not.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !slices.Contains(circuitMembers(a, space), s.ID()) {
		time.Sleep(20 * time.Millisecond)
	}
	if slices.Contains(circuitMembers(a, space), s.ID()) {
		t.Errorf("a stranger A refused (not a member) is a circuit member of A's private space")
	}

	// No leak: A's Publish triggers a session with the stranger, which
	// Sync's own access check stops before any stream is opened.
	for i := range 5 {
		if err := a.Publish(t.Context(), sign(t, akey, space, fmt.Sprint("secret ", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * circuitGap) // room for a round's sessions, were there any
	if st := a.SyncStats(); st.Initiated != 0 || st.Sent != 0 {
		t.Errorf("A initiated %d sessions, sent %d messages", st.Initiated, st.Sent)
	}
	t.Logf("after 5 publishes: A initiated %d sessions, sent %d messages to anyone", a.SyncStats().Initiated, a.SyncStats().Sent)

	// The rendezvous path: findOnce calls noteCircuit for every peer it
	// found, with no access check either. (Drop S first, so that what
	// follows shows the rendezvous path alone.)
	a.mu.RLock()
	as := a.spaces[space]
	a.mu.RUnlock()
	as.circuit.keep(func(p peer.ID) bool { return p != s.ID() })
	a.noteCircuit(space, s.ID())
	if slices.Contains(circuitMembers(a, space), s.ID()) {
		t.Errorf("noteCircuit (the rendezvous path) takes in a peer SpaceAccess refuses")
	}
}
