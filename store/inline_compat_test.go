package store

import (
	"bytes"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

// Tests of records that hold their bytes (version 4) next to older ones,
// from an adversarial review of that change.

// TestMigratedV2ReadsBack: version 2 records (bytes under data keys)
// migrated at Open still read back their bytes through every read, keep
// their data keys, and a delete removes them (a migration that wrote them
// as holding their bytes left zeros and orphaned data keys, which the
// usage tests did not see).
func TestMigratedV2ReadsBack(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	sp := protocol.SpaceID("v2-migrated")
	key, _, _ := crypto.GenerateEd25519Key(nil)
	small := signed(t, key, sp, "small")
	large := signed(t, key, sp, strings.Repeat("y", 3*valueThreshold))
	ms := []Message{small, large}
	for _, m := range ms {
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	makeV2Store(t, s, ms, usageKey(sp), senderUsageKey(sp, small.From))
	s = openAt(t, dir)
	defer s.Close()
	checkAllKeys(t, s)
	for _, m := range ms {
		if n := dataKeys(t, s, m.ID); n != 1 {
			t.Errorf("migrated %s: %d data keys, want 1", m.ID, n)
		}
		e, err := s.Get(m.ID)
		if err != nil || !bytes.Equal(e.Raw, m.Raw) {
			t.Errorf("migrated: Get = %d bytes, %v; want %d", len(e.Raw), err, len(m.Raw))
		}
		w, ok, err := s.Wire(sp, m.ID)
		if err != nil || !ok || !bytes.Equal(w, m.Raw) {
			t.Errorf("migrated: Wire = %d bytes, %v, %v", len(w), ok, err)
		}
	}
	page, _, err := s.Read(sp, 0, 10)
	if err != nil || len(page) != 2 || !bytes.Equal(page[0].Raw, small.Raw) || !bytes.Equal(page[1].Raw, large.Raw) {
		t.Errorf("migrated: Read = %d entries, %v", len(page), err)
	}
	if _, err := s.deleteMessages([]protocol.ID{small.ID, large.ID}); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if n := dataKeys(t, s, m.ID); n != 0 {
			t.Errorf("%d data keys of %s left after its delete", n, m.ID)
		}
	}
	if u, _ := s.Usage(sp); u != (Usage{}) {
		t.Errorf("usage after deleting all: %+v", u)
	}
	checkAllKeys(t, s)
}

// TestV3DeletedStoredAgain: a message held as a version 3 record
// with a data key, deleted and stored again, is one inline key with no
// data key left; the counters come back to one message.
func TestV3DeletedStoredAgain(t *testing.T) {
	for _, mem := range []bool{false, true} {
		var s *Store
		if mem {
			var err error
			s, err = Open(Options{InMemory: true, SweepInterval: -1, GCInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
		} else {
			s = openAt(t, t.TempDir())
		}
		sp := protocol.SpaceID("again")
		key, _, _ := crypto.GenerateEd25519Key(nil)
		m := signed(t, key, sp, "again")
		big := signed(t, key, sp, strings.Repeat("z", 600*kib)) // two chunks
		for _, x := range []Message{m, big} {
			if _, _, err := s.Put(t.Context(), x); err != nil {
				t.Fatal(err)
			}
		}
		storeAsV3(t, s, m)
		checkAllKeys(t, s)
		if n := dataKeys(t, s, big.ID); n != 2 {
			t.Errorf("mem %v: big: %d data keys, want 2", mem, n)
		}
		if _, err := s.deleteMessages([]protocol.ID{m.ID, big.ID}); err != nil {
			t.Fatal(err)
		}
		for _, x := range []Message{m, big} {
			if _, _, err := s.Put(t.Context(), x); err != nil {
				t.Fatal(err)
			}
			e, err := s.Get(x.ID)
			if err != nil || !bytes.Equal(e.Raw, x.Raw) {
				t.Errorf("mem %v: stored again: Get = %d bytes, %v", mem, len(e.Raw), err)
			}
		}
		if n := dataKeys(t, s, m.ID); n != 0 {
			t.Errorf("mem %v: stored again: %d data keys, want 0", mem, n)
		}
		if u, _ := s.Usage(sp); u.Count != 2 || u.Bytes != int64(len(m.Raw)+len(big.Raw)) {
			t.Errorf("mem %v: usage %+v", mem, u)
		}
		checkAllKeys(t, s)
		s.Close()
	}
}

// TestInlineBoundary: messages around the threshold read back.
func TestInlineBoundary(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	sp := protocol.SpaceID("edge")
	base := Message{Space: sp, From: "f", Prev: []protocol.ID{protocol.MessageID([]byte("p"))}}
	over := 0
	for n := 0; n < valueThreshold; n++ {
		m := base
		m.Raw = bytes.Repeat([]byte{byte(n)}, n)
		m.ID = protocol.MessageID(m.Raw)
		if inlineRecordSize(m) < valueThreshold-4 || inlineRecordSize(m) > valueThreshold+4 {
			continue
		}
		if inlineRecordSize(m) >= valueThreshold {
			over++
		}
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		e, err := s.Get(m.ID)
		if err != nil || !bytes.Equal(e.Raw, m.Raw) {
			t.Errorf("%d bytes: Get = %d, %v", n, len(e.Raw), err)
		}
		want := 0
		if inlineRecordSize(m) >= valueThreshold {
			want = 1
		}
		if d := dataKeys(t, s, m.ID); d != want {
			t.Errorf("%d bytes (record %d): %d data keys, want %d", n, inlineRecordSize(m), d, want)
		}
	}
	if over == 0 {
		t.Fatal("no message over the threshold tried")
	}
	checkAllKeys(t, s)
}

// TestV3NoChunksTrailing: a version 3 record with no chunks is a
// message of no bytes; bytes after its From are refused, not read as
// inline bytes (only version 4 holds them).
func TestV3NoChunksTrailing(t *testing.T) {
	id := protocol.MessageID([]byte("m"))
	v3 := encodeRecord(Message{ID: id, Space: protocol.SpaceID("s"), From: "f", Raw: []byte("abc")}, 7, true)
	v3[0] = recordVersionV3
	if e, n, err := decodeRecord(id, v3); err == nil {
		t.Errorf("version 3, no chunks, 3 bytes after From: %d chunks, %q, want errBadRecord", n, e.Raw)
	}
}
