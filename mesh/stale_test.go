package mesh

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestCloseEarlierRuns: a peer that comes back with the same identity on a
// new QUIC port (a daemon killed and restarted) makes its peers close the
// connections they still hold to its earlier run, which would otherwise
// linger until QUIC's idle timeout with nothing answering on them.
func TestCloseEarlierRuns(t *testing.T) {
	a, _ := newTestMesh(t, Config{ListenAddrs: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}})
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	run := func() *Mesh {
		m, err := New(t.Context(), key, Config{ListenAddrs: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	connect := func(m *Mesh) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := m.h.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	first := run()
	connect(first)
	waitFor(t, 10*time.Second, "a connected to the first run", func() bool { return connected(a, first) })
	old := a.h.Network().ConnsToPeer(first.ID())[0]

	// The second run (same key, new port) while the first still holds
	// its connection, as a killed process's peers do.
	second := run()
	connect(second)
	waitFor(t, 10*time.Second, "the connection to the first run closed", func() bool {
		conns := a.h.Network().ConnsToPeer(second.ID())
		return len(conns) == 1 && conns[0] != old && old.IsClosed()
	})
	if got := a.h.Network().ConnsToPeer(second.ID())[0].RemoteMultiaddr(); !got.Equal(second.h.Addrs()[0]) {
		t.Errorf("a's connection goes to %s, want the second run's %s", got, second.h.Addrs()[0])
	}

}
