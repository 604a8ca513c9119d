package mesh

import (
	"runtime"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Close stops everything: after two joined, connected meshes close, the
// goroutine count returns to where it was.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()

	space := protocol.SpaceID("test/leak")
	a, _ := newTestMesh(t, Config{})
	b, _ := newTestMesh(t, Config{}, a)
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
