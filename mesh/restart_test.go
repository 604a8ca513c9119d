package mesh

import (
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

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
		// heartbeat (a second), a GRAFT refused for a backoff waits it out.
		waitFor(t, 5*time.Second, fmt.Sprintf("run %d: b in a's gossip mesh of every space", run), func() bool {
			for _, id := range ids {
				if !slices.Contains(a.meshPeers(id), b.ID()) {
					return false
				}
			}
			return true
		})
		if run == restarts {
			// The score board reads the scores every scoreInterval.
			waitFor(t, 5*time.Second, "a's reading of b's score", func() bool {
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
