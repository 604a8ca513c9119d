package protocol_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/internal/prototest"
)

func mustParseID(tb testing.TB, s string) protocol.ID {
	tb.Helper()
	id, err := protocol.ParseID(s)
	if err != nil {
		tb.Fatalf("ParseID(%q): %v", s, err)
	}
	return id
}

// frame builds a wire encoding by hand: format byte, uvarint length, body,
// signature. It does not go through the package, so tests can build frames
// the package would never produce.
func frame(body, sig []byte) []byte {
	w := []byte{0x01}
	w = binary.AppendUvarint(w, uint64(len(body)))
	w = append(w, body...)
	return append(w, sig...)
}

// signRaw signs body exactly as the protocol documents (Ed25519 over
// SigningDomain followed by the body) and frames it, whatever the body
// holds. Checks on crafted bodies therefore fail on shape, not signature.
func signRaw(tb testing.TB, key crypto.PrivKey, body []byte) []byte {
	tb.Helper()
	sig, err := key.Sign(append([]byte(protocol.SigningDomain), body...))
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	return frame(body, sig)
}

// field is one top-level member of a hand-built body: its key and its raw
// JSON value.
type field struct{ key, raw string }

// fields is an ordered hand-built body.
type fields []field

// baseFields is a valid minimal body from key's peer at the fixed time.
func baseFields(tb testing.TB, key crypto.PrivKey) fields {
	tb.Helper()
	return fields{
		{"v", "1"},
		{"space", `"` + protocol.SpaceID("general").String() + `"`},
		{"from", `"` + peerOf(tb, key).String() + `"`},
		{"created_at", "1767225600000"},
		{"type", `"text"`},
		{"content", `{"text":"hello"}`},
	}
}

// set replaces the value of key, or appends key before content if absent.
func (fs fields) set(key, raw string) fields {
	out := make(fields, 0, len(fs)+1)
	done := false
	for _, f := range fs {
		if f.key == key {
			f.raw, done = raw, true
		}
		out = append(out, f)
	}
	if !done {
		return out.insertBefore("content", field{key, raw})
	}
	return out
}

func (fs fields) del(key string) fields {
	out := make(fields, 0, len(fs))
	for _, f := range fs {
		if f.key != key {
			out = append(out, f)
		}
	}
	return out
}

// add appends a member even if key is already there (for duplicates).
func (fs fields) add(key, raw string) fields {
	return append(fs[:len(fs):len(fs)], field{key, raw})
}

func (fs fields) insertBefore(key string, nf field) fields {
	out := make(fields, 0, len(fs)+1)
	done := false
	for _, f := range fs {
		if f.key == key && !done {
			out, done = append(out, nf), true
		}
		out = append(out, f)
	}
	if !done {
		out = append(out, nf)
	}
	return out
}

func (fs fields) body() []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + f.key + `":` + f.raw)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// js returns v as JSON, failing tb on error.
func js(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("json: %v", err)
	}
	return string(b)
}

// wantErr fails tb unless err wraps sentinel and Code(err) is code.
func wantErr(tb testing.TB, err, sentinel error, code string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("err = nil, want %v (%s)", sentinel, code)
	}
	if !errors.Is(err, sentinel) {
		tb.Fatalf("err = %v, want it to wrap %v", err, sentinel)
	}
	if got := protocol.Code(err); got != code {
		tb.Fatalf("Code(%v) = %q, want %q", err, got, code)
	}
}

// Shared with protocol's sub-packages' tests.
var (
	created      = prototest.Created
	keyFromSeed  = prototest.KeyFromSeed
	testKey      = prototest.Key
	peerOf       = prototest.PeerOf
	mustHex      = prototest.MustHex
	sign         = prototest.Sign
	minimalDraft = prototest.MinimalDraft
)

// sameMessage reports whether a and b are the same message: every field,
// the sender and the wire bytes (not whether this process checked the
// signature, which Decode does not and Sign and Validate do).
func sameMessage(a, b *protocol.Message) bool {
	return reflect.DeepEqual(a.Header, b.Header) && bytes.Equal(a.Content, b.Content) && a.ID == b.ID &&
		bytes.Equal(a.Body, b.Body) && bytes.Equal(a.Sig, b.Sig) && a.Sender() == b.Sender() && bytes.Equal(a.Wire(), b.Wire())
}
