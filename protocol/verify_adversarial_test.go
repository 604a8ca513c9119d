package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"filippo.io/edwards25519"
)

// Adversarial tests of the Verifier: differential checks of keyTable.verify
// against crypto/ed25519.Verify on crafted keys, points, encodings and
// scalars, and what fresh keys (free to an attacker) can make it cost.

var bigL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
var bigP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// torsion returns the 8 points of the torsion subgroup, [i]T8.
func torsion() []*edwards25519.Point {
	ts := []*edwards25519.Point{edwards25519.NewIdentityPoint()}
	for i := 1; i < 8; i++ {
		ts = append(ts, new(edwards25519.Point).Add(ts[i-1], order8))
	}
	return ts
}

// encodings returns every 32-byte string that decodes to the same point
// as enc (canonical one first): sign bit flipped when x = 0, y + p when
// y + p < 2^255.
func encodings(enc []byte) [][]byte {
	out := [][]byte{slices.Clone(enc)}
	y := new(big.Int).SetBytes(reverse(append(slices.Clone(enc[:31]), enc[31]&0x7f)))
	sign := enc[31] & 0x80
	ys := []*big.Int{y}
	if yp := new(big.Int).Add(y, bigP); yp.BitLen() <= 255 {
		ys = append(ys, yp)
	}
	for _, yy := range ys {
		for _, s := range []byte{sign, sign ^ 0x80} {
			var b [32]byte
			yy.FillBytes(b[:])
			slices.Reverse(b[:])
			b[31] |= s
			p, err := new(edwards25519.Point).SetBytes(b[:])
			if err != nil {
				continue
			}
			q, _ := new(edwards25519.Point).SetBytes(enc)
			if p.Equal(q) != 1 || bytes.Equal(b[:], enc) {
				continue
			}
			out = append(out, b[:])
		}
	}
	return out
}

// scalarLE returns x mod 2^256 as 32 bytes little-endian.
func scalarLE(x *big.Int) []byte {
	var b [32]byte
	x.FillBytes(b[:])
	slices.Reverse(b[:])
	return b[:]
}

// sigFor returns R || S with R = [r]B + rt and S = r + k·a (a may be
// nil: S = r), k hashed over R, pubEnc and msg as ed25519 does.
func sigFor(r, a *edwards25519.Scalar, rt *edwards25519.Point, pubEnc, msg []byte) []byte {
	R := new(edwards25519.Point).ScalarBaseMult(r)
	if rt != nil {
		R.Add(R, rt)
	}
	h := sha512.New()
	h.Write(R.Bytes())
	h.Write(pubEnc)
	h.Write(msg)
	k, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	S := edwards25519.NewScalar().Set(r)
	if a != nil {
		S.MultiplyAdd(k, a, r)
	}
	return append(R.Bytes(), S.Bytes()...)
}

// variants returns sig and what an attacker derives from it: S + L, S
// with the top bits, R's other encodings, S = 0, S = L − 1.
func variants(sig []byte) [][]byte {
	out := [][]byte{sig}
	sInt := new(big.Int).SetBytes(reverse(sig[32:]))
	for _, s := range []*big.Int{new(big.Int).Add(sInt, bigL), new(big.Int).Add(sInt, new(big.Int).Lsh(bigL, 1)), big.NewInt(0), new(big.Int).Sub(bigL, big.NewInt(1)), bigL} {
		if s.BitLen() <= 256 {
			out = append(out, append(slices.Clone(sig[:32]), scalarLE(s)...))
		}
	}
	neg := slices.Clone(sig) // R negated: x's sign flipped
	neg[31] ^= 0x80
	out = append(out, neg)
	for _, bit := range []byte{0x20, 0x40, 0x80} {
		c := slices.Clone(sig)
		c[63] |= bit
		out = append(out, c)
	}
	for _, renc := range encodings(sig[:32])[1:] {
		out = append(out, append(slices.Clone(renc), sig[32:]...))
	}
	return out
}

