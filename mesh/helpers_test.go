package mesh

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
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
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
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

// rawGossip is a plain gossipsub peer (libp2p defaults, loopback only, no
// weft code but the gossipsub settings every weft peer shares: no libp2p
// signatures, IDs from the content, though not weft's) subscribed to a
// space's topic.
type rawGossip struct {
	id    peer.ID
	key   crypto.PrivKey
	topic *pubsub.Topic
}

// newRawGossip starts a raw gossipsub peer, subscribes it to space and
// connects it to to, waiting until each sees the other in the topic.
func newRawGossip(tb testing.TB, space protocol.ID, to *Mesh) *rawGossip {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	ps, err := pubsub.NewGossipSub(tb.Context(), h,
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithMaxMessageSize(maxRPCSize),
		// Publish to every peer of the topic, not just the gossip mesh,
		// which the raw peer may not have formed yet (or A may have pruned
		// it from): what it publishes reaches A at once, never by gossip.
		pubsub.WithFloodPublish(true),
		// Room to queue a flood rather than drop it.
		pubsub.WithPeerOutboundQueueSize(1<<14),
		pubsub.WithMessageIdFn(func(pm *pb.Message) string { s := sha256.Sum256(pm.Data); return string(s[:]) }),
	)
	if err != nil {
		tb.Fatal(err)
	}
	topic, err := ps.Join(protocol.Topic(space))
	if err != nil {
		tb.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sub.Cancel)
	if err := h.Connect(tb.Context(), peer.AddrInfo{ID: to.ID(), Addrs: to.h.Addrs()}); err != nil {
		tb.Fatal(err)
	}
	waitFor(tb, 10*time.Second, "the raw peer and the node to see each other in the topic", func() bool {
		return containsPeer(topic.ListPeers(), to.ID()) && containsPeer(to.SpacePeers(space), h.ID())
	})
	return &rawGossip{id: h.ID(), key: key, topic: topic}
}
