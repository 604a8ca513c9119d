package mesh

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
)

// TestRestartNotPenalized: a node that stops and starts again, quickly and
// more than once (an agent's daemon restarted by its supervisor, a
// developer's loop), is taken back into its peers' gossip meshes at once
// and keeps a good score. A node used to leave every space's topic on
// Close: the PRUNE it sent put its peers in a backoff towards it, its next
// run's GRAFTs came inside that backoff, and each cost a behaviour penalty
// per space; after a few restarts the peers graylisted it and cut it off
// for an hour, sync included (a catch-up stalled halfway so).
func TestRestartNotPenalized(t *testing.T) {
	const restarts, spaces = 4, 3
	a, _ := newTestMesh(t, Config{})
	var ids []protocol.ID
	for i := range spaces {
		id := protocol.SpaceID(fmt.Sprintf("test/restart/%d", i))
		ids = append(ids, id)
		if err := a.JoinSpace(id, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	kb, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var boot []string
	for _, ad := range a.Addrs() {
		boot = append(boot, ad.String())
	}
	for run := range restarts + 1 {
		b, err := New(t.Context(), kb, Config{ListenAddrs: loopback, Bootstrap: boot, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := b.JoinSpace(id, newRecorder()); err != nil {
				t.Fatal(err)
			}
		}
		// Taken into a's mesh of every space: gossipsub grafts on its
		// heartbeat (a second), a GRAFT refused for a backoff waits it out
		// (a minute); 20 s is room for a loaded machine, not for that.
		waitFor(t, 20*time.Second, fmt.Sprintf("run %d: b in a's gossip mesh of every space", run), func() bool {
			for _, id := range ids {
				if !slices.Contains(a.meshPeers(id), b.ID()) {
					return false
				}
			}
			return true
		})
		if run == restarts {
			// The score board reads the scores every scoreInterval.
			waitFor(t, 15*time.Second, "a's reading of b's score", func() bool {
				_, ok := a.GossipScore(b.ID())
				return ok
			})
			time.Sleep(2 * scoreInterval) // a reading after the last GRAFTs
			if s, _ := a.GossipScore(b.ID()); s < 0 {
				t.Errorf("b's score at a after %d restarts: %v", restarts, s)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// apart gates a node so that it never connects to one peer, either way:
// the two reach each other's messages only through the others.
type apart struct{ p peer.ID }

func (g apart) InterceptPeerDial(p peer.ID) bool                 { return p != g.p }
func (g apart) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return p != g.p }
func (apart) InterceptAccept(network.ConnMultiaddrs) bool        { return true }
func (g apart) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return p != g.p
}
func (apart) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// startMesh starts a mesh with key on loopback, bootstrapping to boot, with
// no rendezvous (who meets whom is the test's) and gater g.
func startMesh(t *testing.T, key crypto.PrivKey, g apart, boot *Mesh) *Mesh {
	t.Helper()
	var addrs []string
	for _, ad := range boot.Addrs() {
		addrs = append(addrs, ad.String())
	}
	m, err := New(t.Context(), key, Config{
		ListenAddrs: loopback, Bootstrap: addrs, Logger: testLogger(), Gater: g,
		SpaceRendezvous: func(protocol.ID) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLeaveRejoinGossip: a node that leaves a space, then restarts and
// joins it again, is back in its peers' gossip meshes within seconds (and
// unpenalised); one that joins again without a restart gets the space's
// messages by gossip (IHAVE) within seconds. There is no sync (no
// History): b hears c's messages only as a forwards them (c and b never
// connect).
//
// Before UnsubscribeBackoff was 1 s (gossipParams), the leave's PRUNE
// kept a backing off from b for 10 s: the restarted b's GRAFT came inside
// it, cost b a behaviour penalty and a 1-minute backoff, and b was out of
// a's mesh for 74 s (the run without a restart: 14 s, b's own backoff
// towards a, which gossipsub clears every 15 heartbeats).
func TestLeaveRejoinGossip(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) { leaveRejoinGossip(t, restart) })
	}
}

func leaveRejoinGossip(t *testing.T, restart bool) {
	// Seconds when it works; 14 s (no restart) and 74 s (restart) with
	// the bug below. 10 s leaves a loaded machine room under the 14.
	const within = 10 * time.Second
	space := protocol.SpaceID("test/rejoin")
	kb, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	kc, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	idb, _ := peer.IDFromPrivateKey(kb)
	idc, _ := peer.IDFromPrivateKey(kc)
	a, _ := newTestMesh(t, Config{SpaceRendezvous: func(protocol.ID) string { return "" }})
	c := startMesh(t, kc, apart{idb}, a)
	t.Cleanup(func() { _ = c.Close() })
	b := startMesh(t, kb, apart{idc}, a)
	t.Cleanup(func() { _ = b.Close() })
	for _, m := range []*Mesh{a, b, c} {
		if err := m.JoinSpace(space, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b and c in a's gossip mesh", func() bool {
		p := a.meshPeers(space)
		return slices.Contains(p, b.ID()) && slices.Contains(p, c.ID())
	})

	if err := b.LeaveSpace(space); err != nil {
		t.Fatal(err)
	}
	// The PRUNE comes at once; on a loaded machine (CI) it took over 5 s.
	waitFor(t, 15*time.Second, "a takes b's leave (PRUNE)", func() bool { return !slices.Contains(a.meshPeers(space), b.ID()) })
	if restart {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		// A daemon's restart and an agent's join take a second or more.
		time.Sleep(1500 * time.Millisecond)
		b = startMesh(t, kb, apart{idc}, a)
		t.Cleanup(func() { _ = b.Close() })
		waitFor(t, 10*time.Second, "b connected to a again", func() bool { return connected(a, b) })
	}
	rb := newRecorder()
	if err := b.JoinSpace(space, rb); err != nil {
		t.Fatal(err)
	}
	joined := time.Now()

	// c publishes every 100 ms; b must hear them from a.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			_ = c.Publish(ctx, sign(t, kc, space, fmt.Sprint("after the rejoin ", i), nil))
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	waitFor(t, within, "b hears c's messages by gossip", func() bool { return len(rb.ids()) > 0 })
	t.Logf("first message by gossip %v after the rejoin", time.Since(joined).Round(10*time.Millisecond))
	if !restart {
		return
	}
	waitFor(t, within, "b back in a's gossip mesh", func() bool { return slices.Contains(a.meshPeers(space), b.ID()) })
	t.Logf("b in a's mesh %v after the rejoin", time.Since(joined).Round(10*time.Millisecond))
	// In the mesh, a forwards each of c's messages at once: b holds every
	// message c publishes from now on (IHAVE alone would bring them a
	// heartbeat late, and only while a advertises them).
	n := len(rb.ids())
	waitFor(t, within, "b gets 10 more of c's messages", func() bool { return len(rb.ids()) >= n+10 })
	waitFor(t, 15*time.Second, "a's reading of b's score", func() bool {
		_, ok := a.GossipScore(b.ID())
		return ok
	})
	time.Sleep(2 * scoreInterval) // a reading after the GRAFT
	if s, _ := a.GossipScore(b.ID()); s < 0 {
		t.Errorf("b's score at a after the leave and rejoin: %v", s)
	}
}
