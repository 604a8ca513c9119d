package protocol_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

func fullDraft(tb testing.TB) protocol.Draft {
	tb.Helper()
	return protocol.Draft{
		Space:     protocol.SpaceID("round-trip"),
		CreatedAt: created.Add(123456789 * time.Nanosecond), // sub-ms part is dropped
		Prev:      []protocol.ID{protocol.MessageID([]byte("p1")), protocol.MessageID([]byte("p2"))},
		Refs: protocol.Refs{
			Messages: []protocol.ID{protocol.MessageID([]byte("r1"))},
			Nodes:    []string{peerOf(tb, testKey(tb, 2)).String()},
		},
		Type:    "task",
		TTL:     90*time.Second + 900*time.Millisecond, // rounded down to 90 s
		Meta:    map[string]string{"k": "v", "agent": "a1"},
		Content: json.RawMessage(" \n{\"n\": 1, \"s\": \"x\"}\t "),
	}
}

func TestSignRoundTrip(t *testing.T) {
	key := testKey(t, 1)
	d := fullDraft(t)
	m := sign(t, key, d)

	// Sign maps the draft onto the header.
	want := protocol.Header{
		V:         1,
		Space:     d.Space,
		From:      peerOf(t, key).String(),
		CreatedAt: created.UnixMilli() + 123,
		Prev:      d.Prev,
		Refs:      d.Refs,
		Type:      "task",
		TTL:       90,
		Meta:      d.Meta,
	}
	if !reflect.DeepEqual(m.Header, want) {
		t.Errorf("header\n got %+v\nwant %+v", m.Header, want)
	}
	if string(m.Content) != `{"n": 1, "s": "x"}` {
		t.Errorf("content = %q, want the draft's object with surrounding white space trimmed", m.Content)
	}
	if m.ID != protocol.MessageID(m.Body) {
		t.Errorf("ID %s is not MessageID(Body) %s", m.ID, protocol.MessageID(m.Body))
	}
	if m.Sender() != peerOf(t, key) {
		t.Errorf("Sender = %s", m.Sender())
	}
	if len(m.Sig) != protocol.SignatureSize {
		t.Errorf("len(Sig) = %d", len(m.Sig))
	}
	if exp, ok := m.Expiry(); !ok || !exp.Equal(m.Created().Add(90*time.Second)) {
		t.Errorf("Expiry = %v, %v", exp, ok)
	}
	if !m.Created().Equal(time.UnixMilli(created.UnixMilli() + 123)) {
		t.Errorf("Created = %v", m.Created())
	}

	wire := m.Encode()
	decoded, err := protocol.Decode(wire, protocol.DefaultLimits())
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !sameMessage(decoded, m) {
		t.Errorf("Decode(Encode(m)) != m\n got %+v\nwant %+v", decoded, m)
	}
	validated, err := protocol.Validate(wire, created.Add(time.Second), protocol.DefaultLimits())
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if !sameMessage(validated, m) {
		t.Errorf("Validate(Encode(m)) != m")
	}
	if err := validated.CheckID(m.ID); err != nil {
		t.Errorf("CheckID: %v", err)
	}
	if !bytes.Equal(validated.Encode(), wire) {
		t.Errorf("re-encoding changed the wire bytes")
	}

	// The decoded message shares no memory with the wire.
	for i := range wire {
		wire[i] ^= 0xff
	}
	if !bytes.Equal(decoded.Body, m.Body) || !bytes.Equal(decoded.Sig, m.Sig) || !bytes.Equal(decoded.Content, m.Content) {
		t.Errorf("Decode result aliases its input")
	}
}

func TestSignMinimal(t *testing.T) {
	key := testKey(t, 1)
	m := sign(t, key, minimalDraft())
	want := `{"v":1,"space":"` + protocol.SpaceID("general").String() + `","from":"` + peerOf(t, key).String() +
		`","created_at":1767225600000,"type":"text","content":{"text":"hello"}}`
	if string(m.Body) != want {
		t.Errorf("body\n got %s\nwant %s", m.Body, want)
	}
	if m.Prev != nil || !m.Refs.IsZero() || m.TTL != 0 || m.Meta != nil {
		t.Errorf("empty fields not empty: %+v", m.Header)
	}
	if _, ok := m.Expiry(); ok {
		t.Error("a message without ttl expires")
	}
	// Without a TTL a message never expires, unless it is older than the
	// limits' MaxAge.
	unbounded := protocol.DefaultLimits()
	unbounded.MaxAge = 0
	if _, err := protocol.Validate(m.Encode(), created.AddDate(50, 0, 0), unbounded); err != nil {
		t.Errorf("Validate 50 years later: %v", err)
	}
}

func TestSignDeterministic(t *testing.T) {
	a := sign(t, testKey(t, 1), fullDraft(t))
	b := sign(t, testKey(t, 1), fullDraft(t))
	if !bytes.Equal(a.Encode(), b.Encode()) {
		t.Error("signing one draft twice gave different wires")
	}
	c := sign(t, testKey(t, 2), fullDraft(t))
	if a.ID == c.ID {
		t.Error("two senders gave one ID")
	}
}

