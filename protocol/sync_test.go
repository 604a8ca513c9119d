package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestSumMatchesBigInt: Sum is the sum of IDs as little-endian 256-bit
// integers modulo 2^256, checked against math/big over random add/remove
// sequences (carries and borrows across every limb).
func TestSumMatchesBigInt(t *testing.T) {
	mod := new(big.Int).Lsh(big.NewInt(1), 256)
	asBig := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var s Sum
	want := new(big.Int)
	var added []ID
	for i := range 2000 {
		var id ID
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
		if i%7 == 0 { // all-ones limbs force carries
			for j := range id {
				id[j] = 0xff
			}
		}
		if len(added) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(added))
			id = added[k]
			added = append(added[:k], added[k+1:]...)
			s.Sub(id)
			want.Sub(want, asBig(id[:]))
		} else {
			added = append(added, id)
			s.Add(id)
			want.Add(want, asBig(id[:]))
		}
		want.Mod(want, mod)
		var got [32]byte
		for l := range s {
			for b := range 8 {
				got[l*8+b] = byte(s[l] >> (8 * b))
			}
		}
		if asBig(got[:]).Cmp(want) != 0 {
			t.Fatalf("step %d: sum %x, want %x", i, got, want)
		}
	}
	// Removing everything left gives the empty sum.
	for _, id := range added {
		s.Sub(id)
	}
	if s != (Sum{}) {
		t.Fatalf("sum of the empty set is %v", s)
	}
}

// TestFingerprintVector pins the fingerprint definition: other
// implementations must produce these bytes.
func TestFingerprintVector(t *testing.T) {
	var s Sum
	if got, want := fpHex(s.Fingerprint(0)), fingerprintHex(t, Sum{}, 0); got != want {
		t.Fatalf("empty: %s, want %s", got, want)
	}
	s.Add(MessageID([]byte("a")))
	s.Add(MessageID([]byte("b")))
	const golden = "f54d5e5e1e4367a15ee45be1f68cf9f2"
	if got := fpHex(s.Fingerprint(2)); got != golden || got != fingerprintHex(t, s, 2) {
		t.Fatalf("fingerprint %s, want %s", got, golden)
	}
	if s.Fingerprint(2) == s.Fingerprint(3) {
		t.Fatal("count does not change the fingerprint")
	}
}

func TestSyncKeyOrder(t *testing.T) {
	a := SyncKey{Time: 5, ID: ID{1}}
	b := SyncKey{Time: 5, ID: ID{2}}
	c := SyncKey{Time: 6}
	if !a.Less(b) || !b.Less(c) || !MinSyncKey.Less(a) || !c.Less(MaxSyncKey) || a.Compare(a) != 0 {
		t.Fatal("sync keys out of order")
	}
}

// fingerprintHex recomputes a fingerprint from the definition in the
// package doc with the standard library only.
func fingerprintHex(t *testing.T, s Sum, count int) string {
	t.Helper()
	b := []byte("weft/sync/fp/v1\x00")
	for _, l := range s {
		for i := range 8 {
			b = append(b, byte(l>>(8*i)))
		}
	}
	for c := uint64(count); ; c >>= 7 {
		if c < 0x80 {
			b = append(b, byte(c))
			break
		}
		b = append(b, byte(c)|0x80)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:FingerprintSize])
}

func fpHex(f Fingerprint) string { return hex.EncodeToString(f[:]) }
