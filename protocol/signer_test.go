package protocol_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestSignMatchesParse holds a Signer's message, made from the draft's
// fields without reading its body back, equal to the body decoded as a
// receiver decodes it: the fields, the content, the ID and the sender.
func TestSignMatchesParse(t *testing.T) {
	key := testKey(t, 1)
	s, err := protocol.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	full := fullDraft(t)
	tests := []struct {
		name   string
		edit   func(*protocol.Draft)
		refuse bool // by both: a receiver would not parse it
	}{
		{"full", func(*protocol.Draft) {}, false},
		{"minimal", func(d *protocol.Draft) { *d = minimalDraft() }, false},
		{"empty slices and map", func(d *protocol.Draft) {
			d.Prev, d.Meta = []protocol.ID{}, map[string]string{}
			d.Refs = protocol.Refs{Messages: []protocol.ID{}, Nodes: []string{}}
		}, false},
		{"escaped strings", func(d *protocol.Draft) {
			d.Type = `<a & "b">`
			d.Meta = map[string]string{"é\u2028": "\t<tag>\\", "z": "ünï"}
		}, false},
		{"invalid UTF-8 in meta", func(d *protocol.Draft) { d.Meta = map[string]string{"k": "a\xffb"} }, false},
		{"invalid UTF-8 in type", func(d *protocol.Draft) { d.Type = "t\xfe" }, false},
		{"invalid UTF-8 in content", func(d *protocol.Draft) { d.Content = json.RawMessage("{\"s\":\"\xff\"}") }, true},
		{"zero prev", func(d *protocol.Draft) { d.Prev = []protocol.ID{{}} }, true},
		{"zero reply ref", func(d *protocol.Draft) { d.Refs.Messages = []protocol.ID{{}} }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := full
			tc.edit(&d)
			m, err := s.Sign(d, protocol.DefaultLimits())
			if tc.refuse {
				if err == nil {
					t.Fatalf("signed %q", m.Body)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := protocol.Decode(m.Encode(), protocol.DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if !sameMessage(m, got) {
				t.Errorf("signed and decoded differ:\n signed %+v content %q\ndecoded %+v content %q", m.Header, m.Content, got.Header, got.Content)
			}
			if _, err := protocol.Validate(m.Encode(), d.CreatedAt, protocol.DefaultLimits()); err != nil {
				t.Errorf("a receiver refuses it: %v", err)
			}
		})
	}
}

// TestSignerChecksLikeAReceiver: a draft a receiver would refuse is
// refused by the Signer's fast path too, before it signs.
func TestSignerChecksLikeAReceiver(t *testing.T) {
	s, err := protocol.NewSigner(testKey(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	lim := protocol.DefaultLimits()
	tests := []struct {
		name string
		edit func(*protocol.Draft)
	}{
		{"no type", func(d *protocol.Draft) { d.Type = "" }},
		{"no space", func(d *protocol.Draft) { d.Space = protocol.ID{} }},
		{"too many prev", func(d *protocol.Draft) { d.Prev = make([]protocol.ID, lim.MaxPrev+1) }},
		{"empty meta key", func(d *protocol.Draft) { d.Meta = map[string]string{"": "v"} }},
		{"bad node ref", func(d *protocol.Draft) { d.Refs.Nodes = []string{"not-a-peer"} }},
		{"content not an object", func(d *protocol.Draft) { d.Content = json.RawMessage(`[1]`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := fullDraft(t)
			tc.edit(&d)
			if m, err := s.Sign(d, lim); err == nil {
				t.Fatalf("signed %s", m.Body)
			}
		})
	}
}

// TestDecodeStoredMatchesDecode: for bytes a node checked and stored,
// DecodeStored returns what Decode returns; bytes that are not a wire
// encoding are refused.
func TestDecodeStoredMatchesDecode(t *testing.T) {
	key := testKey(t, 1)
	for _, d := range []protocol.Draft{fullDraft(t), minimalDraft()} {
		wire := sign(t, key, d).Encode()
		want, err := protocol.Decode(wire, protocol.StoredLimits())
		if err != nil {
			t.Fatal(err)
		}
		got, err := protocol.DecodeStored(wire)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMessage(got, want) {
			t.Errorf("DecodeStored\n got %+v\nwant %+v", got.Header, want.Header)
		}
		wire[len(wire)/2] ^= 0xff // no memory shared
		if !sameMessage(got, want) {
			t.Error("the decoded message changed with the wire bytes")
		}
	}
	good := sign(t, key, minimalDraft()).Encode()
	for name, wire := range map[string][]byte{
		"empty":         nil,
		"format":        append([]byte{0x02}, good[1:]...),
		"short":         good[:len(good)-1],
		"long":          append(append([]byte{}, good...), 0),
		"length":        {0x01, 0xff},
		"body not JSON": func() []byte { w := append([]byte{}, good...); w[bytes.IndexByte(w, '{')] = '['; return w }(),
	} {
		if _, err := protocol.DecodeStored(wire); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
