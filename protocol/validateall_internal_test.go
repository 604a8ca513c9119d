package protocol

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// rawFrame is a wire encoding of body and sig, built by hand.
func rawFrame(body, sig []byte) []byte {
	w := []byte{0x01}
	w = binary.AppendUvarint(w, uint64(len(body)))
	w = append(w, body...)
	return append(w, sig...)
}

// rawBody is a valid body from the Ed25519 key pub, created at createdMs.
func rawBody(tb testing.TB, pub []byte, createdMs int64, ttl int, x int) []byte {
	pk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Appendf(nil, `{"v":1,"space":"%s","from":"%s","created_at":%d,"type":"text","ttl":%d,"content":{"text":"hello %d"}}`,
		SpaceID("general").String(), id.String(), createdMs, ttl, x)
}

// craftedWires builds good and crafted messages by ordinary, torsion,
// small-order and non-canonically encoded keys.
func craftedWires(tb testing.TB, rnd *rand.Rand, nowMs int64) [][]byte {
	t2 := new(edwards25519.Point).Add(order8, order8)
	t4 := new(edwards25519.Point).Add(t2, t2)
	zero := edwards25519.NewScalar()
	ident := edwards25519.NewIdentityPoint()
	nonCanonIdent := make([]byte, 32) // y = p+1
	nonCanonIdent[0] = 0xee
	for i := 1; i < 31; i++ {
		nonCanonIdent[i] = 0xff
	}
	nonCanonIdent[31] = 0x7f
	negZeroIdent := make([]byte, 32) // y = 1, sign bit set
	negZeroIdent[0], negZeroIdent[31] = 1, 0x80
	signers := []testSigner{
		newTestSigner(rnd, nil), newTestSigner(rnd, order8), newTestSigner(rnd, t2), newTestSigner(rnd, t4),
		{a: zero, pub: order8.Bytes()},
		{a: zero, pub: ident.Bytes()},
		{a: zero, pub: nonCanonIdent},
		{a: zero, pub: negZeroIdent},
	}
	var wires [][]byte
	for i := range 12 * 16 {
		s := signers[i%len(signers)]
		created := nowMs - 1000
		ttl := 600
		switch rnd.IntN(10) {
		case 0:
			created = nowMs - 10_000_000 // expired
			ttl = 60
		case 1:
			created = nowMs + 3_600_000 // future
		}
		body := rawBody(tb, s.pub, created, ttl, i)
		msg := append([]byte(SigningDomain), body...)
		var rt *edwards25519.Point
		switch rnd.IntN(4) {
		case 1:
			rt = order8
		case 2:
			rt = t4
		}
		sig := s.sign(rnd, msg, rt)
		wires = append(wires, rawFrame(body, sig))
		if rnd.IntN(3) != 0 {
			continue
		}
		bad := append([]byte(nil), sig...)
		switch rnd.IntN(6) {
		case 0:
			bad[rnd.IntN(64)] ^= 1 << rnd.IntN(8)
		case 1:
			bad[31] ^= 0x80 // R's sign bit
		case 2:
			bad[63] |= 0x20
		case 3: // R plus a torsion point
			R, err := new(edwards25519.Point).SetBytes(sig[:32])
			if err == nil {
				copy(bad, R.Add(R, order8).Bytes())
			}
		case 4: // R = 0 / identity encodings
			copy(bad, nonCanonIdent)
		case 5: // S + L
			l := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 31: 0x10}
			c := 0
			for j := range 32 {
				v := int(sig[32+j]) + int(l[j]) + c
				bad[32+j], c = byte(v), v>>8
			}
		}
		wires = append(wires, rawFrame(body, bad))
		if rnd.IntN(8) == 0 {
			wires = append(wires, rawFrame(body, bad)[:len(body)+40]) // short
		}
	}
	return wires
}

// sameVerdict fails tb unless got, gerr is want, werr: the same message
// accepted, marked checked, or the same error.
func sameVerdict(tb testing.TB, where string, got *Message, gerr error, want *Message, werr error) {
	tb.Helper()
	if (gerr == nil) != (werr == nil) || Code(gerr) != Code(werr) {
		tb.Fatalf("%s: got %v, want %v", where, gerr, werr)
	}
	if (got == nil) != (gerr != nil) {
		tb.Fatalf("%s: message %v with error %v", where, got, gerr)
	}
	if gerr == nil && (got.ID != want.ID || !got.SignatureChecked()) {
		tb.Fatalf("%s: accepted differently", where)
	}
	if gerr != nil && gerr.Error() != werr.Error() {
		tb.Fatalf("%s: error text %q vs %q", where, gerr, werr)
	}
}