func TestSignErrors(t *testing.T) {
	key := testKey(t, 1)
	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		key   crypto.PrivKey
		draft func(*protocol.Draft)
		lim   func(*protocol.Limits)
		err   error
		code  string
	}{
		{name: "secp256k1 key", key: secp, err: protocol.ErrBadSender, code: "bad_sender"},
		{name: "body over MaxSize", lim: func(l *protocol.Limits) { l.MaxSize = 100 }, err: protocol.ErrTooLarge, code: "too_large"},
		{name: "content nil", draft: func(d *protocol.Draft) { d.Content = nil }},
		{name: "content white space", draft: func(d *protocol.Draft) { d.Content = []byte(" \n\t") }},
		{name: "content array", draft: func(d *protocol.Draft) { d.Content = []byte(`[1,2]`) }},
		{name: "content string", draft: func(d *protocol.Draft) { d.Content = []byte(`"hi"`) }},
		{name: "content null", draft: func(d *protocol.Draft) { d.Content = []byte(`null`) }},
		{name: "content number", draft: func(d *protocol.Draft) { d.Content = []byte(`42`) }},
		{name: "content truncated", draft: func(d *protocol.Draft) { d.Content = []byte(`{"a":`) }},
		{name: "content two objects", draft: func(d *protocol.Draft) { d.Content = []byte(`{"a":1}{"b":2}`) }},
		{name: "content trailing brace", draft: func(d *protocol.Draft) { d.Content = []byte(`{"a":1}}`) }},
		{name: "content not UTF-8", draft: func(d *protocol.Draft) { d.Content = []byte("{\"a\":\"\xff\"}") }},
		{name: "zero space", draft: func(d *protocol.Draft) { d.Space = protocol.ID{} }},
		{name: "zero created", draft: func(d *protocol.Draft) { d.CreatedAt = time.Time{} }},
		{name: "empty type", draft: func(d *protocol.Draft) { d.Type = "" }},
		{name: "type too long", draft: func(d *protocol.Draft) { d.Type = strings.Repeat("t", 65) }},
		{name: "negative ttl", draft: func(d *protocol.Draft) { d.TTL = -time.Second }},
		{name: "zero prev", draft: func(d *protocol.Draft) { d.Prev = []protocol.ID{{}} }},
		{name: "bad refs node", draft: func(d *protocol.Draft) { d.Refs.Nodes = []string{"nope"} }},
		{name: "too many prev", draft: func(d *protocol.Draft) { d.Prev = make([]protocol.ID, 3) }, lim: func(l *protocol.Limits) { l.MaxPrev = 2 }},
		{name: "empty meta key", draft: func(d *protocol.Draft) { d.Meta = map[string]string{"": "v"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, d, lim := key, minimalDraft(), protocol.DefaultLimits()
			if tt.key != nil {
				k = tt.key
			}
			if tt.draft != nil {
				tt.draft(&d)
			}
			if tt.lim != nil {
				tt.lim(&lim)
			}
			if tt.err == nil {
				tt.err, tt.code = protocol.ErrMalformed, "malformed"
			}
			m, err := protocol.Sign(k, d, lim)
			wantErr(t, err, tt.err, tt.code)
			if m != nil {
				t.Errorf("Sign returned a message with its error")
			}
		})
	}
}

// TestSignMaxSize: a body of exactly MaxMessageSize bytes is accepted
// everywhere, one more byte is not, and its wire fits MaxWireSize.
func TestSignMaxSize(t *testing.T) {
	key := testKey(t, 1)
	d := minimalDraft()
	d.Content = []byte(`{"p":""}`)
	base := len(sign(t, key, d).Body)
	d.Content = []byte(`{"p":"` + strings.Repeat("x", protocol.MaxMessageSize-base) + `"}`)
	m := sign(t, key, d)
	if len(m.Body) != protocol.MaxMessageSize {
		t.Fatalf("body is %d bytes, want %d", len(m.Body), protocol.MaxMessageSize)
	}
	wire := m.Encode()
	if len(wire) > protocol.MaxWireSize {
		t.Errorf("wire is %d bytes, MaxWireSize %d", len(wire), protocol.MaxWireSize)
	}
	if _, err := protocol.Validate(wire, created, protocol.DefaultLimits()); err != nil {
		t.Errorf("Validate: %v", err)
	}

	d.Content = []byte(`{"p":"` + strings.Repeat("x", protocol.MaxMessageSize-base+1) + `"}`)
	_, err := protocol.Sign(key, d, protocol.DefaultLimits())
	wantErr(t, err, protocol.ErrTooLarge, "too_large")
	body := append(bytes.Clone(m.Body[:len(m.Body)-2]), `x"}`...)
	_, err = protocol.Decode(signRaw(t, key, body), protocol.DefaultLimits())
	wantErr(t, err, protocol.ErrTooLarge, "too_large")
}

// validationCase is one wire that Validate must refuse.
type validationCase struct {
	name string
	wire []byte
	now  time.Time              // zero: one second after the fixed creation time
	lim  func(*protocol.Limits) // nil: DefaultLimits
	err  error                  // nil: ErrMalformed
	code string
	// verifyOnly: the frame and shape are fine, so Decode succeeds and only
	// Verify (signature, clock, TTL) fails.
	verifyOnly bool
}

