package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// order8 is a point of order 8 (a torsion point of the curve).
var order8 = mustPoint("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")

func mustPoint(s string) *edwards25519.Point {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		panic(err)
	}
	return p
}

// testSigner signs with a secret scalar a, for the public point pub, which
// may differ from [a]B by a torsion point: a key ed25519 decodes and a
// normal signer cannot make, whose signatures are valid or not depending
// on the hash.
type testSigner struct {
	a   *edwards25519.Scalar
	pub []byte
}

func newTestSigner(rnd *rand.Rand, torsion *edwards25519.Point) testSigner {
	var seed [64]byte
	for i := range seed {
		seed[i] = byte(rnd.Uint32())
	}
	a, err := edwards25519.NewScalar().SetUniformBytes(seed[:])
	if err != nil {
		panic(err)
	}
	p := new(edwards25519.Point).ScalarBaseMult(a)
	if torsion != nil {
		p.Add(p, torsion)
	}
	return testSigner{a: a, pub: p.Bytes()}
}

// sign returns S = r + k·a with R = [r]B (plus rTorsion when not nil).
func (s testSigner) sign(rnd *rand.Rand, msg []byte, rTorsion *edwards25519.Point) []byte {
	var seed [64]byte
	for i := range seed {
		seed[i] = byte(rnd.Uint32())
	}
	r, _ := edwards25519.NewScalar().SetUniformBytes(seed[:])
	R := new(edwards25519.Point).ScalarBaseMult(r)
	if rTorsion != nil {
		R.Add(R, rTorsion)
	}
	h := sha512.New()
	h.Write(R.Bytes())
	h.Write(s.pub)
	h.Write(msg)
	k, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	S := edwards25519.NewScalar().MultiplyAdd(k, s.a, r)
	return append(R.Bytes(), S.Bytes()...)
}

// TestKeyTableMatchesEd25519 checks that the table's check accepts exactly
// what ed25519.Verify accepts: valid signatures, signatures changed in any
// way, non-canonical S, R or public keys with a torsion component (valid
// for some hashes only), and the high bits of S.
func TestKeyTableMatchesEd25519(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	base := newBaseTable()
	t2 := new(edwards25519.Point).Add(order8, order8)
	t4 := new(edwards25519.Point).Add(t2, t2) // order 2
	keys := []testSigner{newTestSigner(rnd, nil), newTestSigner(rnd, order8), newTestSigner(rnd, t2), newTestSigner(rnd, t4)}
	accepted, refused := 0, 0
	for ki, key := range keys {
		tab, err := newKeyTable([32]byte(key.pub), base)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			msg := fmt.Appendf(nil, "message %d of key %d", i, ki)
			var rt *edwards25519.Point
			switch i % 5 {
			case 1:
				rt = order8
			case 2:
				rt = t4
			}
			sig := key.sign(rnd, msg, rt)
			cases := [][]byte{sig}
			bad := append([]byte(nil), sig...)
			bad[rnd.IntN(64)] ^= 1 << rnd.IntN(8)
			cases = append(cases, bad)
			high := append([]byte(nil), sig...)
			high[63] |= 0x20
			cases = append(cases, high)
			if i%10 == 0 { // S + L: the same S, not canonical
				s, _ := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
				var sl [32]byte
				carry := 0
				lBytes := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 31: 0x10}
				sb := s.Bytes()
				for j := range 32 {
					v := int(sb[j]) + int(lBytes[j]) + carry
					sl[j], carry = byte(v), v>>8
				}
				if carry == 0 {
					cases = append(cases, append(append([]byte(nil), sig[:32]...), sl[:]...))
				}
			}
			var pts []extPoint
			var wants []bool
			for ci, c := range cases {
				want := ed25519.Verify(key.pub, msg, c)
				if got := tab.verify(c, msg[:3], msg[3:]); got != want {
					t.Fatalf("key %d message %d case %d: table %v, ed25519 %v", ki, i, ci, got, want)
				}
				var p extPoint
				if tab.point(&p, c, msg) {
					pts, wants = append(pts, p), append(wants, want)
					cases[len(pts)-1] = c
				} else if want {
					t.Fatalf("key %d message %d case %d: no point, ed25519 accepts", ki, i, ci)
				}
				if want {
					accepted++
				} else {
					refused++
				}
			}
			// The same cases' points encoded at once (ValidateAll).
			enc := make([][32]byte, len(pts))
			if !encodeAll(pts, enc) {
				t.Fatalf("key %d message %d: encodeAll failed", ki, i)
			}
			for k := range pts {
				if got := bytes.Equal(cases[k][:32], enc[k][:]); got != wants[k] {
					t.Fatalf("key %d message %d case %d: encoded at once %v, ed25519 %v", ki, i, k, got, wants[k])
				}
			}
		}
	}
	// Both outcomes seen, including signatures by keys with torsion.
	if accepted < 300 || refused < 900 {
		t.Fatalf("accepted %d, refused %d", accepted, refused)
	}
}