// TestVerifierSmallOrderAndEncodings: public keys that are each of the 8
// torsion points, and [a]B plus each of them, in every encoding ed25519
// decodes (non-canonical y, x = 0 with the sign bit); R with every torsion
// component; S canonical, + L, 0, L − 1, with top bits.
func TestVerifierSmallOrderAndEncodings(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	base := newBaseTable()
	ts := torsion()
	type key struct {
		a   *edwards25519.Scalar // nil: A is a torsion point
		enc []byte
	}
	var keys []key
	for _, tp := range ts {
		for _, e := range encodings(tp.Bytes()) {
			keys = append(keys, key{nil, e})
		}
		a := randScalar(rnd)
		A := new(edwards25519.Point).ScalarBaseMult(a)
		A.Add(A, tp)
		for _, e := range encodings(A.Bytes()) {
			keys = append(keys, key{a, e})
		}
	}
	noncanon := 0
	for _, k := range keys {
		c, _ := new(edwards25519.Point).SetBytes(k.enc)
		if !bytes.Equal(c.Bytes(), k.enc) {
			noncanon++
		}
	}
	t.Logf("%d keys, %d non-canonical encodings", len(keys), noncanon)
	if noncanon < 4 {
		t.Fatalf("only %d non-canonical keys", noncanon)
	}
	accepted, refused := 0, 0
	for ki, k := range keys {
		tab, err := newKeyTable([32]byte(k.enc), base)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 64 {
			msg := fmt.Appendf(nil, "key %d msg %d", ki, i)
			r := randScalar(rnd)
			rt := ts[0]
			if i%2 == 1 {
				rt = ts[i/2%8]
			}
			for _, sig := range variants(sigFor(r, k.a, rt, k.enc, msg)) {
				want := ed25519.Verify(k.enc, msg, sig)
				if got := tab.verify(sig, msg); got != want {
					t.Fatalf("key %x msg %d sig %x: table %v, ed25519 %v", k.enc, i, sig, got, want)
				}
				if want {
					accepted++
				} else {
					refused++
				}
			}
		}
	}
	t.Logf("accepted %d, refused %d", accepted, refused)
	if accepted < 300 || refused < 1000 {
		t.Fatalf("accepted %d refused %d", accepted, refused)
	}
}

// tableSum is the summation of keyTable.verify (copied), for chosen k
// and S: [S]B + [k](-A).
func tableSum(tab *keyTable, s, k []byte) []byte {
	var r extPoint
	r.setIdentity()
	for j, d := range signedBytes(s) {
		switch {
		case d > 0:
			r.addAffine(&tab.base.rows[j*sRow+int(d)-1])
		case d < 0:
			r.subAffine(&tab.base.rows[j*sRow-int(d)-1])
		}
	}
	for j, d := range signedDigits(k) {
		switch {
		case d > 0:
			r.addAffine(&tab.rows[j*kRow+int(d)-1])
		case d < 0:
			r.subAffine(&tab.rows[j*kRow-int(d)-1])
		}
	}
	enc, ok := r.encode()
	if !ok {
		return nil
	}
	return enc
}