func TestValidateErrors(t *testing.T) {
	key, other := testKey(t, 1), testKey(t, 2)
	base := baseFields(t, key)
	good := signRaw(t, key, base.body())
	goodBody := base.body()
	sig := good[len(good)-protocol.SignatureSize:]
	crafted := func(fs fields) []byte { return signRaw(t, key, fs.body()) }
	craftedRaw := func(body string) []byte { return signRaw(t, key, []byte(body)) }
	str := func(s string) string { return js(t, s) }

	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsa, _, err := crypto.GenerateRSAKeyPair(2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	peers := func(n int) string {
		var ps []string
		for i := range n {
			ps = append(ps, peerOf(t, testKey(t, byte(10+i))).String())
		}
		return js(t, ps)
	}
	ids := func(n int) string {
		var out []protocol.ID
		for i := range n {
			out = append(out, protocol.MessageID([]byte{byte(i)}))
		}
		return js(t, out)
	}
	meta := func(n int) string {
		m := make(map[string]string, n)
		for i := range n {
			m["k"+strconv.Itoa(i)] = "v"
		}
		return js(t, m)
	}
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x01
		return b
	}
	withSig := func(body []byte, k crypto.PrivKey, prefix string) []byte {
		s, err := k.Sign(append([]byte(prefix), body...))
		if err != nil {
			t.Fatal(err)
		}
		return frame(body, s)
	}
	tooLarge := protocol.ErrTooLarge

	tests := []validationCase{
		// Size.
		{name: "body over lowered MaxSize", wire: good, lim: func(l *protocol.Limits) { l.MaxSize = len(goodBody) - 1 }, err: tooLarge, code: "too_large"},
		{name: "frame claims 1 TiB", wire: append([]byte{0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, "{}"...), err: tooLarge, code: "too_large"},
		{name: "frame claims MaxMessageSize+1", wire: frame(make([]byte, protocol.MaxMessageSize+1), sig), err: tooLarge, code: "too_large"},
		{name: "frame claims 2^64-1", wire: []byte{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, err: tooLarge, code: "too_large"},

		// Frame.
		{name: "nil", wire: nil},
		{name: "empty", wire: []byte{}},
		{name: "format 0x00", wire: append([]byte{0x00}, good[1:]...)},
		{name: "format 0x02", wire: append([]byte{0x02}, good[1:]...)},
		{name: "bare JSON", wire: goodBody},
		{name: "format byte only", wire: []byte{0x01}},
		{name: "truncated varint", wire: []byte{0x01, 0x80}},
		{name: "truncated varint 2", wire: []byte{0x01, 0xff, 0xff}},
		{name: "varint overflow", wire: append([]byte{0x01}, bytes.Repeat([]byte{0xff}, 11)...)},
		{name: "last signature byte missing", wire: good[:len(good)-1]},
		{name: "signature missing", wire: frame(goodBody, nil)},
		{name: "body and signature missing", wire: good[:3]},
		{name: "trailing byte", wire: append(bytes.Clone(good), 0x00)},
		{name: "second message appended", wire: append(bytes.Clone(good), good...)},
		{name: "length one short", wire: append(append([]byte{0x01, byte(len(goodBody) - 1), 0x01}, goodBody...), sig...)},

		// Body: JSON object, UTF-8, no repeated key, nothing after it.
		{name: "empty body", wire: craftedRaw("")},
		{name: "body not JSON", wire: craftedRaw("hello")},
		{name: "body array", wire: craftedRaw(`[` + string(goodBody) + `]`)},
		{name: "body string", wire: craftedRaw(`"hello"`)},
		{name: "body null", wire: craftedRaw(`null`)},
		{name: "body number", wire: craftedRaw(`1`)},
		{name: "body truncated", wire: craftedRaw(string(goodBody[:len(goodBody)-1]))},
		{name: "body not UTF-8 in content", wire: crafted(base.set("content", "{\"text\":\"caf\xe9\"}"))},
		{name: "body not UTF-8 in key", wire: crafted(base.set("x\xff", "1"))},
		{name: "body overlong UTF-8", wire: crafted(base.set("content", "{\"text\":\"\xc0\xaf\"}"))},
		{name: "body surrogate UTF-8", wire: crafted(base.set("content", "{\"text\":\"\xed\xa0\x80\"}"))},
		{name: "repeated type", wire: crafted(base.add("type", `"text"`))},
		{name: "repeated content", wire: crafted(base.add("content", `{"text":"evil"}`))},
		{name: "repeated v with the same value", wire: crafted(base.add("v", "1"))},
		{name: "repeated key spelled with an escape", wire: crafted(base.add(`t\u0079pe`, `"evil"`))},
		{name: "repeated unknown key", wire: crafted(base.set("x", "1").add("x", "2"))},
		{name: "object after the body", wire: craftedRaw(string(goodBody) + `{}`)},
		{name: "text after the body", wire: craftedRaw(string(goodBody) + `x`)},
		{name: "brace after the body", wire: craftedRaw(string(goodBody) + `}`)},
		{name: "number after the body", wire: craftedRaw(string(goodBody) + ` 1`)},
		{name: "string after the body", wire: craftedRaw(string(goodBody) + `"s"`)},
		{name: "NUL after the body", wire: craftedRaw(string(goodBody) + "\x00")},

		// Version.
		{name: "v missing", wire: crafted(base.del("v")), err: protocol.ErrVersion, code: "unsupported_version"},
		{name: "v 0", wire: crafted(base.set("v", "0")), err: protocol.ErrVersion, code: "unsupported_version"},
		{name: "v 2", wire: crafted(base.set("v", "2")), err: protocol.ErrVersion, code: "unsupported_version"},
		{name: "v -1", wire: crafted(base.set("v", "-1")), err: protocol.ErrVersion, code: "unsupported_version"},
		{name: "v null", wire: crafted(base.set("v", "null")), err: protocol.ErrVersion, code: "unsupported_version"},
		{name: "v string", wire: crafted(base.set("v", `"1"`))},
		{name: "v float", wire: crafted(base.set("v", `1.0`))},

		// Space.
		{name: "space missing", wire: crafted(base.del("space"))},
		{name: "space empty", wire: crafted(base.set("space", `""`))},
		{name: "space null", wire: crafted(base.set("space", `null`))},
		{name: "space zero ID", wire: crafted(base.set("space", str(strings.Repeat("a", 52))))},
		{name: "space not an ID", wire: crafted(base.set("space", `"general"`))},
		{name: "space number", wire: crafted(base.set("space", `7`))},

		// Sender.
		{name: "from missing", wire: crafted(base.del("from")), err: protocol.ErrBadSender, code: "bad_sender"},
		{name: "from empty", wire: crafted(base.set("from", `""`)), err: protocol.ErrBadSender, code: "bad_sender"},
		{name: "from not a peer ID", wire: crafted(base.set("from", `"not-a-peer-id"`)), err: protocol.ErrBadSender, code: "bad_sender"},
		{name: "from secp256k1 peer", wire: crafted(base.set("from", str(peerOf(t, secp).String()))), err: protocol.ErrBadSender, code: "bad_sender"},
		{name: "from RSA peer", wire: crafted(base.set("from", str(peerOf(t, rsa).String()))), err: protocol.ErrBadSender, code: "bad_sender"},
		{name: "from number", wire: crafted(base.set("from", `1`))},

		// Creation time.
		{name: "created_at missing", wire: crafted(base.del("created_at"))},
		{name: "created_at 0", wire: crafted(base.set("created_at", "0"))},
		{name: "created_at negative", wire: crafted(base.set("created_at", "-1767225600000"))},
		{name: "created_at string", wire: crafted(base.set("created_at", `"1767225600000"`))},
		{name: "created_at float", wire: crafted(base.set("created_at", `1767225600000.5`))},

		// prev and refs.
		{name: "prev over lowered limit", wire: crafted(base.set("prev", ids(3))), lim: func(l *protocol.Limits) { l.MaxPrev = 2 }},
		{name: "prev over default limit", wire: crafted(base.set("prev", ids(65)))},
		{name: "prev zero ID", wire: crafted(base.set("prev", `["`+strings.Repeat("a", 52)+`"]`))},
		{name: "prev not an ID", wire: crafted(base.set("prev", `["x"]`))},
		{name: "prev not a list", wire: crafted(base.set("prev", ids(1)[1:len(ids(1))-1]))},
		{name: "refs.messages over limit", wire: crafted(base.set("refs", `{"messages":`+ids(3)+`}`)), lim: func(l *protocol.Limits) { l.MaxRefs = 2 }},
		{name: "refs.nodes over limit", wire: crafted(base.set("refs", `{"nodes":`+peers(3)+`}`)), lim: func(l *protocol.Limits) { l.MaxRefs = 2 }},
		{name: "refs.nodes over default limit", wire: crafted(base.set("refs", `{"nodes":`+peers(65)+`}`))},
		{name: "refs.messages bad ID", wire: crafted(base.set("refs", `{"messages":["x"]}`))},
		{name: "refs.nodes not a peer ID", wire: crafted(base.set("refs", `{"nodes":["bogus"]}`))},
		{name: "refs.nodes empty string", wire: crafted(base.set("refs", `{"nodes":[""]}`))},
		{name: "refs.nodes number", wire: crafted(base.set("refs", `{"nodes":[1]}`))},
		{name: "refs not an object", wire: crafted(base.set("refs", `[]`))},

		// type.
		{name: "type missing", wire: crafted(base.del("type"))},
		{name: "type empty", wire: crafted(base.set("type", `""`))},
		{name: "type over default limit", wire: crafted(base.set("type", str(strings.Repeat("t", 65))))},
		{name: "type over limit in bytes not runes", wire: crafted(base.set("type", str(strings.Repeat("€", 22))))},
		{name: "type over lowered limit", wire: crafted(base.set("type", `"text"`)), lim: func(l *protocol.Limits) { l.MaxType = 3 }},
		{name: "type number", wire: crafted(base.set("type", `1`))},

		// ttl.
		{name: "ttl negative", wire: crafted(base.set("ttl", "-1"))},
		{name: "ttl float", wire: crafted(base.set("ttl", "1.5"))},
		{name: "ttl string", wire: crafted(base.set("ttl", `"60"`))},

		// meta.
		{name: "meta over default limit", wire: crafted(base.set("meta", meta(65)))},
		{name: "meta over lowered limit", wire: crafted(base.set("meta", meta(2))), lim: func(l *protocol.Limits) { l.MaxMeta = 1 }},
		{name: "meta key too long", wire: crafted(base.set("meta", js(t, map[string]string{strings.Repeat("k", 1025): "v"})))},
		{name: "meta value too long", wire: crafted(base.set("meta", js(t, map[string]string{"k": strings.Repeat("v", 1025)})))},
		{name: "meta empty key", wire: crafted(base.set("meta", `{"":"v"}`))},
		{name: "meta value number", wire: crafted(base.set("meta", `{"k":1}`))},
		{name: "meta not an object", wire: crafted(base.set("meta", `["k","v"]`))},

		// content.
		{name: "content array", wire: crafted(base.set("content", `[{"text":"hello"}]`))},
		{name: "content string", wire: crafted(base.set("content", `"hello"`))},
		{name: "content null", wire: crafted(base.set("content", `null`))},
		{name: "content number", wire: crafted(base.set("content", `1`))},
		{name: "content true", wire: crafted(base.set("content", `true`))},
		{name: "content missing", wire: crafted(base.del("content"))},

		// Signature: the frame and shape are fine.
		{name: "signature byte flipped", wire: flip(good, len(good)-1), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "signature first byte flipped", wire: flip(good, len(good)-protocol.SignatureSize), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "signature all zero", wire: frame(goodBody, make([]byte, protocol.SignatureSize)), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "forged sender (signed by another key)", wire: withSig(goodBody, other, protocol.SigningDomain), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "signed without the domain", wire: withSig(goodBody, key, ""), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "signed under another domain", wire: withSig(goodBody, key, "weft/message/v2\x00"), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "content byte flipped", wire: flip(good, bytes.Index(good, []byte("hello"))+4), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},
		{name: "signature of another message", wire: frame(goodBody, lastSig(signRaw(t, key, base.set("type", `"other"`).body()))), err: protocol.ErrBadSignature, code: "bad_signature", verifyOnly: true},

		// Clock and TTL.
		{name: "created 10 min in the future", wire: good, now: created.Add(-10 * time.Minute), err: protocol.ErrClockSkew, code: "clock_skew", verifyOnly: true},
		{name: "created MaxSkew+1ms in the future", wire: good, now: created.Add(-5*time.Minute - time.Millisecond), err: protocol.ErrClockSkew, code: "clock_skew", verifyOnly: true},
		{name: "created 1s ahead, zero skew allowed", wire: good, now: created.Add(-time.Second), lim: func(l *protocol.Limits) { l.MaxSkew = 0 }, err: protocol.ErrClockSkew, code: "clock_skew", verifyOnly: true},
		{name: "ttl 1s, 2s later", wire: crafted(base.set("ttl", "1")), now: created.Add(2 * time.Second), err: protocol.ErrExpired, code: "expired", verifyOnly: true},
		{name: "ttl 1s, at expiry", wire: crafted(base.set("ttl", "1")), now: created.Add(time.Second), err: protocol.ErrExpired, code: "expired", verifyOnly: true},
		{name: "ttl 1h, a day later", wire: crafted(base.set("ttl", "3600")), now: created.Add(24 * time.Hour), err: protocol.ErrExpired, code: "expired", verifyOnly: true},
		{name: "created MaxAge+1ms ago", wire: good, now: created.Add(protocol.DefaultMaxAge + time.Millisecond), err: protocol.ErrExpired, code: "expired", verifyOnly: true},
		{name: "created 25 years ago", wire: good, now: created.AddDate(25, 0, 0), err: protocol.ErrExpired, code: "expired", verifyOnly: true},
		{name: "created 2h ago, max age 1h", wire: good, now: created.Add(2 * time.Hour), lim: func(l *protocol.Limits) { l.MaxAge = time.Hour }, err: protocol.ErrExpired, code: "expired", verifyOnly: true},
	}
	for _, tt := range tests {
		runValidationCase(t, tt)
	}
}

func lastSig(wire []byte) []byte { return wire[len(wire)-protocol.SignatureSize:] }

// caseClock returns a case's validation time (default: a second after
// created) and its limits (the defaults, adjusted by mutate).
func caseClock(now time.Time, mutate func(*protocol.Limits)) (time.Time, protocol.Limits) {
	if now.IsZero() {
		now = created.Add(time.Second)
	}
	lim := protocol.DefaultLimits()
	if mutate != nil {
		mutate(&lim)
	}
	return now, lim
}

func runValidationCase(t *testing.T, tt validationCase) {
	t.Helper()
	t.Run(tt.name, func(t *testing.T) {
		now, lim := caseClock(tt.now, tt.lim)
		if tt.err == nil {
			tt.err, tt.code = protocol.ErrMalformed, "malformed"
		}
		m, err := protocol.Validate(tt.wire, now, lim)
		wantErr(t, err, tt.err, tt.code)
		if m != nil {
			t.Errorf("Validate returned a message with its error")
		}
		d, err := protocol.Decode(tt.wire, lim)
		if tt.verifyOnly {
			if err != nil {
				t.Fatalf("Decode: %v (the case must fail in Verify only)", err)
			}
			wantErr(t, d.Verify(now, lim), tt.err, tt.code)
		} else {
			wantErr(t, err, tt.err, tt.code)
		}
	})
}

func TestValidateAccepts(t *testing.T) {
	key := testKey(t, 1)
	base := baseFields(t, key)
	goodBody := base.body()
	tests := []struct {
		name    string
		body    []byte
		now     time.Time
		lim     func(*protocol.Limits)
		content string
	}{
		{name: "minimal", body: goodBody},
		{name: "body at lowered MaxSize", body: goodBody, lim: func(l *protocol.Limits) { l.MaxSize = len(goodBody) }},
		{name: "unknown scalar field", body: base.set("x-future", `"ignored"`).body()},
		{name: "unknown fields before, inside and after", body: base.insertBefore("space", field{"zz", `{"nested":[1,{"a":null}]}`}).
			set("x", "true").add("after", `[]`).body()},
		{name: "unknown field in refs", body: base.set("refs", `{"future":1}`).body()},
		{name: "content first", body: append(fields{base[5]}, base[:5]...).body()},
		{name: "white space between tokens", body: []byte(strings.ReplaceAll(strings.ReplaceAll(string(goodBody), ":", " : "), ",", " ,\n\t")),
			content: `{"text" : "hello"}`},
		{name: "white space around the body", body: []byte(" \n" + string(goodBody) + "\r\n ")},
		{name: "explicit empty optional fields", body: base.set("prev", "null").set("refs", "{}").set("ttl", "0").set("meta", "{}").body()},
		{name: "empty lists", body: base.set("prev", "[]").set("refs", `{"messages":[],"nodes":[]}`).body()},
		{name: "type at limit", body: base.set("type", js(t, strings.Repeat("t", 64))).body()},
		{name: "meta at limits", body: base.set("meta", js(t, map[string]string{strings.Repeat("k", 1024): strings.Repeat("v", 1024), "e": ""})).body()},
		{name: "content with white space", body: base.set("content", " { \"text\" : \"hello\" } ").body(), content: `{ "text" : "hello" }`},
		{name: "content empty object", body: base.set("content", "{}").body(), content: "{}"},
		{name: "created MaxSkew in the future", body: goodBody, now: created.Add(-5 * time.Minute)},
		{name: "ttl 1s, 999ms later", body: base.set("ttl", "1").body(), now: created.Add(999 * time.Millisecond)},
		{name: "created MaxAge ago", body: goodBody, now: created.Add(protocol.DefaultMaxAge)},
		{name: "created long ago, no ttl, no max age", body: goodBody, now: created.AddDate(25, 0, 0), lim: func(l *protocol.Limits) { l.MaxAge = 0 }},
		{name: "created long ago, stored limits", body: goodBody, now: created.AddDate(25, 0, 0), lim: func(l *protocol.Limits) { *l = protocol.StoredLimits() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now, lim := caseClock(tt.now, tt.lim)
			wire := signRaw(t, key, tt.body)
			m, err := protocol.Validate(wire, now, lim)
			if err != nil {
				t.Fatalf("Validate(%s): %v", tt.body, err)
			}
			if !bytes.Equal(m.Body, tt.body) {
				t.Errorf("Body = %s, want the bytes as sent %s", m.Body, tt.body)
			}
			if m.ID != protocol.MessageID(tt.body) {
				t.Errorf("ID is not the hash of the bytes as sent")
			}
			if !bytes.Equal(m.Encode(), wire) {
				t.Errorf("Encode differs from the wire")
			}
			want := tt.content
			if want == "" {
				want = `{"text":"hello"}`
			}
			if string(m.Content) != want {
				t.Errorf("Content = %q, want %q", m.Content, want)
			}
			if m.V != 1 || m.Space != protocol.SpaceID("general") || m.Sender() != peerOf(t, key) || m.CreatedAt != created.UnixMilli() {
				t.Errorf("header %+v", m.Header)
			}
		})
	}
}

func TestCheckID(t *testing.T) {
	m := sign(t, testKey(t, 1), minimalDraft())
	if err := m.CheckID(m.ID); err != nil {
		t.Fatalf("CheckID(own ID) = %v", err)
	}
	for _, id := range []protocol.ID{{}, protocol.MessageID([]byte("other")), protocol.MessageID(append(bytes.Clone(m.Body), ' '))} {
		wantErr(t, m.CheckID(id), protocol.ErrIDMismatch, "id_mismatch")
	}
}

func TestVerifyBadMessage(t *testing.T) {
	lim := protocol.DefaultLimits()
	m := sign(t, testKey(t, 1), minimalDraft())
	for _, n := range []int{0, 63, 65} {
		short := *m
		short.Sig = make([]byte, n)
		copy(short.Sig, m.Sig)
		wantErr(t, short.Verify(created, lim), protocol.ErrBadSignature, "bad_signature")
	}
	// A Message not made by Sign, Decode or Validate has no sender.
	hand := &protocol.Message{Header: m.Header, Body: m.Body, Sig: m.Sig, ID: m.ID}
	wantErr(t, hand.Verify(created, lim), protocol.ErrBadSender, "bad_sender")
}

// TestDecodeSkipsVerify: Decode parses but does not check signature, clock
// or TTL; Validate does.
func TestDecodeSkipsVerify(t *testing.T) {
	key := testKey(t, 1)
	body := baseFields(t, key).set("ttl", "1").body()
	wire := frame(body, make([]byte, protocol.SignatureSize))
	m, err := protocol.Decode(wire, protocol.DefaultLimits())
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if m.Sender() != peerOf(t, key) || !bytes.Equal(m.Body, body) {
		t.Errorf("Decode = %+v", m)
	}
}

// TestFromCanonical: the body names its sender once, in the canonical text
// form. peer.Decode also accepts the CIDv1 form of the same ID, which would
// give one sender two spellings of "from" (and two authors to anything
// that indexes or filters by it).
func TestFromCanonical(t *testing.T) {
	key := testKey(t, 1)
	pid := peerOf(t, key)
	alt := peer.ToCid(pid).String()
	if back, err := peer.Decode(alt); err != nil || back != pid {
		t.Fatalf("peer.Decode(%s) = %s, %v", alt, back, err)
	}
	wire := signRaw(t, key, baseFields(t, key).set("from", js(t, alt)).body())
	runValidationCase(t, validationCase{name: "from in CID form", wire: wire, err: protocol.ErrBadSender, code: "bad_sender"})

	node := peerOf(t, testKey(t, 2))
	wire = signRaw(t, key, baseFields(t, key).set("refs", `{"nodes":[`+js(t, peer.ToCid(node).String())+`]}`).body())
	runValidationCase(t, validationCase{name: "refs.nodes in CID form", wire: wire})
}

// TestValidateRejectsAmbiguousBodies: encoding/json matches object keys to
// fields case-insensitively (with Unicode folding: "ſ" U+017F folds to "s")
// and lets the last of two equal keys win. A body that another parser reads
// differently must be refused, as doc.go promises for repeated keys: here
// Go sees one sender, space or content and a case-sensitive parser (every
// other language's default) sees another, under one ID and one signature.
func TestValidateRejectsAmbiguousBodies(t *testing.T) {
	key := testKey(t, 1)
	base := baseFields(t, key)
	crafted := func(fs fields) []byte { return signRaw(t, key, fs.body()) }
	n1, n2 := peerOf(t, testKey(t, 2)).String(), peerOf(t, testKey(t, 3)).String()
	tests := []validationCase{
		{name: "content and Content", wire: crafted(base.add("Content", `{"text":"evil"}`))},
		{name: "type and TYPE", wire: crafted(base.add("TYPE", `"evil"`))},
		{name: "space and ſpace (U+017F)", wire: crafted(base.add("ſpace", js(t, protocol.SpaceID("other"))))},
		{name: "Type instead of type", wire: crafted(base.del("type").set("Type", `"text"`))},
		{name: "repeated key in meta", wire: crafted(base.set("meta", `{"k":"a","k":"b"}`))},
		{name: "repeated key in refs", wire: crafted(base.set("refs", `{"nodes":["`+n1+`"],"nodes":["`+n2+`"]}`))},
		{name: "nodes and Nodes in refs", wire: crafted(base.set("refs", `{"nodes":["`+n1+`"],"Nodes":["`+n2+`"]}`))},
	}
	for _, tt := range tests {
		runValidationCase(t, tt)
	}
}

// TestParseObject: the strict object reader that message bodies go through
// and that other formats (protocol/iacp) reuse.
func TestParseObject(t *testing.T) {
	known := []string{"space", "type"}
	tests := []struct {
		name string
		in   string
		want map[string]string // raw members; nil for an error
		msg  string
	}{
		{"members", ` {"type":"text", "n":[1, 2], "o":{"a":null}} `, map[string]string{"type": `"text"`, "n": "[1, 2]", "o": `{"a":null}`}, ""},
		{"empty", `{}`, map[string]string{}, ""},
		{"unknown keys in any case", `{"Other":1,"other":2}`, map[string]string{"Other": "1", "other": "2"}, ""},
		{"repeated key", `{"a":1,"a":2}`, nil, `repeated key "a"`},
		{"folds to a known name", `{"Type":"text"}`, nil, `key "Type" is not "type"`},
		{"folds with U+017F", `{"ſpace":"x"}`, nil, `is not "space"`},
		{"data after", `{"a":1} {}`, nil, "data after the JSON object"},
		{"array", `[1]`, nil, "not a JSON object"},
		{"nothing", ``, nil, "not a JSON object"},
		{"truncated", `{"a":`, nil, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.ParseObject([]byte(tt.in), known)
			if tt.want == nil {
				if err == nil || !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("ParseObject(%s) = %v, %v; want an ErrMalformed saying %q", tt.in, got, err, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseObject(%s): %v", tt.in, err)
			}
			raw := make(map[string]string, len(got))
			for k, v := range got {
				raw[k] = string(v)
			}
			if !reflect.DeepEqual(raw, tt.want) {
				t.Errorf("ParseObject(%s) = %v, want %v", tt.in, raw, tt.want)
			}
		})
	}
}

// TestDecodeNonMinimalLength: the body length is a uvarint, and
// binary.Uvarint accepts over-long encodings (0x80 0x00 for 0). Accepting
// them gives one message many wire encodings, so Encode(Decode(w)) != w and
// anything keyed or deduplicated by wire bytes (or their hash) is fooled.
func TestDecodeNonMinimalLength(t *testing.T) {
	key := testKey(t, 1)
	body := baseFields(t, key).body()
	good := signRaw(t, key, body)
	sig := lastSig(good)
	n := uint64(len(body))
	// n as a uvarint padded with continuation bytes to 2, 3 and 10 bytes.
	for _, size := range []int{len(binaryUvarint(n)) + 1, len(binaryUvarint(n)) + 2, 10} {
		l := padUvarint(n, size)
		wire := append(append(append([]byte{0x01}, l...), body...), sig...)
		t.Run(strconv.Itoa(size)+" byte length", func(t *testing.T) {
			m, err := protocol.Decode(wire, protocol.DefaultLimits())
			if err == nil {
				t.Fatalf("Decode accepted a %d-byte length for %d (canonical %x); Encode(m) == wire: %v",
					size, n, binaryUvarint(n), bytes.Equal(m.Encode(), wire))
			}
			wantErr(t, err, protocol.ErrMalformed, "malformed")
		})
	}
}

func binaryUvarint(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// padUvarint encodes n as a uvarint of exactly size bytes (size ≤ 10).
func padUvarint(n uint64, size int) []byte {
	b := make([]byte, size)
	for i := range size {
		b[i] = byte(n&0x7f) | 0x80
		n >>= 7
	}
	b[size-1] &^= 0x80
	return b
}

// TestDecodeInvalidLimits: Decode trusts lim. With a negative MaxSize
// (which Limits.Validate refuses but nothing makes callers run) the length
// check is skipped and n+SignatureSize wraps, so a 12-byte frame panics with
// slice bounds out of range. Decode must return an error instead.
func TestDecodeInvalidLimits(t *testing.T) {
	wire := append([]byte{0x01}, binaryUvarint(1<<64-protocol.SignatureSize)...)
	for _, lim := range []protocol.Limits{{MaxSize: -1}, {}} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Decode(%x, %+v) panicked: %v", wire, lim, r)
				}
			}()
			if _, err := protocol.Decode(wire, lim); err == nil {
				t.Errorf("Decode(%x, %+v) = nil error", wire, lim)
			}
		}()
	}
}

