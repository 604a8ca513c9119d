package mesh

import (
	"runtime"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Close stops everything: after two joined, connected meshes close, the
// goroutine count returns to where it was. Each reachability is a config
// of its own: a node that is forced private runs autorelay's client and
// takes a reservation on its peer (a public relay), a public one runs the
// relay service, and AutoNAT runs in both.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Config
	}{
		{"default", Config{}, Config{}},
		{"private", Config{Reachability: ReachabilityPublic, Relay: RelayOpen}, Config{Reachability: ReachabilityPrivate}},
	} {
		t.Run(tc.name, func(t *testing.T) { closeLeavesNoGoroutines(t, tc.a, tc.b) })
	}
}

func closeLeavesNoGoroutines(t *testing.T, ca, cb Config) {
	before := runtime.NumGoroutine()

	space := protocol.SpaceID("test/leak")
	a, _ := newTestMesh(t, ca)
	b, _ := newTestMesh(t, cb, a)
	for _, m := range []*Mesh{a, b} {
		if err := m.JoinSpace(space, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "connection", func() bool { return connected(a, b) })
	b.connectFound(t.Context(), peer.AddrInfo{ID: b.ID()}, "test") // self: must return at once
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines after close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
