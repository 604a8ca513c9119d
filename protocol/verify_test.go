package protocol_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// FuzzVerifier feeds the same bytes to Validate and to a Verifier's
// Validate, enough times for the sender's key to get its table: both must
// accept the same messages, alike, and refuse the rest with the same code.
func FuzzVerifier(f *testing.F) {
	for _, v := range readGolden(f).Vectors {
		f.Add(mustHex(f, v.Wire))
	}
	key, other := testKey(f, 1), testKey(f, 2)
	good := signRaw(f, key, baseFields(f, key).set("ttl", "600").body())
	forged := bytes.Clone(good)
	forged[len(forged)-3] ^= 0x10
	// other's signature on a body that names key as its sender.
	wrongKey := signRaw(f, other, baseFields(f, key).body())
	for _, seed := range [][]byte{good, forged, wrongKey, good[:len(good)-1], nil} {
		f.Add(seed)
	}
	now := created.Add(200 * time.Second)
	lim := protocol.DefaultLimits()
	ver := protocol.NewVerifier()

	f.Fuzz(func(t *testing.T, wire []byte) {
		want, werr := protocol.Validate(wire, now, lim)
		// In a batch, between messages whose signatures are checked
		// with it (the key's table is built by the 8th).
		batch := [][]byte{good, good, good, good, good, good, good, good, wire, good, wire}
		msgs, errs := ver.ValidateAll(batch, now, lim)
		for _, i := range []int{8, 10} {
			switch err := errs[i]; {
			case (err == nil) != (werr == nil) || protocol.Code(err) != protocol.Code(werr):
				t.Fatalf("in a batch: ValidateAll %v, Validate %v", err, werr)
			case err == nil && !sameMessage(msgs[i], want):
				t.Fatalf("in a batch: ValidateAll and Validate disagree:\n%+v\n%+v", msgs[i], want)
			}
		}
		for i := range 10 {
			got, err := ver.Validate(wire, now, lim)
			switch {
			case (err == nil) != (werr == nil) || protocol.Code(err) != protocol.Code(werr):
				t.Fatalf("check %d: Verifier %v, Validate %v", i, err, werr)
			case err == nil && !sameMessage(got, want):
				t.Fatalf("check %d: Verifier and Validate disagree:\n%+v\n%+v", i, got, want)
			case err == nil && !got.SignatureChecked():
				t.Fatalf("check %d: accepted, signature not marked checked", i)
			}
		}
	})
}

// TestVerifierSenders: a good signature by a sender the Verifier knows
// is accepted and a forged one refused, whether or not the sender's key
// has its table yet, and a message naming a known sender but signed by
// another key is refused.
func TestVerifierSenders(t *testing.T) {
	key, other := testKey(t, 1), testKey(t, 2)
	now := created.Add(200 * time.Second)
	lim := protocol.DefaultLimits()
	v := protocol.NewVerifier()
	for i := range 40 {
		body := baseFields(t, key).set("x", `"`+string(rune('a'+i%26))+`"`).body()
		if _, err := v.Validate(signRaw(t, key, body), now, lim); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		forged := signRaw(t, key, body)
		forged[len(forged)-1] ^= 1
		if _, err := v.Validate(forged, now, lim); protocol.Code(err) != protocol.Code(protocol.ErrBadSignature) {
			t.Fatalf("forged message %d: %v", i, err)
		}
		if _, err := v.Validate(signRaw(t, other, body), now, lim); protocol.Code(err) != protocol.Code(protocol.ErrBadSignature) {
			t.Fatalf("message %d signed by another key: %v", i, err)
		}
	}
}
