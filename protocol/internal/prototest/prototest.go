// Package prototest holds the helpers protocol's tests and its
// sub-packages' tests share: fixed keys, a fixed time, signing that fails
// the test on error.
package prototest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Created is the fixed creation time of tests that do not care about the
// clock: 2026-01-01T00:00:00Z.
var Created = time.UnixMilli(1767225600000).UTC()

// KeyFromSeed returns the Ed25519 key derived from a 32-byte seed, the same
// way crypto.GenerateEd25519Key does when it reads the seed from its source.
func KeyFromSeed(tb testing.TB, seed []byte) crypto.PrivKey {
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

// Key returns a fixed key named by b: Key(t, 1) and Key(t, 2) differ.
func Key(tb testing.TB, b byte) crypto.PrivKey {
	tb.Helper()
	return KeyFromSeed(tb, bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

// PeerOf returns the peer ID of k.
func PeerOf(tb testing.TB, k crypto.PrivKey) peer.ID {
	tb.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		tb.Fatalf("peer id: %v", err)
	}
	return id
}

// MustHex decodes hex or fails tb.
func MustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatalf("hex %q: %v", s, err)
	}
	return b
}

// Sign makes a message with the default limits and fails tb on error.
func Sign(tb testing.TB, key crypto.PrivKey, d protocol.Draft) *protocol.Message {
	tb.Helper()
	m, err := protocol.Sign(key, d, protocol.DefaultLimits())
	if err != nil {
		tb.Fatalf("Sign: %v", err)
	}
	return m
}

// MinimalDraft is a valid text draft at the fixed time.
func MinimalDraft() protocol.Draft {
	return protocol.Draft{
		Space:     protocol.SpaceID("general"),
		CreatedAt: Created,
		Type:      "text",
		Content:   []byte(`{"text":"hello"}`),
	}
}
