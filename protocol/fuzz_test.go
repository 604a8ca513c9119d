package protocol_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// FuzzDecode feeds arbitrary bytes to Decode and Validate. Neither may
// panic; every error must carry a code; whatever they accept must re-encode
// to exactly the input and be named by the hash of its body.
func FuzzDecode(f *testing.F) {
	for _, v := range readGolden(f).Vectors {
		f.Add(mustHex(f, v.Wire))
	}
	key := testKey(f, 1)
	good := signRaw(f, key, baseFields(f, key).set("ttl", "600").set("x", `{"y":[1,"\u00e9"]}`).body())
	for _, seed := range [][]byte{
		good,
		nil,
		{0x01},
		{0x01, 0x80},
		{0x01, 0x00},
		{0x02, 0x02, '{', '}'},
		append([]byte{0x01, 0x02, '{', '}'}, make([]byte, protocol.SignatureSize)...),
		append(bytes.Clone(good), 0x00),
		good[:len(good)-1],
		{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		f.Add(seed)
	}
	// Late enough that no seed is in the future, early enough that none has
	// expired.
	now := created.Add(200 * time.Second)
	lim := protocol.DefaultLimits()

	f.Fuzz(func(t *testing.T, wire []byte) {
		in := bytes.Clone(wire)
		d, derr := protocol.Decode(wire, lim)
		if !bytes.Equal(wire, in) {
			t.Fatalf("Decode modified its input")
		}
		if derr != nil {
			if d != nil {
				t.Fatalf("Decode returned a message and %v", derr)
			}
			if protocol.Code(derr) == "invalid" {
				t.Fatalf("Decode error %v wraps no sentinel", derr)
			}
		} else {
			checkAccepted(t, "Decode", d, wire)
		}

		v, verr := protocol.Validate(wire, now, lim)
		if verr != nil {
			if v != nil {
				t.Fatalf("Validate returned a message and %v", verr)
			}
			if protocol.Code(verr) == "invalid" {
				t.Fatalf("Validate error %v wraps no sentinel", verr)
			}
			return
		}
		checkAccepted(t, "Validate", v, wire)
		if derr != nil {
			t.Fatalf("Validate accepted what Decode refused: %v", derr)
		}
		if !sameMessage(v, d) {
			t.Fatalf("Validate and Decode disagree:\n%+v\n%+v", v, d)
		}
	})
}

func checkAccepted(t *testing.T, op string, m *protocol.Message, wire []byte) {
	t.Helper()
	if got := m.Encode(); !bytes.Equal(got, wire) {
		t.Fatalf("%s accepted %x but Encode gives %x", op, wire, got)
	}
	if m.ID != protocol.ID(sha256.Sum256(m.Body)) {
		t.Fatalf("%s: ID %s is not SHA-256 of the body", op, m.ID)
	}
	if len(m.Body) > protocol.MaxMessageSize || len(m.Sig) != protocol.SignatureSize {
		t.Fatalf("%s: body %d bytes, sig %d bytes", op, len(m.Body), len(m.Sig))
	}
	if m.Sender() == "" || m.V != protocol.Version || m.Space.IsZero() || m.Type == "" || len(m.Content) == 0 {
		t.Fatalf("%s accepted an incomplete header %+v", op, m.Header)
	}
	checkStrictReading(t, op, m)
}

// checkStrictReading reads the body as another implementation would, with
// case-sensitive keys, and requires it to see the same header and content.
func checkStrictReading(t *testing.T, op string, m *protocol.Message) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(m.Body, &top); err != nil {
		t.Fatalf("%s: body is not an object: %v", op, err)
	}
	str := func(k string) string {
		var s string
		if err := json.Unmarshal(top[k], &s); err != nil {
			t.Fatalf("%s: strict reading of %q (%s): %v", op, k, top[k], err)
		}
		return s
	}
	num := func(k string) int64 {
		if top[k] == nil {
			return 0
		}
		n, err := strconv.ParseInt(string(top[k]), 10, 64)
		if err != nil {
			t.Fatalf("%s: strict reading of %q (%s): %v", op, k, top[k], err)
		}
		return n
	}
	if str("from") != m.From || str("space") != m.Space.String() || str("type") != m.Type ||
		num("v") != int64(m.V) || num("created_at") != m.CreatedAt || num("ttl") != m.TTL ||
		!bytes.Equal(top["content"], m.Content) {
		t.Fatalf("%s: a case-sensitive parser reads %s differently from %+v / %s", op, m.Body, m.Header, m.Content)
	}
}
