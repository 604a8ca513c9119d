package store

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

// TestWires: Wires reads what Wire reads, message by message, in one
// transaction: nil for a message not held or of another space, and it
// stops after the message that reaches its byte limit.
func TestWires(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, other := protocol.SpaceID("wires"), protocol.SpaceID("wires-other")
	var ms []Message
	for _, text := range []string{"one", "two", "three"} {
		ms = append(ms, signed(t, key, sp, text))
	}
	elsewhere := signed(t, key, other, "elsewhere")
	for _, m := range append(ms, elsewhere) {
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	absent := signed(t, key, sp, "never stored")
	ids := []protocol.ID{ms[0].ID, absent.ID, elsewhere.ID, ms[1].ID, ms[2].ID}

	wires, err := s.Wires(sp, ids, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{ms[0].Raw, nil, nil, ms[1].Raw, ms[2].Raw}
	if len(wires) != len(want) {
		t.Fatalf("%d wires for %d IDs", len(wires), len(want))
	}
	for i := range want {
		one, ok, err := s.Wire(sp, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(wires[i], want[i]) || (wires[i] != nil) != ok || !bytes.Equal(wires[i], one) {
			t.Errorf("wire %d: %q, want %q (Wire: %q, %v)", i, wires[i], want[i], one, ok)
		}
	}

	// The limit: reading stops after the message that reaches it, and
	// at least one is read.
	for _, tc := range []struct{ limit, n int }{
		{1, 1},
		{len(ms[0].Raw), 1},
		{len(ms[0].Raw) + 1, 4}, // the next two are not held
		{0, 1},
	} {
		wires, err := s.Wires(sp, ids, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(wires) != tc.n {
			t.Errorf("limit %d: %d read, want %d", tc.limit, len(wires), tc.n)
		}
	}
}
