package protocol_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestValidateAllMatchesValidate: ValidateAll accepts and refuses what
// Validate does, message by message, in one batch mixing good messages
// (from a sender whose key gets its table partway through, and from one
// whose key has none), forged signatures (in R and in S), another key's
// signature, expired and future-dated messages, and bytes that do not
// decode; and again once the tables are built.
func TestValidateAllMatchesValidate(t *testing.T) {
	key, other := testKey(t, 1), testKey(t, 2)
	now := created.Add(200 * time.Second)
	lim := protocol.DefaultLimits()
	var wires [][]byte
	for i := range 40 {
		body := baseFields(t, key).set("ttl", "600").set("x", strconv.Itoa(i)).body()
		good := signRaw(t, key, body)
		wires = append(wires, good)
		switch i % 8 {
		case 1: // R forged
			w := bytes.Clone(good)
			w[len(w)-64+i%32] ^= 1 << (i % 8)
			wires = append(wires, w)
		case 2: // S forged
			w := bytes.Clone(good)
			w[len(w)-20] ^= 4
			wires = append(wires, w)
		case 3: // another key's signature of a body naming key
			wires = append(wires, signRaw(t, other, body))
		case 4: // expired: created long before now, ttl 60 s
			wires = append(wires, signRaw(t, key, baseFields(t, key).set("ttl", "60").set("x", strconv.Itoa(i)).body()))
		case 5: // from the future
			future := strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)
			wires = append(wires, signRaw(t, key, baseFields(t, key).set("created_at", future).set("x", strconv.Itoa(i)).body()))
		case 6: // truncated, and a good message by a key seen once
			wires = append(wires, good[:len(good)-1])
			wires = append(wires, signRaw(t, other, baseFields(t, other).set("x", strconv.Itoa(i)).body()))
		case 7: // forged, expired: the signature is what is refused
			w := signRaw(t, key, baseFields(t, key).set("ttl", "60").set("x", strconv.Itoa(100+i)).body())
			w[len(w)-40] ^= 0x80
			wires = append(wires, w)
		}
	}
	ver := protocol.NewVerifier()
	accepted, refused := 0, 0
	for round := range 2 {
		msgs, errs := ver.ValidateAll(wires, now, lim)
		if len(msgs) != len(wires) || len(errs) != len(wires) {
			t.Fatalf("round %d: %d messages and %d errors for %d wires", round, len(msgs), len(errs), len(wires))
		}
		for i, w := range wires {
			want, werr := protocol.Validate(w, now, lim)
			got, err := msgs[i], errs[i]
			switch {
			case (err == nil) != (werr == nil) || protocol.Code(err) != protocol.Code(werr):
				t.Fatalf("round %d wire %d: ValidateAll %v, Validate %v", round, i, err, werr)
			case (got == nil) != (err != nil):
				t.Fatalf("round %d wire %d: message %v with error %v", round, i, got, err)
			case err == nil && !sameMessage(got, want):
				t.Fatalf("round %d wire %d: ValidateAll and Validate disagree:\n%+v\n%+v", round, i, got, want)
			case err == nil && !got.SignatureChecked():
				t.Fatalf("round %d wire %d: accepted, signature not marked checked", round, i)
			case err == nil:
				accepted++
			default:
				refused++
			}
		}
	}
	if accepted < 80 || refused < 60 {
		t.Fatalf("accepted %d, refused %d: the batch does not mix enough", accepted, refused)
	}
}

// BenchmarkValidateAll checks a session's exchange of 64 messages by one
// sender, against Verifier.Validate of each (see BenchmarkVerifierValidate).
func BenchmarkValidateAll(b *testing.B) {
	key := testKey(b, 1)
	now := created.Add(200 * time.Second)
	lim := protocol.DefaultLimits()
	wires := make([][]byte, 64)
	for i := range wires {
		wires[i] = signRaw(b, key, baseFields(b, key).set("ttl", "600").set("x", strconv.Itoa(i)).body())
	}
	ver := protocol.NewVerifier()
	ver.ValidateAll(wires, now, lim) // the key's table
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			if _, errs := ver.ValidateAll(wires, now, lim); errs[len(errs)-1] != nil {
				b.Fatal(errs[len(errs)-1])
			}
		}
	})
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			for _, w := range wires {
				if _, err := ver.Validate(w, now, lim); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
