package store

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

func TestRecordRoundTrip(t *testing.T) {
	id := protocol.MessageID([]byte("m"))
	tests := []Message{
		{ID: id, Space: protocol.SpaceID("s")},
		{ID: id, Space: protocol.SpaceID("s"), Time: -5, Expires: 1 << 62, Raw: []byte("x")},
		{
			ID: id, Space: protocol.SpaceID("s"), Time: 1767225600000, Expires: -1,
			Prev:    []protocol.ID{protocol.MessageID([]byte("p1")), protocol.MessageID([]byte("p2"))},
			ReplyTo: []protocol.ID{protocol.MessageID([]byte("r"))},
			Raw:     bytes.Repeat([]byte("y"), 2*dataChunkSize+1),
		},
	}
	for _, m := range tests {
		for _, inline := range []bool{false, true} {
			b := encodeRecord(m, 42, inline)
			e, n, err := decodeRecord(id, b)
			if err != nil {
				t.Fatalf("decode(encode(%+v, inline %v)): %v", m, inline, err)
			}
			wantChunks, wantRaw := len(chunks(m.Raw)), []byte(nil)
			if inline {
				wantChunks, wantRaw = 0, m.Raw
			}
			if e.Cursor != 42 || e.Space != m.Space || e.Time != m.Time || e.Expires != m.Expires ||
				!slices.Equal(e.Prev, m.Prev) || !slices.Equal(e.ReplyTo, m.ReplyTo) || n != wantChunks ||
				!bytes.Equal(e.Raw, wantRaw) {
				t.Errorf("round trip of %+v (inline %v) = %+v, %d chunks", m, inline, e, n)
			}
			if sp, err := recordSpace(b); err != nil || sp != m.Space {
				t.Errorf("recordSpace = %s, %v", sp, err)
			}
			if inline && len(b) != inlineRecordSize(m) {
				t.Errorf("inline record of %+v: %d bytes, inlineRecordSize %d", m, len(b), inlineRecordSize(m))
			}
		}
	}
}

// TestRecordVersion3: a record of version 3 (raw bytes always under the
// data keys, nothing after From) is read as before; one with bytes after
// From is refused, as is a version 4 record whose inline bytes are not
// its size.
func TestRecordVersion3(t *testing.T) {
	id := protocol.MessageID([]byte("m"))
	m := Message{ID: id, Space: protocol.SpaceID("s"), From: "12D3KooW", Raw: []byte("hello")}
	v3 := encodeRecord(m, 7, false)
	v3[0] = recordVersionV3
	e, n, size, err := decodeRecordSize(id, v3)
	if err != nil || n != 1 || size != 5 || e.Raw != nil || e.From != m.From {
		t.Fatalf("version 3: %+v, %d chunks, size %d, %v; want 1 chunk of 5 bytes, from %s", e, n, size, err, m.From)
	}
	if _, _, err := decodeRecord(id, append(v3, 'x')); !errors.Is(err, errBadRecord) {
		t.Errorf("version 3 with a byte after From: %v, want errBadRecord", err)
	}
	in := encodeRecord(m, 7, true)
	for _, b := range [][]byte{in[:len(in)-1], append(slices.Clip(in), 'x')} {
		if _, _, err := decodeRecord(id, b); !errors.Is(err, errBadRecord) {
			t.Errorf("inline bytes not the record's size (%d bytes): %v, want errBadRecord", len(b), err)
		}
	}
	// A version 3 record with no chunks is a message of no bytes, not one
	// whose bytes follow.
	empty := encodeRecord(Message{ID: id, Space: m.Space}, 7, false)
	empty[0] = recordVersionV3
	if e, n, err := decodeRecord(id, empty); err != nil || n != 0 || e.Raw != nil {
		t.Errorf("version 3, no bytes: %+v, %d, %v", e, n, err)
	}
}

// TestRecordVersion1 checks that a record from before version 2 is refused
// with an error naming the version.
func TestRecordVersion1(t *testing.T) {
	id := protocol.MessageID([]byte("m"))
	v1 := append([]byte{1}, make([]byte, seqSize+protocol.IDSize+2)...) // seq, space, no prev, no chunks
	for _, b := range [][]byte{v1, nil, {2}, encodeRecord(Message{ID: id}, 1, false)[:recordFixedSize-1]} {
		_, _, err := decodeRecord(id, b)
		if !errors.Is(err, errBadRecord) {
			t.Errorf("decodeRecord(%x) = %v, want errBadRecord", b, err)
		}
		if _, err := recordSpace(b); !errors.Is(err, errBadRecord) {
			t.Errorf("recordSpace(%x) = %v, want errBadRecord", b, err)
		}
	}
	if _, _, err := decodeRecord(id, v1); err == nil || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("decodeRecord(v1) = %v, want an error naming version 1", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	id := protocol.MessageID([]byte("m"))
	f.Add(encodeRecord(Message{ID: id, Time: 7, Prev: []protocol.ID{id}, ReplyTo: []protocol.ID{id}, Raw: []byte("x")}, 3, false))
	f.Add(encodeRecord(Message{ID: id, Time: 7, Prev: []protocol.ID{id}, From: "f", Raw: []byte("xyz")}, 3, true))
	f.Add([]byte{1, 2, 3})
	f.Add(append(encodeRecord(Message{ID: id}, 1, false)[:recordFixedSize], 0x80, 0x00, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := decodeRecord(id, b)
		if err != nil {
			return
		}
		if n > 0 && e.Raw != nil {
			t.Fatalf("%x: raw bytes in the record and %d chunks", b, n)
		}
		m := e.Message
		inline := b[0] == recordVersion && n == 0
		if !inline {
			m.Raw = make([]byte, n*dataChunkSize) // n full chunks encode as n
		}
		// Varints need not be minimal, so compare decodings, not bytes.
		e2, n2, err := decodeRecord(id, encodeRecord(m, uint64(e.Cursor), inline))
		if err != nil || n2 != n || e2.Cursor != e.Cursor || e2.Space != e.Space || e2.Time != e.Time ||
			e2.Expires != e.Expires || !slices.Equal(e2.Prev, e.Prev) || !slices.Equal(e2.ReplyTo, e.ReplyTo) ||
			e2.From != e.From || !bytes.Equal(e2.Raw, e.Raw) {
			t.Errorf("re-encoding %x decodes to %+v, %d, %v; want %+v, %d", b, e2, n2, err, e, n)
		}
	})
}
