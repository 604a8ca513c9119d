package localapi

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// TestAppendEventMatchesJSON: each server-sent event is written, without
// reflection, byte for byte as it was with encoding/json: messages with
// and without prev, refs, ttl and meta, content with spaces, escapes and
// characters encoding/json could escape as HTML.
func TestAppendEventMatchesJSON(t *testing.T) {
	msgs := storedMessages(t)
	buf := []byte("left as it was")
	for i, m := range msgs {
		data, err := marshal(apiStored(m))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("id: %s\nevent: message\ndata: %s\n\n", m.Cursor, data)
		got, ok := appendEvent(buf, m)
		if !ok || string(got) != "left as it was"+want {
			t.Errorf("message %d:\n got %q\nwant %q", i, got, want)
		}
	}
}

// BenchmarkAppendEvent encodes one event, by hand and with encoding/json.
func BenchmarkAppendEvent(b *testing.B) {
	m := newFake().add("a message of a few words, as agents send them")
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = appendEvent(buf[:0], m)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			data, _ := marshal(apiStored(m))
			buf = fmt.Appendf(buf[:0], "id: %s\nevent: message\ndata: %s\n\n", m.Cursor, data)
		}
	})
}

// storedMessages returns messages as a page or the send answer carries
// them: with and without prev, refs, ttl, meta and cursor, content with
// spaces, escapes and characters encoding/json could escape as HTML.
func storedMessages(t *testing.T) []node.Message {
	f := newFake()
	first := f.add("one")
	at := time.Date(2026, 11, 26, 1, 2, 3, 4005, time.UTC)
	drafts := []protocol.Draft{
		{Space: labID, CreatedAt: at, Type: "text", Content: json.RawMessage(`{"text":"two"}`)},
		{Space: labID, CreatedAt: at.Truncate(time.Second), Type: "note", Prev: []protocol.ID{first.ID},
			Refs: protocol.Refs{Messages: []protocol.ID{first.ID}, Nodes: []string{f.id.String()}},
			TTL:  time.Hour, Meta: map[string]string{"z": "last", "a": "<&>\u2028", "m": "tab\there"},
			Content: json.RawMessage("{ \"text\" : \"a <b> & c\\n\\u00e9\" ,\n \"n\": [1, 2.5e3, null, true] }")},
		{Space: labID, CreatedAt: at, Type: "x", Refs: protocol.Refs{Nodes: []string{f.id.String()}}, Content: json.RawMessage(`{}`)},
	}
	msgs := []node.Message{first}
	for i, d := range drafts {
		m, err := protocol.Sign(f.key, d, protocol.DefaultLimits())
		if err != nil {
			t.Fatalf("draft %d: %v", i, err)
		}
		msgs = append(msgs, node.Message{Message: m, Cursor: store.Cursor(1<<40 + i)})
	}
	// A message without a cursor (none in a stream, but the JSON omits it).
	msgs = append(msgs, node.Message{Message: msgs[2].Message})
	return msgs
}
