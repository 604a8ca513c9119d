package mesh

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/util"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
)

// Three nodes, B and C bootstrapped to A only: every message reaches every
// other node, and B and C find each other through the space's rendezvous.
func TestSpaceDeliveryAndRendezvous(t *testing.T) {
	start := time.Now()
	space := protocol.SpaceID("test/three")
	a, ka := newTestMesh(t, Config{})
	b, kb := newTestMesh(t, Config{}, a)
	c, kc := newTestMesh(t, Config{}, a)
	meshes := []*Mesh{a, b, c}
	sinks := []*recorder{newRecorder(), newRecorder(), newRecorder()}
	for i, m := range meshes {
		if err := m.JoinSpace(space, sinks[i]); err != nil {
			t.Fatal(err)
		}
		if err := m.JoinSpace(space, newRecorder()); err != nil { // idempotent
			t.Fatal(err)
		}
	}

	// Wait for the gossip mesh, not just the subscriptions: a message that
	// reaches A before A grafts C never reaches C by gossip (sync's job).
	waitFor(t, 10*time.Second, "gossip mesh", func() bool {
		ap, am := a.SpacePeers(space), a.meshPeers(space)
		return containsPeer(ap, b.ID()) && containsPeer(ap, c.ID()) &&
			containsPeer(am, b.ID()) && containsPeer(am, c.ID()) &&
			containsPeer(b.SpacePeers(space), a.ID()) && containsPeer(c.SpacePeers(space), a.ID())
	})
	t.Logf("gossip mesh formed after %s", time.Since(start).Round(time.Millisecond))

	msgs := []*protocol.Message{
		sign(t, ka, space, "from a", nil),
		sign(t, kb, space, "from b", nil),
		sign(t, kc, space, "from c", nil),
	}
	for i, m := range meshes {
		if err := m.Publish(t.Context(), msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range meshes {
		var want []protocol.ID
		for j, msg := range msgs {
			if j != i {
				want = append(want, msg.ID)
			}
		}
		waitFor(t, 15*time.Second, "delivery of others' messages", func() bool { return sinks[i].has(want...) })
	}
	t.Logf("all messages delivered after %s", time.Since(start).Round(time.Millisecond))

	// B and C are connected quickly, possibly by DHT lookups alone (B learns
	// C from A while querying).
	waitFor(t, 30*time.Second, "B and C connected", func() bool { return connected(b, c) && connected(c, b) })
	t.Logf("B and C connected after %s", time.Since(start).Round(time.Millisecond))
}

// B and C are DHT clients bootstrapped to A, a DHT server: clients never
// enter routing tables, so no DHT lookup can introduce B and C to each
// other. Only the space rendezvous can: both advertise through A, and each
// finds the other's provider record there and dials it.
func TestRendezvousConnectsMembers(t *testing.T) {
	start := time.Now()
	space := protocol.SpaceID("test/rendezvous")
	a, _ := newTestMesh(t, Config{})
	b, _ := newTestMesh(t, Config{DHTMode: DHTClient}, a)
	c, _ := newTestMesh(t, Config{DHTMode: DHTClient}, a)
	for _, m := range []*Mesh{a, b, c} {
		if err := m.JoinSpace(space, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "B and C connected through the rendezvous", func() bool { return connected(b, c) })
	t.Logf("B and C connected after %s", time.Since(start).Round(time.Millisecond))

	// The records are in the DHT, under the space's rendezvous.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	found, err := util.FindPeers(ctx, c.disc, protocol.Rendezvous(space))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(found, func(ai peer.AddrInfo) bool { return ai.ID == b.ID() }) {
		t.Errorf("rendezvous lookup from C found %v, not B", found)
	}
}

func TestSpaceLifecycle(t *testing.T) {
	space := protocol.SpaceID("test/lifecycle")
	a, ka := newTestMesh(t, Config{})
	msg := sign(t, ka, space, "hi", nil)

	if err := a.Publish(t.Context(), msg); !errors.Is(err, ErrNotJoined) {
		t.Fatalf("publish before join: %v, want ErrNotJoined", err)
	}
	if err := a.LeaveSpace(space); err != nil { // not joined: no-op
		t.Fatal(err)
	}
	for range 2 { // join, leave, and again: the validator and topic are released
		if err := a.JoinSpace(space, newRecorder()); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
		if err := a.LeaveSpace(space); err != nil {
			t.Fatal(err)
		}
		if err := a.LeaveSpace(space); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish(t.Context(), msg); !errors.Is(err, ErrNotJoined) {
			t.Fatalf("publish after leave: %v, want ErrNotJoined", err)
		}
	}

	// Local publications are validated like everything else.
	if err := a.JoinSpace(space, newRecorder()); err != nil {
		t.Fatal(err)
	}
	wire := slices.Clone(msg.Encode())
	wire[len(wire)-1] ^= 1 // the signature's last byte
	bad, err := protocol.Decode(wire, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(t.Context(), bad); err == nil {
		t.Fatal("published a message with a bad signature")
	}
	if err := a.JoinSpace(protocol.ID{}, newRecorder()); err == nil {
		t.Fatal("joined the zero space")
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal("second close:", err)
	}
	if err := a.JoinSpace(space, newRecorder()); !errors.Is(err, ErrClosed) {
		t.Fatalf("join after close: %v", err)
	}
	if err := a.Publish(t.Context(), msg); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
}

func TestConnectPeersAndHook(t *testing.T) {
	a, _ := newTestMesh(t, Config{})
	b, _ := newTestMesh(t, Config{})

	type seen struct {
		id    peer.ID
		addrs []ma.Multiaddr
	}
	hooked := make(chan seen, 16)
	b.OnPeerConnected(func(p peer.ID, addrs []ma.Multiaddr) { hooked <- seen{p, addrs} })

	for _, a := range b.Addrs() {
		if _, err := a.ValueForProtocol(ma.P_P2P); err != nil {
			t.Errorf("Addrs: %s has no /p2p/", a)
		}
	}
	noID := a.h.Addrs()[0]
	if _, err := b.Connect(t.Context(), noID); err == nil {
		t.Error("connected to an address without /p2p/")
	}
	if _, err := b.Connect(t.Context(), b.Addrs()[0]); err == nil {
		t.Error("connected to itself")
	}
	id, err := b.Connect(t.Context(), a.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if id != a.ID() {
		t.Fatalf("connected to %s, want %s", id, a.ID())
	}
	if !b.h.ConnManager().IsProtected(a.ID(), tagManual) {
		t.Error("manually connected peer not protected")
	}

	peerIn := func(m *Mesh, p peer.ID, dir string) bool {
		for _, pi := range m.Peers() {
			if pi.ID == p && pi.Direction == dir && len(pi.Addrs) > 0 {
				return true
			}
		}
		return false
	}
	waitFor(t, 5*time.Second, "peer lists", func() bool {
		return peerIn(b, a.ID(), "outbound") && peerIn(a, b.ID(), "inbound")
	})

	select {
	case s := <-hooked:
		if s.id != a.ID() || len(s.addrs) == 0 {
			t.Errorf("hook got %s %v, want %s with its listen addresses", s.id, s.addrs, a.ID())
		}
		for _, addr := range s.addrs {
			if !slices.ContainsFunc(a.h.Addrs(), addr.Equal) {
				t.Errorf("hook address %s is not one A listens on (%v)", addr, a.h.Addrs())
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnPeerConnected hook not called")
	}

	// A hook registered late still hears of the peers already connected.
	late := make(chan peer.ID, 16)
	a.OnPeerConnected(func(p peer.ID, _ []ma.Multiaddr) { late <- p })
	select {
	case p := <-late:
		if p != b.ID() {
			t.Errorf("late hook got %s, want %s", p, b.ID())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("late OnPeerConnected hook not told of the connected peer")
	}
}

func TestNewRefuses(t *testing.T) {
	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ed, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	for _, tc := range []struct {
		name string
		key  crypto.PrivKey
		cfg  Config
	}{
		{"secp256k1 key", secp, Config{ListenAddrs: loopback}},
		{"nil key", nil, Config{ListenAddrs: loopback}},
		{"bad config", ed, Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/notaport"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(t.Context(), tc.key, tc.cfg)
			if err == nil {
				m.Close()
				t.Fatal("no error")
			}
		})
	}
}