// TestInvertAll: each element is replaced by its inverse, as Invert gives
// it; with a zero among them, invertAll refuses and changes nothing.
func TestInvertAll(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	zs := make([]field.Element, 9)
	for i := range zs {
		var b [32]byte
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		b[31] &= 0x7f
		if _, err := zs[i].SetBytes(b[:]); err != nil {
			t.Fatal(err)
		}
	}
	orig := slices.Clone(zs)
	if !invertAll(zs) {
		t.Fatal("refused elements none of which is zero")
	}
	for i := range zs {
		var want field.Element
		if want.Invert(&orig[i]).Equal(&zs[i]) != 1 {
			t.Fatalf("element %d: not its inverse", i)
		}
	}
	withZero := slices.Clone(orig)
	withZero[4].Zero()
	before := slices.Clone(withZero)
	if invertAll(withZero) {
		t.Fatal("inverted a zero")
	}
	for i := range withZero {
		if withZero[i].Equal(&before[i]) != 1 {
			t.Fatalf("element %d changed", i)
		}
	}
	if !invertAll(nil) {
		t.Fatal("refused no elements")
	}
}

// TestVerifierKeys: keys that do not decode are refused (no table); a
// key gets its table at its tableAfter-th check, while there is room; once
// maxTables are taken, a new key gets one only in place of a table little
// used lately, so that many senders in turn do not rebuild tables.
func TestVerifierKeys(t *testing.T) {
	v := NewVerifier()
	bad := make([]byte, 32)
	bad[0] = 2 // y = 2 is not on the curve
	if _, err := new(edwards25519.Point).SetBytes(bad); err == nil {
		t.Fatal("y = 2 decodes")
	}
	for range 2 * tableAfter {
		if v.check(bad, []byte("x"), make([]byte, 64)) {
			t.Fatal("an invalid key accepted")
		}
	}
	if len(v.tables) != 0 {
		t.Fatalf("%d tables for an invalid key", len(v.tables))
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	keys := make([]testSigner, maxTables+1)
	for i := range keys {
		keys[i] = newTestSigner(rnd, nil)
	}
	// check checks a good and a changed signature of key i.
	check := func(i, j int) {
		t.Helper()
		body := fmt.Appendf(nil, "%d %d", i, j)
		sig := keys[i].sign(rnd, signingBytes(body), nil)
		if !v.check(keys[i].pub, body, sig) {
			t.Fatalf("key %d check %d refused", i, j)
		}
		sig[5] ^= 1
		if v.check(keys[i].pub, body, sig) {
			t.Fatalf("key %d check %d: a changed signature accepted", i, j)
		}
	}
	has := func(i int) bool { _, ok := v.tables[[32]byte(keys[i].pub)]; return ok }
	for i := range maxTables {
		for j := range tableAfter {
			check(i, j)
		}
		if !has(i) {
			t.Fatalf("key %d has no table after %d checks", i, 2*tableAfter)
		}
	}
	// All in turn: the last key finds no room, the others keep theirs.
	for j := range 3 * tableAfter {
		for i := range keys {
			check(i, j)
		}
	}
	if has(maxTables) || len(v.tables) != maxTables || v.built != maxTables {
		t.Fatalf("senders in turn: last key's table %v, %d tables, %d built", has(maxTables), len(v.tables), v.built)
	}
	// Only the last one sends now: one of the others' tables, unused
	// lately, makes room for it.
	for j := 0; !has(maxTables); j++ {
		if j > 2*decay {
			t.Fatal("the key sending alone got no table")
		}
		check(maxTables, j)
	}
	if len(v.tables) != maxTables || v.built != maxTables+1 {
		t.Fatalf("%d tables, %d built", len(v.tables), v.built)
	}
}

func BenchmarkKeyTable(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	key := newTestSigner(rnd, nil)
	msg := make([]byte, 400)
	sig := key.sign(rnd, msg, nil)
	base := newBaseTable()
	tab, err := newKeyTable([32]byte(key.pub), base)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			if !tab.verify(sig, msg) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("ed25519", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(key.pub, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("base", func(b *testing.B) {
		for b.Loop() {
			newBaseTable()
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if _, err := newKeyTable([32]byte(key.pub), base); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestIDStringLen(t *testing.T) {
	if IDStringLen != idTextLen {
		t.Fatalf("IDStringLen %d, idTextLen %d", IDStringLen, idTextLen)
	}
}

// TestAddAffineMatchesPointAdd: the additions keyTable.verify makes in
// its own representation give what edwards25519's Point.Add gives, for
// ordinary points, points of small order, the neutral point and a point
// added to itself, whatever the Z of the points converted (toAffine).
func TestAddAffineMatchesPointAdd(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	d2 := curveD2()
	t2 := new(edwards25519.Point).Add(order8, order8)
	pts := []edwards25519.Point{*edwards25519.NewIdentityPoint(), *order8, *t2, *edwards25519.NewGeneratorPoint()}
	for range 20 {
		pts = append(pts, *new(edwards25519.Point).ScalarBaseMult(randScalar(rnd)))
		last := &pts[len(pts)-1]
		pts = append(pts, *new(edwards25519.Point).Add(last, order8)) // with a torsion part
	}
	aff := make([]affinePoint, len(pts))
	toAffine(aff, pts, d2)
	for i := range pts {
		for j := range pts {
			want := new(edwards25519.Point).Add(&pts[i], &pts[j])
			x, y, z, tt := pts[i].ExtendedCoordinates()
			var p extPoint
			p.X, p.Y, p.Z, p.T = *x, *y, *z, *tt
			p.addAffine(&aff[j])
			got, ok := p.encode()
			if !ok || !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("point %d + point %d: %x, want %x", i, j, got, want.Bytes())
			}
		}
	}
	var id extPoint
	id.setIdentity()
	if got, _ := id.encode(); !bytes.Equal(got, edwards25519.NewIdentityPoint().Bytes()) {
		t.Fatalf("identity encodes as %x", got)
	}
}

func randScalar(rnd *rand.Rand) *edwards25519.Scalar {
	var seed [64]byte
	for i := range seed {
		seed[i] = byte(rnd.Uint32())
	}
	s, err := edwards25519.NewScalar().SetUniformBytes(seed[:])
	if err != nil {
		panic(err)
	}
	return s
}

// TestSignedDigits: k = Σ e[j]·64^j with every digit in −32…31, for
// random scalars and the edges (0, 1, 31, 32, 63, 64, L−1).
func TestSignedDigits(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	ks := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(31), big.NewInt(32), big.NewInt(63), big.NewInt(64), new(big.Int).Sub(l, big.NewInt(1))}
	for range 1000 {
		ks = append(ks, new(big.Int).SetBytes(reverse(randScalar(rnd).Bytes())))
	}
	for _, k := range ks {
		var le [32]byte
		k.FillBytes(le[:])
		slices.Reverse(le[:])
		sum := new(big.Int)
		for j, d := range signedDigits(le[:]) {
			if d < -32 || d > 31 {
				t.Fatalf("k %v: digit %d is %d", k, j, d)
			}
			sum.Add(sum, new(big.Int).Lsh(big.NewInt(int64(d)), uint(6*j)))
		}
		if sum.Cmp(k) != 0 {
			t.Fatalf("k %v: digits sum to %v", k, sum)
		}
	}
}

func reverse(b []byte) []byte {
	b = slices.Clone(b)
	slices.Reverse(b)
	return b
}

// TestSignedBytes: s = Σ e[j]·256^j with every digit in −128…127, for
// random scalars and the edges (0, 127, 128, 255, 256, L−1).
func TestSignedBytes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	ss := []*big.Int{big.NewInt(0), big.NewInt(127), big.NewInt(128), big.NewInt(255), big.NewInt(256), new(big.Int).Sub(l, big.NewInt(1))}
	for range 1000 {
		ss = append(ss, new(big.Int).SetBytes(reverse(randScalar(rnd).Bytes())))
	}
	for _, s := range ss {
		var le [32]byte
		s.FillBytes(le[:])
		slices.Reverse(le[:])
		sum := new(big.Int)
		for j, d := range signedBytes(le[:]) {
			sum.Add(sum, new(big.Int).Lsh(big.NewInt(int64(d)), uint(8*j)))
		}
		if sum.Cmp(s) != 0 {
			t.Fatalf("s %v: digits sum to %v", s, sum)
		}
	}
}

// parseIDBase32 is ParseID as encoding/base32 reads an ID: what ParseID's
// table must accept and refuse, with the same error.
func parseIDBase32(s string) (ID, error) {
	var id ID
	if len(s) != IDStringLen {
		return id, fmt.Errorf("%w: %q has length %d, want %d", ErrBadID, truncate(s, 80), len(s), IDStringLen)
	}
	n, err := idEncoding.Decode(id[:], []byte(s))
	if err != nil || n != IDSize {
		return ID{}, fmt.Errorf("%w: %q is not base32", ErrBadID, truncate(s, 80))
	}
	if idEncoding.EncodeToString(id[:]) != s {
		return ID{}, fmt.Errorf("%w: %q is not in canonical form", ErrBadID, truncate(s, 80))
	}
	if id.IsZero() {
		return ID{}, fmt.Errorf("%w: zero id", ErrBadID)
	}
	return id, nil
}

// TestParseIDMatchesBase32 compares ParseID with encoding/base32 on IDs,
// IDs with one character changed (to every byte value, at every place),
// and random strings of an ID's length.
func TestParseIDMatchesBase32(t *testing.T) {
	check := func(s string) {
		t.Helper()
		got, gerr := ParseID(s)
		want, werr := parseIDBase32(s)
		if got != want || (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("ParseID(%q) = %v, %v; encoding/base32: %v, %v", s, got, gerr, want, werr)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 16 {
		var id ID
		for i := range id {
			id[i] = byte(r.IntN(256))
		}
		s := id.String()
		check(s)
		for at := range len(s) {
			for c := range 256 {
				b := []byte(s)
				b[at] = byte(c)
				check(string(b))
			}
		}
	}
	for range 20000 {
		b := make([]byte, IDStringLen)
		for i := range b {
			b[i] = idAlphabet[r.IntN(len(idAlphabet))]
			if r.IntN(40) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		check(string(b))
	}
	check(ID{}.String())
	check(strings.Repeat("a", IDStringLen-1) + "q") // trailing bits set
	check("")
}