// TestExpiryHugeTTL: ttl is int64 seconds and Expiry multiplies it by
// time.Second in a time.Duration, which overflows above 9223372036 s
// (~292 years): the expiry wraps to before the creation time and a message
// that should live (almost) for ever is refused as expired at once.
func TestExpiryHugeTTL(t *testing.T) {
	for _, ttl := range []int64{9223372036, 9223372037, 1 << 40, math.MaxInt64} {
		h := protocol.Header{CreatedAt: created.UnixMilli(), TTL: ttl}
		if exp, ok := h.Expiry(); ok && !exp.After(h.Created()) {
			t.Errorf("ttl %d: Expiry() = %v, before creation %v", ttl, exp, h.Created())
		}
		key := testKey(t, 1)
		wire := signRaw(t, key, baseFields(t, key).set("ttl", strconv.FormatInt(ttl, 10)).body())
		// Either refuse the ttl as malformed or accept the message; "expired"
		// a second after creation is wrong.
		if _, err := protocol.Validate(wire, created.Add(time.Second), protocol.DefaultLimits()); errors.Is(err, protocol.ErrExpired) {
			t.Errorf("ttl %d: Validate one second after creation: %v", ttl, err)
		}
	}
}

// TestWireKept: a message made by Sign or Decode keeps the bytes it was
// made from: Wire allocates nothing and returns those bytes, so a message
// is never encoded again on its way through a node; Encode's copy is the
// caller's own.
func TestWireKept(t *testing.T) {
	m := sign(t, testKey(t, 1), minimalDraft())
	wire := m.Wire()
	if allocs := testing.AllocsPerRun(100, func() { _ = m.Wire() }); allocs != 0 {
		t.Fatalf("Wire of a signed message allocates %v times", allocs)
	}
	mine := m.Encode()
	mine[len(mine)-1] ^= 1
	if bytes.Equal(m.Wire(), mine) {
		t.Fatal("changing Encode's result changed the message")
	}
	d, err := protocol.Decode(wire, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = d.Wire() }); allocs != 0 {
		t.Fatalf("Wire of a decoded message allocates %v times", allocs)
	}
	if !bytes.Equal(d.Wire(), wire) || &d.Wire()[0] == &wire[0] {
		t.Fatal("a decoded message's wire is not an equal copy of what it was decoded from")
	}
	// A message built by hand has no wire yet: Encode builds it.
	hand := &protocol.Message{Header: m.Header, Body: m.Body, Sig: m.Sig, ID: m.ID}
	if !bytes.Equal(hand.Wire(), wire) || !bytes.Equal(hand.Encode(), wire) {
		t.Fatal("the wire of a hand-built message differs")
	}
}