// edgeScalars returns scalars below L whose digits hit the recodings'
// edges: 0, 1, digit values 31/32/63 in every window, carry chains through
// every digit, top bits set, L − 1, 2^252 ± small.
func edgeScalars(rnd *rand.Rand) []*big.Int {
	var out []*big.Int
	add := func(x *big.Int) {
		if x.Sign() >= 0 && x.Cmp(bigL) < 0 {
			out = append(out, x)
		}
	}
	for _, v := range []int64{0, 1, 2, 31, 32, 33, 63, 64, 127, 128, 129, 255, 256} {
		add(big.NewInt(v))
	}
	two252 := new(big.Int).Lsh(big.NewInt(1), 252)
	add(two252)
	add(new(big.Int).Sub(two252, big.NewInt(1)))
	add(new(big.Int).Add(two252, big.NewInt(1)))
	for d := int64(-3); d < 0; d++ {
		add(new(big.Int).Add(bigL, big.NewInt(d)))
	}
	for _, dig := range []int64{31, 32, 33, 63} {
		all6, all8 := new(big.Int), new(big.Int)
		for j := range 43 {
			all6.Add(all6, new(big.Int).Lsh(big.NewInt(dig), uint(6*j)))
		}
		for j := range 32 {
			all8.Add(all8, new(big.Int).Lsh(big.NewInt(dig+96), uint(8*j)))
			add(new(big.Int).Lsh(big.NewInt(dig), uint(6*j)))
			add(new(big.Int).Lsh(big.NewInt(dig+96), uint(8*j)))
		}
		add(new(big.Int).Mod(all6, bigL))
		add(new(big.Int).Mod(all8, bigL))
		add(new(big.Int).Mod(all6, two252))
		add(new(big.Int).Mod(all8, two252))
	}
	for range 200 {
		add(new(big.Int).SetBytes(reverse(randScalar(rnd).Bytes())))
	}
	for range 200 {
		var b [32]byte
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		b[31] = 0x10
		x := new(big.Int).SetBytes(reverse(b[:]))
		add(x)
	}
	return out
}

// TestVerifierDigitEdges: the tables' sums for edge S and k equal
// edwards25519's [S]B + [k](-A), for plain, torsion and small-order keys.
func TestVerifierDigitEdges(t *testing.T) {
	rnd := rand.New(rand.NewPCG(13, 14))
	base := newBaseTable()
	ts := torsion()
	var pubs []*edwards25519.Point
	for _, tp := range ts {
		pubs = append(pubs, tp)
		A := new(edwards25519.Point).ScalarBaseMult(randScalar(rnd))
		pubs = append(pubs, A.Add(A, tp))
	}
	scalars := edgeScalars(rnd)
	t.Logf("%d edge scalars", len(scalars))
	for pi, A := range pubs {
		tab, err := newKeyTable([32]byte(A.Bytes()), base)
		if err != nil {
			t.Fatal(err)
		}
		minusA := new(edwards25519.Point).Negate(A)
		for i, k := range scalars {
			s := scalars[(i*7+pi)%len(scalars)]
			kb, sb := scalarLE(k), scalarLE(s)
			ks, err := edwards25519.NewScalar().SetCanonicalBytes(kb)
			if err != nil {
				t.Fatal(err)
			}
			ss, _ := edwards25519.NewScalar().SetCanonicalBytes(sb)
			want := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(ks, minusA, ss).Bytes()
			if got := tableSum(tab, sb, kb); !bytes.Equal(got, want) {
				t.Fatalf("key %d k %v s %v: %x, want %x", pi, k, s, got, want)
			}
		}
	}
}

