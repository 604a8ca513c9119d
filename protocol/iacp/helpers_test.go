package iacp_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"flag"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/*.export.json from what Export writes")

// goldenSeed is the Ed25519 seed of protocol's golden vectors
// (protocol/testdata/golden.json), so agent A here is the golden sender.
const goldenSeed = "776566742d676f6c64656e2d766563746f72732d7365656428763129000102ff"

// created is the fixed creation time used by tests that do not care about
// the clock: 2026-01-01T00:00:00Z.
var created = time.UnixMilli(1767225600000).UTC()

// keyFromSeed returns the Ed25519 key derived from a 32-byte seed, the same
// way crypto.GenerateEd25519Key does when it reads the seed from its source.
func keyFromSeed(tb testing.TB, seed []byte) crypto.PrivKey {
	tb.Helper()
	if len(seed) != ed25519.SeedSize {
		tb.Fatalf("seed is %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	k, _, err := crypto.GenerateEd25519Key(bytes.NewReader(seed))
	if err != nil {
		tb.Fatalf("derive key: %v", err)
	}
	return k
}

// testKey returns a fixed key named by b: testKey(t, 1) and testKey(t, 2) differ.
func testKey(tb testing.TB, b byte) crypto.PrivKey {
	tb.Helper()
	return keyFromSeed(tb, bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func peerOf(tb testing.TB, k crypto.PrivKey) peer.ID {
	tb.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		tb.Fatalf("peer id: %v", err)
	}
	return id
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatalf("hex %q: %v", s, err)
	}
	return b
}

// sign makes a message with the default limits and fails tb on error.
func sign(tb testing.TB, key crypto.PrivKey, d protocol.Draft) *protocol.Message {
	tb.Helper()
	m, err := protocol.Sign(key, d, protocol.DefaultLimits())
	if err != nil {
		tb.Fatalf("Sign: %v", err)
	}
	return m
}

// minimalDraft is a valid text draft at the fixed time.
func minimalDraft() protocol.Draft {
	return protocol.Draft{
		Space:     protocol.SpaceID("general"),
		CreatedAt: created,
		Type:      "text",
		Content:   []byte(`{"text":"hello"}`),
	}
}