// TestValidateAllAdversarial: random chunks of crafted messages,
// ValidateAll against protocol.Validate; and the Verifier's accounting
// after ValidateAll of chunks equals its accounting after Validate of
// each, in order.
func TestValidateAllAdversarial(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	now := time.UnixMilli(1767225600000 + 200_000)
	lim := DefaultLimits()
	stats := map[string]int{}
	defer func() { t.Logf("verdicts: %v", stats) }()
	for round := range 6 {
		wires := craftedWires(t, rnd, now.UnixMilli())
		rnd.Shuffle(len(wires), func(i, j int) { wires[i], wires[j] = wires[j], wires[i] })
		va, vb := NewVerifier(), NewVerifier()
		for pass := range 3 {
			for lo := 0; lo < len(wires); {
				hi := min(len(wires), lo+rnd.IntN(40))
				ms, es := va.ValidateAll(wires[lo:hi], now, lim)
				for i := lo; i < hi; i++ {
					want, werr := Validate(wires[i], now, lim)
					sameVerdict(t, fmt.Sprintf("round %d pass %d wire %d", round, pass, i), ms[i-lo], es[i-lo], want, werr)
					stats[Code(werr)]++
					got, gerr := vb.Validate(wires[i], now, lim)
					sameVerdict(t, fmt.Sprintf("Verifier.Validate round %d pass %d wire %d", round, pass, i), got, gerr, want, werr)
				}
				lo = hi
			}
			va.mu.Lock()
			vb.mu.Lock()
			if va.calls != vb.calls || va.credit != vb.credit || va.built != vb.built || len(va.tables) != len(vb.tables) || len(va.seen) != len(vb.seen) {
				t.Fatalf("round %d pass %d: accounting differs: calls %d/%d credit %d/%d built %d/%d tables %d/%d seen %d/%d",
					round, pass, va.calls, vb.calls, va.credit, vb.credit, va.built, vb.built, len(va.tables), len(vb.tables), len(va.seen), len(vb.seen))
			}
			for k, ta := range va.tables {
				tb, ok := vb.tables[k]
				if !ok || ta.uses != tb.uses {
					t.Fatalf("round %d pass %d: table %x differs", round, pass, k[:4])
				}
			}
			for k, n := range va.seen {
				if vb.seen[k] != n {
					t.Fatalf("round %d pass %d: seen %x differs", round, pass, k[:4])
				}
			}
			if pass == 2 {
				t.Logf("round %d: %d tables, %d calls", round, len(va.tables), va.calls)
			}
			if pass == 2 && len(va.tables) == 0 {
				t.Fatalf("no tables built")
			}
			va.mu.Unlock()
			vb.mu.Unlock()
		}
	}
}

// TestValidateAllConcurrent: one Verifier, ValidateAll from several
// goroutines (run with -race).
func TestValidateAllConcurrent(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	now := time.UnixMilli(1767225600000 + 200_000)
	lim := DefaultLimits()
	wires := craftedWires(t, rnd, now.UnixMilli())
	want := make([]*Message, len(wires))
	werr := make([]error, len(wires))
	for i, w := range wires {
		want[i], werr[i] = Validate(w, now, lim)
	}
	v := NewVerifier()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pass := range 3 {
				for lo := g; lo < len(wires); lo += 16 {
					hi := min(len(wires), lo+16)
					ms, es := v.ValidateAll(wires[lo:hi], now, lim)
					for i := lo; i < hi; i++ {
						if (es[i-lo] == nil) != (werr[i] == nil) || Code(es[i-lo]) != Code(werr[i]) {
							t.Errorf("g %d pass %d wire %d: %v vs %v", g, pass, i, es[i-lo], werr[i])
						}
						if es[i-lo] == nil && ms[i-lo].ID != want[i].ID {
							t.Errorf("g %d wire %d: other message", g, i)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestEncodeAllMatchesBytes: encodeAll of random points (any Z,
// torsion included) equals Point.Bytes.
func TestEncodeAllMatchesBytes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	base := newBaseTable()
	signer := newTestSigner(rnd, order8)
	tab, err := newKeyTable([32]byte(signer.pub), base)
	if err != nil {
		t.Fatal(err)
	}
	var pts []extPoint
	for i := range 500 {
		sig := make([]byte, 64)
		for j := range sig {
			sig[j] = byte(rnd.Uint32())
		}
		sig[63] &= 0x0f
		if i%7 == 0 {
			for j := 32; j < 64; j++ {
				sig[j] = 0 // S = 0
			}
		}
		var p extPoint
		if !tab.point(&p, sig, []byte{byte(i)}) {
			continue
		}
		pts = append(pts, p)
	}
	// The identity and small-order points too, with scaled coordinates.
	for _, q := range []*edwards25519.Point{edwards25519.NewIdentityPoint(), order8, new(edwards25519.Point).Add(order8, order8)} {
		X, Y, Z, T := q.ExtendedCoordinates()
		var p extPoint
		p.X.Set(X)
		p.Y.Set(Y)
		p.Z.Set(Z)
		p.T.Set(T)
		pts = append(pts, p)
	}
	enc := make([][32]byte, len(pts))
	if !encodeAll(pts, enc) {
		t.Fatal("encodeAll failed")
	}
	for i := range pts {
		e, ok := pts[i].encode()
		if !ok || string(e) != string(enc[i][:]) {
			t.Fatalf("point %d: %x vs %x", i, enc[i], e)
		}
	}
}

// TestValidateAllNilVerifier: a nil Verifier's ValidateAll checks as
// Validate does, as a nil Verifier's Validate does.
func TestValidateAllNilVerifier(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 1))
	now := time.UnixMilli(1767225600000 + 200_000)
	wires := craftedWires(t, rnd, now.UnixMilli())
	var v *Verifier
	ms, es := v.ValidateAll(wires, now, DefaultLimits())
	for i, w := range wires {
		want, werr := Validate(w, now, DefaultLimits())
		sameVerdict(t, fmt.Sprintf("wire %d", i), ms[i], es[i], want, werr)
	}
}
