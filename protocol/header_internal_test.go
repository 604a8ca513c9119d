package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
)

// headerCases are headers for TestAppendHeaderMatchesMarshal: every field
// set, none, empty slices and maps, and strings json.Marshal escapes.
func headerCases() []Header {
	id := func(b byte) ID { return MessageID([]byte{b}) }
	full := Header{
		V: Version, Space: id(1), From: "12D3KooWabc", CreatedAt: 1764150000123,
		Prev: []ID{id(2), id(3)},
		Refs: Refs{Messages: []ID{id(4)}, Nodes: []string{"12D3KooWx", "12D3KooWy"}},
		Type: "text", TTL: 3600, Meta: map[string]string{"b": "2", "a": "1", "thread": "t-1"},
	}
	cases := []Header{full, {}, {V: Version, Space: id(5), From: "p", CreatedAt: -5, Type: "t"}}
	edits := []func(*Header){
		func(h *Header) {
			h.Prev, h.Meta, h.Refs = []ID{}, map[string]string{}, Refs{Messages: []ID{}, Nodes: []string{}}
		},
		func(h *Header) { h.Refs = Refs{Nodes: []string{"n"}} },
		func(h *Header) { h.Refs = Refs{Messages: []ID{id(9)}} },
		func(h *Header) { h.Prev = []ID{{}} },
		func(h *Header) { h.Type = `<a & "b">` },
		func(h *Header) { h.Type = "tab\there" },
		func(h *Header) { h.Type = "a<b" },
		func(h *Header) { h.Meta = map[string]string{"k": "x>y"} },
		func(h *Header) { h.Refs.Nodes = []string{"a&b"} },
		func(h *Header) { h.From = "q\"q" },
		func(h *Header) { h.Type = "del\x7f" },
		func(h *Header) { h.From = "ünï" },
		func(h *Header) { h.Meta = map[string]string{"k": "a\xffb"} },
		func(h *Header) { h.Meta = map[string]string{"é\u2028": "v"} },
		func(h *Header) { h.Refs.Nodes = []string{`back\slash`} },
		func(h *Header) { h.TTL = -1 },
	}
	for _, e := range edits {
		h := full
		e(&h)
		cases = append(cases, h)
	}
	return cases
}

// TestAppendHeaderMatchesMarshal checks that appendHeader writes what
// json.Marshal writes (the signed body depends on it) or declines.
func TestAppendHeaderMatchesMarshal(t *testing.T) {
	wrote := 0
	for i, h := range headerCases() {
		checkAppendHeader(t, i, h)
		if _, ok := appendHeader(nil, &h); ok {
			wrote++
		}
	}
	if wrote < 8 {
		t.Fatalf("appendHeader wrote only %d of the headers", wrote)
	}
}

func checkAppendHeader(t *testing.T, i int, h Header) {
	t.Helper()
	want, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendHeader([]byte("x"), &h)
	if !ok {
		if !bytes.Equal(got, []byte("x")) {
			t.Fatalf("case %d: declined but wrote %q", i, got)
		}
		return
	}
	if want := append([]byte("x"), want[:len(want)-1]...); !bytes.Equal(got, want) {
		t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
	}
}

// FuzzAppendHeader checks appendHeader against json.Marshal on any
// strings.
func FuzzAppendHeader(f *testing.F) {
	f.Add("12D3KooWabc", "text", "k", "v", "n", int64(0), int64(1))
	f.Add("a<b", "t\x00", "é", "\u2028", "", int64(-1), int64(-1))
	f.Fuzz(func(t *testing.T, from, typ, k, v, node string, ttl, at int64) {
		h := Header{V: Version, Space: MessageID([]byte(from)), From: from, CreatedAt: at, Type: typ, TTL: ttl,
			Prev: []ID{MessageID([]byte(typ))}, Meta: map[string]string{k: v}}
		if node != "" {
			h.Refs.Nodes = []string{node}
		}
		checkAppendHeader(t, 0, h)
	})
}
