package store

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

// dataKeys returns the data keys held for message id.
func dataKeys(t *testing.T, s *Store, id protocol.ID) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = idKey(prefixData, id)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// storeAsV3 rewrites stored message m (of at most one chunk) as version 3
// stored it: its record without its bytes, and them under a data key.
func storeAsV3(t *testing.T, s *Store, m Message) {
	t.Helper()
	err := s.db.Update(func(txn *badger.Txn) error {
		val, err := get(txn, messageKey(m.ID))
		if err != nil {
			return err
		}
		e, _, err := decodeRecord(m.ID, val)
		if err != nil {
			return err
		}
		v3 := encodeRecord(m, uint64(e.Cursor), false)
		v3[0] = recordVersionV3
		if err := txn.Set(dataKey(m.ID, 0), m.Raw); err != nil {
			return err
		}
		return txn.Set(messageKey(m.ID), v3)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecordInline: a message whose record and raw bytes fit under the
// value threshold is one key (its record holds the bytes), a larger one
// keeps them under its data keys, and a record of version 3 (an older
// store's: the bytes under a data key whatever their size) still reads;
// each reads back the same bytes through every read, and a delete leaves
// no data key behind.
func TestRecordInline(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	sp := protocol.SpaceID("inline")
	key, _, _ := crypto.GenerateEd25519Key(nil)
	small := signed(t, key, sp, "hi")
	large := signed(t, key, sp, strings.Repeat("x", 2*valueThreshold))
	old := signed(t, key, sp, "from an older store")
	for _, m := range []Message{small, large, old} {
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	storeAsV3(t, s, old)
	for _, c := range []struct {
		name string
		m    Message
		data int
	}{{"small", small, 0}, {"large", large, 1}, {"version 3", old, 1}} {
		if n := dataKeys(t, s, c.m.ID); n != c.data {
			t.Errorf("%s: %d data keys, want %d", c.name, n, c.data)
		}
		e, err := s.Get(c.m.ID)
		if err != nil || !bytes.Equal(e.Raw, c.m.Raw) {
			t.Errorf("%s: Get = %d bytes, %v; want its %d", c.name, len(e.Raw), err, len(c.m.Raw))
		}
		w, ok, err := s.Wire(sp, c.m.ID)
		if err != nil || !ok || !bytes.Equal(w, c.m.Raw) {
			t.Errorf("%s: Wire = %d bytes, %v, %v", c.name, len(w), ok, err)
		}
	}
	ws, err := s.Wires(sp, []protocol.ID{small.ID, large.ID, old.ID}, 1<<20)
	if err != nil || len(ws) != 3 || !bytes.Equal(ws[0], small.Raw) || !bytes.Equal(ws[1], large.Raw) || !bytes.Equal(ws[2], old.Raw) {
		t.Errorf("Wires: %d, %v", len(ws), err)
	}
	page, _, err := s.Read(sp, 0, 10)
	if err != nil || len(page) != 3 {
		t.Fatalf("Read: %d entries, %v", len(page), err)
	}
	for i, m := range []Message{small, large, old} {
		if !bytes.Equal(page[i].Raw, m.Raw) {
			t.Errorf("Read: entry %d has %d bytes, want %d", i, len(page[i].Raw), len(m.Raw))
		}
	}
	if n, err := s.deleteMessages([]protocol.ID{small.ID, large.ID, old.ID}); err != nil || n != 3 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	for _, m := range []Message{small, large, old} {
		if n := dataKeys(t, s, m.ID); n != 0 {
			t.Errorf("%d data keys of %s left after its delete", n, m.ID)
		}
	}
	if u, _ := s.Usage(sp); u != (Usage{}) {
		t.Errorf("usage after deleting all: %+v", u)
	}
}

// TestUvarintLen: uvarintLen agrees with binary.AppendUvarint at each
// length's edges.
func TestUvarintLen(t *testing.T) {
	for _, x := range []int{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<35 - 1, 1 << 35, 1<<62 - 1, 1 << 62} {
		if got, want := uvarintLen(x), len(binary.AppendUvarint(nil, uint64(x))); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", x, got, want)
		}
	}
}
