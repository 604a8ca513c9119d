package mesh

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/internal/meshtest"
	"github.com/weftmesh/weft/protocol"
)

// loopback is the only address tests listen on: no test traffic leaves the
// machine.
var loopback = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}

// testLogger logs to stderr when WEFT_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("WEFT_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newTestMesh starts a mesh with cfg on loopback (unless cfg says where), mDNS off, bootstrapping to
// boot; it is closed when the test ends.
func newTestMesh(tb testing.TB, cfg Config, boot ...*Mesh) (*Mesh, crypto.PrivKey) {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.ListenAddrs == nil {
		cfg.ListenAddrs = loopback
	}
	cfg.MDNS = false
	cfg.Logger = testLogger()
	for _, b := range boot {
		for _, a := range b.Addrs() {
			cfg.Bootstrap = append(cfg.Bootstrap, a.String())
		}
	}
	m, err := New(tb.Context(), key, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return m, key
}

// sign makes a message in space from key with content {"text": text}.
func sign(tb testing.TB, key crypto.PrivKey, space protocol.ID, text string, edit func(*protocol.Draft)) *protocol.Message {
	tb.Helper()
	content, _ := json.Marshal(map[string]string{"text": text})
	d := protocol.Draft{Space: space, CreatedAt: time.Now(), Type: "text", Content: content}
	if edit != nil {
		edit(&d)
	}
	m, err := protocol.Sign(key, d, protocol.DefaultLimits())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// recorder is a Sink that keeps what it is given.
type recorder struct {
	mu   sync.Mutex
	msgs map[protocol.ID]*protocol.Message
}

func newRecorder() *recorder { return &recorder{msgs: make(map[protocol.ID]*protocol.Message)} }

func (r *recorder) Deliver(_ context.Context, m *protocol.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs[m.ID] = m
	return nil
}

func (r *recorder) has(ids ...protocol.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.msgs[id]; !ok {
			return false
		}
	}
	return true
}

func (r *recorder) ids() map[protocol.ID]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[protocol.ID]bool, len(r.msgs))
	for id := range r.msgs {
		out[id] = true
	}
	return out
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	meshtest.WaitFor(tb, d, what, cond)
}

func connected(a, b *Mesh) bool {
	return a.h.Network().Connectedness(b.ID()) == network.Connected
}

func containsPeer(ps []peer.ID, p peer.ID) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
