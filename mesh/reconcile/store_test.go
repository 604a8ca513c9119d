package reconcile_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// storeSink stores delivered messages in a real store, as the daemon does.
type storeSink struct{ st *store.Store }

func (s storeSink) Deliver(ctx context.Context, m *protocol.Message) error {
	_, _, err := s.st.Put(ctx, store.Message{ID: m.ID, Space: m.Space, Prev: m.Prev, Time: m.CreatedAt, Raw: m.Encode()})
	return err
}

func loopbackHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// TestForgedRefusedWithBadger: the store package's Badger store satisfies
// Store, and a peer serving a tampered message (between two valid ones)
// during sync is refused with nothing of its exchange stored on disk; an
// honest peer then syncs the valid ones.
func TestForgedRefusedWithBadger(t *testing.T) {
	space := protocol.SpaceID("badger sync")
	st, err := store.Open(store.Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := loopbackHost(t)
	svc, err := reconcile.New(h, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	svc.Join(space, storeSink{st})

	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var valid [][]byte
	for i := range 2 {
		m, err := protocol.Sign(key, protocol.Draft{Space: space, CreatedAt: time.Now().Add(time.Duration(i) * time.Millisecond), Type: "text", Content: []byte(`{"text":"ok"}`)}, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		valid = append(valid, m.Encode())
	}
	forged := append([]byte(nil), valid[0]...)
	forged[len(forged)-1] ^= 0x80 // signature byte

	evil := loopbackHost(t)
	reconcile.ServeEvil(evil, reconcile.MessagesFrame(valid[0], forged, valid[1]))
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: evil.ID(), Addrs: evil.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Sync(t.Context(), evil.ID(), space); !errors.Is(err, reconcile.ErrRefused) {
		t.Fatalf("sync with a forger: %v, want ErrRefused", err)
	}
	if n, err := st.Count(space); err != nil || n != 0 {
		t.Fatalf("store holds %d messages (%v) after a forged exchange", n, err)
	}

	// An honest peer serving the same valid messages is accepted.
	honest := loopbackHost(t)
	reconcile.ServeEvil(honest, reconcile.MessagesFrame(valid...))
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: honest.ID(), Addrs: honest.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Sync(t.Context(), honest.ID(), space); err != nil {
		t.Fatalf("sync with an honest peer: %v", err)
	}
	if n, err := st.Count(space); err != nil || n != 2 {
		t.Fatalf("store holds %d messages (%v), want the 2 valid ones", n, err)
	}
}
