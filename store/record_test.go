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
		b := encodeRecord(m, 42)
		e, n, err := decodeRecord(id, b)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", m, err)
		}
		if e.Cursor != 42 || e.Space != m.Space || e.Time != m.Time || e.Expires != m.Expires ||
			!slices.Equal(e.Prev, m.Prev) || !slices.Equal(e.ReplyTo, m.ReplyTo) || n != len(chunks(m.Raw)) {
			t.Errorf("round trip of %+v = %+v, %d chunks", m, e, n)
		}
		if sp, err := recordSpace(b); err != nil || sp != m.Space {
			t.Errorf("recordSpace = %s, %v", sp, err)
		}
	}
}

// TestRecordVersion1 checks that a record from before version 2 is refused
// with an error naming the version.
func TestRecordVersion1(t *testing.T) {
	id := protocol.MessageID([]byte("m"))
	v1 := append([]byte{1}, make([]byte, seqSize+protocol.IDSize+2)...) // seq, space, no prev, no chunks
	for _, b := range [][]byte{v1, nil, {2}, encodeRecord(Message{ID: id}, 1)[:recordFixedSize-1]} {
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
	f.Add(encodeRecord(Message{ID: id, Time: 7, Prev: []protocol.ID{id}, ReplyTo: []protocol.ID{id}, Raw: []byte("x")}, 3))
	f.Add([]byte{1, 2, 3})
	f.Add(append(encodeRecord(Message{ID: id}, 1)[:recordFixedSize], 0x80, 0x00, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := decodeRecord(id, b)
		if err != nil {
			return
		}
		m := e.Message
		m.Raw = make([]byte, n*dataChunkSize) // n full chunks encode as n
		// Varints need not be minimal, so compare decodings, not bytes.
		e2, n2, err := decodeRecord(id, encodeRecord(m, uint64(e.Cursor)))
		if err != nil || n2 != n || e2.Cursor != e.Cursor || e2.Space != e.Space || e2.Time != e.Time ||
			e2.Expires != e.Expires || !slices.Equal(e2.Prev, e.Prev) || !slices.Equal(e2.ReplyTo, e.ReplyTo) {
			t.Errorf("re-encoding %x decodes to %+v, %d, %v; want %+v, %d", b, e2, n2, err, e, n)
		}
	})
}