// TestSignatureChecked: only Sign and a passing Verify mark a message's
// signature as checked; a decoded one is not, nor one that fails Verify.
func TestSignatureChecked(t *testing.T) {
	m := sign(t, testKey(t, 1), fullDraft(t))
	if !m.SignatureChecked() {
		t.Fatal("a message made by Sign is not marked checked")
	}
	lim := protocol.DefaultLimits()
	d, err := protocol.Decode(m.Encode(), lim)
	if err != nil {
		t.Fatal(err)
	}
	if d.SignatureChecked() {
		t.Fatal("a decoded message is marked checked")
	}
	if err := d.Verify(d.Created(), lim); err != nil || d.SignatureChecked() {
		t.Fatalf("verified: %v; Verify marked a shared message checked: %v", err, d.SignatureChecked())
	}
	v, err := protocol.Validate(m.Encode(), m.Created(), lim)
	if err != nil || !v.SignatureChecked() {
		t.Fatalf("validated: %v, checked %v", err, v != nil && v.SignatureChecked())
	}
	wire := m.Encode()
	wire[len(wire)-1] ^= 1
	bad, err := protocol.Decode(wire, lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Verify(bad.Created(), lim); err == nil {
		t.Fatal("a tampered message verified")
	}
	if v, err := protocol.Validate(wire, m.Created(), lim); err == nil || v != nil {
		t.Fatalf("a tampered message validated: %v", err)
	}
}