// TestVerifierConcurrent: one Verifier, many goroutines, keys getting their
// tables and losing them (more keys than maxTables), good and bad
// signatures: every answer is ed25519.Verify's. Run with -race.
func TestVerifierConcurrent(t *testing.T) {
	v := NewVerifier()
	rnd := rand.New(rand.NewPCG(15, 16))
	ts := torsion()
	type key struct {
		a   *edwards25519.Scalar
		enc []byte
	}
	keys := make([]key, maxTables+8)
	for i := range keys {
		a := randScalar(rnd)
		A := new(edwards25519.Point).ScalarBaseMult(a)
		A.Add(A, ts[i%8])
		keys[i] = key{a, A.Bytes()}
	}
	type job struct {
		pub, body, sig []byte
	}
	var jobs []job
	for i := range 8000 {
		k := keys[(i/50+rnd.IntN(4))%len(keys)] // a window of 4 senders sliding over all
		body := fmt.Appendf(nil, "body %d", i)
		sig := sigFor(randScalar(rnd), k.a, ts[i%8], k.enc, signingBytes(body))
		if i%3 == 0 {
			sig[rnd.IntN(64)] ^= byte(1 << rnd.IntN(8))
		}
		jobs = append(jobs, job{k.enc, body, sig})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < len(jobs); i += 8 {
				j := jobs[i]
				if got, want := v.check(j.pub, j.body, j.sig), ed25519.Verify(j.pub, signingBytes(j.body), j.sig); got != want {
					select {
					case errs <- fmt.Sprintf("job %d: verifier %v, ed25519 %v", i, got, want):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if v.built <= maxTables {
		t.Fatalf("only %d tables built: tables not exercised", v.built)
	}
}

// TestVerifierUndecodableKeyEvicts: checks with a key that is no point
// (one an attacker sends many messages from) evict no honest sender's table.
func TestVerifierUndecodableKeyEvicts(t *testing.T) {
	v := NewVerifier()
	rnd := rand.New(rand.NewPCG(17, 18))
	for range maxTables {
		s := newTestSigner(rnd, nil)
		for j := range tableAfter + 3 { // a table, used 3 times since
			body := fmt.Appendf(nil, "%d", j)
			if !v.check(s.pub, body, s.sign(rnd, signingBytes(body), nil)) {
				t.Fatal("refused")
			}
		}
	}
	if len(v.tables) != maxTables {
		t.Fatalf("%d tables", len(v.tables))
	}
	bad := make([]byte, 32)
	bad[0] = 2 // y = 2: not on the curve
	sig := make([]byte, 64)
	for range maxTables * tableAfter {
		if v.check(bad, []byte("x"), sig) {
			t.Fatal("accepted")
		}
	}
	if len(v.tables) != maxTables {
		t.Errorf("after %d checks with one undecodable key: %d of %d honest tables left", maxTables*tableAfter, len(v.tables), maxTables)
	}
}

// TestVerifierFailingKeysGetTables: a key earns a table with good
// signatures only, so fresh keys (free to make) with bad ones cost no table
// builds.
func TestVerifierFailingKeysGetTables(t *testing.T) {
	v := NewVerifier()
	rnd := rand.New(rand.NewPCG(19, 20))
	const keys = 3 * maxTables
	sig := make([]byte, 64)
	for range keys {
		pub := newTestSigner(rnd, nil).pub
		for range tableAfter {
			if v.check(pub, []byte("x"), sig) {
				t.Fatal("accepted")
			}
		}
	}
	if v.built > maxTables {
		t.Errorf("%d fresh keys, none with a good signature: %d tables built", keys, v.built)
	}
}

// BenchmarkVerifierFreshKeyFlood: the CPU a Verifier spends per check when
// an attacker sends tableAfter messages (bad signatures) per fresh key,
// against ed25519.Verify on the same inputs.
func BenchmarkVerifierFreshKeyFlood(b *testing.B) {
	rnd := rand.New(rand.NewPCG(21, 22))
	pubs := make([][]byte, 256)
	for i := range pubs {
		pubs[i] = newTestSigner(rnd, nil).pub
	}
	sig := make([]byte, 64)
	sig[0] = 1
	b.Run("verifier", func(b *testing.B) {
		v := NewVerifier()
		i := 0
		for b.Loop() {
			// the key changes every tableAfter checks; pubs repeat only
			// after 256 keys, long after their tables were evicted
			v.check(pubs[i/tableAfter%len(pubs)], []byte("x"), sig)
			i++
		}
		b.ReportMetric(float64(v.built)/float64(i), "builds/check")
	})
	b.Run("ed25519", func(b *testing.B) {
		i := 0
		for b.Loop() {
			ed25519.Verify(pubs[i/tableAfter%len(pubs)], signingBytes([]byte("x")), sig)
			i++
		}
	})
}

// FuzzVerifierKeyTable: signatures made for keys with every torsion
// component and every encoding, R with every torsion component, then
// mangled by the fuzzer (S + L, top bits, xor, raw S, raw signature, R's
// other encodings): keyTable.verify answers as ed25519.Verify.
func FuzzVerifierKeyTable(f *testing.F) {
	rnd := rand.New(rand.NewPCG(23, 24))
	base := newBaseTable()
	ts := torsion()
	type key struct {
		a   *edwards25519.Scalar
		enc []byte
		tab *keyTable
	}
	var keys []key
	addKey := func(a *edwards25519.Scalar, A *edwards25519.Point) {
		for _, e := range encodings(A.Bytes()) {
			tab, err := newKeyTable([32]byte(e), base)
			if err != nil {
				f.Fatal(err)
			}
			keys = append(keys, key{a, e, tab})
		}
	}
	for _, tp := range ts {
		addKey(nil, tp)
		a := randScalar(rnd)
		A := new(edwards25519.Point).ScalarBaseMult(a)
		addKey(a, A.Add(A, tp))
	}
	for i := range 64 {
		f.Add(uint8(i), []byte{byte(i), 1, 2}, uint8(i/8), uint8(i*5), []byte("msg"), []byte{0xff, 0x01})
	}
	f.Fuzz(func(t *testing.T, keySel uint8, rSeed []byte, rTor, mode uint8, msg, raw []byte) {
		k := keys[int(keySel)%len(keys)]
		var seed [64]byte
		copy(seed[:], rSeed)
		r, _ := edwards25519.NewScalar().SetUniformBytes(seed[:])
		sig := sigFor(r, k.a, ts[rTor%8], k.enc, msg)
		if mode&1 != 0 {
			s := new(big.Int).Add(new(big.Int).SetBytes(reverse(sig[32:])), bigL)
			if s.BitLen() <= 256 {
				copy(sig[32:], scalarLE(s))
			}
		}
		if mode&2 != 0 && len(raw) > 0 {
			sig[63] |= raw[0] & 0xe0
		}
		if mode&4 != 0 {
			for i := range min(len(raw), 64) {
				sig[i] ^= raw[i]
			}
		}
		if mode&8 != 0 && len(raw) == 64 {
			copy(sig, raw)
		}
		if mode&16 != 0 {
			if encs := encodings(sig[:32]); len(encs) > 1 {
				copy(sig[:32], encs[1+int(rTor)%(len(encs)-1)])
			}
		}
		if mode&32 != 0 && len(raw) >= 32 {
			copy(sig[32:], raw[:32])
		}
		want := ed25519.Verify(k.enc, msg, sig)
		if got := k.tab.verify(sig, msg); got != want {
			t.Fatalf("key %x sig %x msg %x: table %v, ed25519 %v", k.enc, sig, msg, got, want)
		}
	})
}

// BenchmarkVerifierFreshKeyFloodValid: as BenchmarkVerifierFreshKeyFlood
// with good signatures (an attacker signs with its fresh keys).
func BenchmarkVerifierFreshKeyFloodValid(b *testing.B) {
	rnd := rand.New(rand.NewPCG(25, 26))
	type job struct{ pub, body, sig []byte }
	jobs := make([]job, 512*tableAfter)
	for i := 0; i < len(jobs); i += tableAfter {
		s := newTestSigner(rnd, nil)
		for j := range tableAfter {
			body := fmt.Appendf(nil, "%d", j)
			jobs[i+j] = job{s.pub, body, s.sign(rnd, signingBytes(body), nil)}
		}
	}
	b.Run("verifier", func(b *testing.B) {
		v := NewVerifier()
		i := 0
		for b.Loop() {
			j := jobs[i%len(jobs)]
			if !v.check(j.pub, j.body, j.sig) {
				b.Fatal("refused")
			}
			i++
		}
		b.ReportMetric(float64(v.built)/float64(i), "builds/check")
	})
	b.Run("ed25519", func(b *testing.B) {
		i := 0
		for b.Loop() {
			j := jobs[i%len(jobs)]
			if !ed25519.Verify(j.pub, signingBytes(j.body), j.sig) {
				b.Fatal("refused")
			}
			i++
		}
	})
}
