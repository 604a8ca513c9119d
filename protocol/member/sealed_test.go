package member

import (
	"bytes"
	"crypto/ecdh"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// montgomeryU is the birational map from Ed25519 to X25519 written out
// with big integers (u = (1+y)/(1-y) mod p), independent of the code under
// test.
func montgomeryU(edPub []byte) []byte {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	le := slices.Clone(edPub)
	le[31] &= 0x7f // the sign bit of x
	slices.Reverse(le)
	y := new(big.Int).SetBytes(le)
	num := new(big.Int).Add(big.NewInt(1), y)
	den := new(big.Int).Sub(big.NewInt(1), y)
	den.Mod(den, p)
	u := num.Mul(num, den.ModInverse(den, p))
	u.Mod(u, p)
	out := u.FillBytes(make([]byte, 32))
	slices.Reverse(out)
	return out
}

// TestKeyDerivationVectors: RFC 8032's first test key: its X25519 public
// key is the Montgomery form of its Ed25519 public key (checked against
// the formula written out here) and matches the X25519 private key derived
// from its seed, and the values are pinned.
func TestKeyDerivationVectors(t *testing.T) {
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	pubHex := "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	edPub, _ := hex.DecodeString(pubHex)
	key, err := crypto.UnmarshalEd25519PrivateKey(append(slices.Clone(seed), edPub...))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := X25519Public(id)
	if err != nil {
		t.Fatal(err)
	}
	if want := montgomeryU(edPub); !bytes.Equal(pub, want) {
		t.Fatalf("X25519 public %x, the formula gives %x", pub, want)
	}
	priv, err := X25519Private(key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(priv.PublicKey().Bytes(), pub) {
		t.Fatalf("private key's public %x, from the identity %x", priv.PublicKey().Bytes(), pub)
	}
	const wantPub = "d85e07ec22b0ad881537c2f44d662d1a143cf830c57aca4305d85c7a90f6b62e"
	if hex.EncodeToString(pub) != wantPub {
		t.Fatalf("X25519 public %x, pinned %s", pub, wantPub)
	}
	// Random identities agree too.
	for range 20 {
		a := newActor(t)
		pub, err := X25519Public(a.id)
		if err != nil {
			t.Fatal(err)
		}
		priv, err := X25519Private(a.key)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := a.key.GetPublic().Raw()
		if !bytes.Equal(pub, priv.PublicKey().Bytes()) || !bytes.Equal(pub, montgomeryU(raw)) {
			t.Fatalf("%s: public %x, private's %x", a.id, pub, priv.PublicKey().Bytes())
		}
	}
	if _, err := ecdh.X25519().NewPublicKey(pub); err != nil {
		t.Fatal(err)
	}
}

// TestWrapUnwrap: a share opens with its recipient's identity key only,
// and only for the space and epoch it was made for.
func TestWrapUnwrap(t *testing.T) {
	a, b := newActor(t), newActor(t)
	var space protocol.ID
	space[0] = 7
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := WrapAll([]peer.ID{a.id, b.id}, space, 3, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []actor{a, b} {
		got := Mine(x.key, x.id, space, []KeyShares{ks})
		if got[3] != k || len(got) != 1 {
			t.Fatalf("%s unwrapped %v", x.id, got)
		}
	}
	c := newActor(t)
	if got := Mine(c.key, c.id, space, []KeyShares{ks}); len(got) != 0 {
		t.Fatalf("a non-recipient unwrapped %v", got)
	}
	// c pretends to be a: the share names a, but c's key does not open it.
	if _, err := Unwrap(c.key, space, 3, ks.Shares[0]); !errors.Is(err, ErrSealed) {
		t.Fatalf("c opened a's share: %v", err)
	}
	if _, err := Unwrap(a.key, space, 4, ks.Shares[0]); !errors.Is(err, ErrSealed) {
		t.Fatalf("a share opened for another epoch: %v", err)
	}
	other := space
	other[1] = 1
	if _, err := Unwrap(a.key, other, 3, ks.Shares[0]); !errors.Is(err, ErrSealed) {
		t.Fatalf("a share opened for another space: %v", err)
	}
	bad := ks.Shares[0]
	bad.Box = slices.Clone(bad.Box)
	bad.Box[0] ^= 1
	if _, err := Unwrap(a.key, space, 3, bad); !errors.Is(err, ErrSealed) {
		t.Fatalf("a tampered share opened: %v", err)
	}
	// An invite's key: wrapped to its bound peer, or in the clear.
	ik := InviteKey{Epoch: 3, Share: &ks.Shares[1]}
	if got, err := ik.Open(b.key, b.id, space); err != nil || got != k {
		t.Fatalf("bound invite key: %v", err)
	}
	if _, err := ik.Open(a.key, a.id, space); err == nil {
		t.Fatal("a bound invite's key opened by another peer")
	}
	if got, err := (InviteKey{Epoch: 3, Key: k[:]}).Open(c.key, c.id, space); err != nil || got != k {
		t.Fatalf("bearer invite key: %v", err)
	}
}

// TestEnvelopeTamper: an envelope opens with its key and headers; a
// changed ciphertext, nonce, epoch or any header it is bound to (space,
// sender, time, type) is refused, and so is a wrong key.
func TestEnvelopeTamper(t *testing.T) {
	k, _ := NewKey()
	k2, _ := NewKey()
	h := Headers{From: "12D3KooWsender", CreatedAt: 1700000000000, Type: "text"}
	h.Space[0] = 1
	content := json.RawMessage(`{"text":"secret marker"}`)
	raw, err := Seal(k, 2, h, content, map[string]string{"topic": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("secret")) || bytes.Contains(raw, []byte("topic")) {
		t.Fatalf("envelope holds plaintext: %s", raw)
	}
	env, ok := ParseEnvelope(raw)
	if !ok || env.Epoch != 2 {
		t.Fatalf("parse %s: %v %+v", raw, ok, env)
	}
	got, meta, err := Open(env, h, []Key{k2, k})
	if err != nil || string(got) != string(content) || meta["topic"] != "x" {
		t.Fatalf("open: %s %v %v", got, meta, err)
	}
	refuse := func(name string, env Envelope, h Headers, keys ...Key) {
		t.Helper()
		if _, _, err := Open(env, h, keys); !errors.Is(err, ErrSealed) {
			t.Errorf("%s: opened (%v)", name, err)
		}
	}
	flip := func(b []byte, i int) []byte { b = slices.Clone(b); b[i] ^= 0x40; return b }
	e := env
	e.CT = flip(env.CT, 0)
	refuse("ciphertext", e, h, k)
	e = env
	e.CT = flip(env.CT, len(env.CT)-1)
	refuse("tag", e, h, k)
	e = env
	e.Nonce = flip(env.Nonce, 5)
	refuse("nonce", e, h, k)
	e = env
	e.Epoch = 3
	refuse("epoch", e, h, k)
	for name, hh := range map[string]Headers{
		"space": {Space: protocol.ID{2}, From: h.From, CreatedAt: h.CreatedAt, Type: h.Type},
		"from":  {Space: h.Space, From: "12D3KooWother", CreatedAt: h.CreatedAt, Type: h.Type},
		"time":  {Space: h.Space, From: h.From, CreatedAt: h.CreatedAt + 1, Type: h.Type},
		"type":  {Space: h.Space, From: h.From, CreatedAt: h.CreatedAt, Type: "task"},
	} {
		refuse("header "+name, env, hh, k)
	}
	refuse("wrong key", env, h, k2)
	refuse("no key", env, h)
	if _, ok := ParseEnvelope(json.RawMessage(`{"text":"hi"}`)); ok {
		t.Fatal("plain content parsed as an envelope")
	}
}

// TestSealedGraph: in a sealed space a member's cleartext message (or
// clear meta) is refused, its envelope accepted; only an admin or the
// owner may send a key message.
func TestSealedGraph(t *testing.T) {
	owner, m := newActor(t), newActor(t)
	nonce := []byte("0123456789abcdef")
	g := sign(t, owner, SpaceID(owner.id, nonce), TypeGenesis, Genesis{Name: "audit", Nonce: nonce, Sealed: true}, t0)
	gr, err := NewGraph(g)
	if err != nil || !gr.Sealed() {
		t.Fatal(err)
	}
	add := sign(t, owner, g.Space, TypeMember, Change{Op: OpAdd, Peer: m.id.String(), Role: Member}, t0, g.ID)
	if _, err := gr.Check(add); err != nil {
		t.Fatal(err)
	}
	_ = gr.Add(add)
	clear := sign(t, m, g.Space, "text", map[string]string{"text": "hi"}, t0, add.ID)
	if _, err := gr.Check(clear); !errors.Is(err, ErrMalformed) {
		t.Fatalf("cleartext in a sealed space: %v", err)
	}
	k, _ := NewKey()
	env, err := Seal(k, 0, Headers{Space: g.Space, From: m.id.String(), CreatedAt: t0.UnixMilli(), Type: "text"}, json.RawMessage(`{"text":"hi"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := protocol.Sign(m.key, protocol.Draft{Space: g.Space, CreatedAt: t0, Type: "text", Prev: []protocol.ID{add.ID}, Content: env}, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gr.Check(sealed); err != nil {
		t.Fatalf("an envelope: %v", err)
	}
	withMeta, err := protocol.Sign(m.key, protocol.Draft{Space: g.Space, CreatedAt: t0, Type: "text", Prev: []protocol.ID{add.ID}, Content: env, Meta: map[string]string{"topic": "x"}}, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gr.Check(withMeta); !errors.Is(err, ErrMalformed) {
		t.Fatalf("clear meta in a sealed space: %v", err)
	}
	ks, _ := WrapAll([]peer.ID{m.id}, g.Space, 1, k)
	byMember := sign(t, m, g.Space, TypeKey, KeyMessage{Keys: []KeyShares{ks}}, t0, add.ID)
	if _, err := gr.Check(byMember); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a member's key message: %v", err)
	}
	byOwner := sign(t, owner, g.Space, TypeKey, KeyMessage{Keys: []KeyShares{ks}}, t0, add.ID)
	if _, err := gr.Check(byOwner); err != nil {
		t.Fatalf("the owner's key message: %v", err)
	}
	// A member cannot plant keys in a change of its own either: only a
	// removal carries them.
	leave := sign(t, m, g.Space, TypeMember, Change{Op: OpLeave, Peer: m.id.String(), Keys: &ks}, t0, add.ID)
	if _, err := gr.Check(leave); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a leave carrying keys: %v", err)
	}
	other := newActor(t)
	addKeys := sign(t, owner, g.Space, TypeMember, Change{Op: OpAdd, Peer: other.id.String(), Role: Member, Keys: &ks}, t0, add.ID)
	if _, err := gr.Check(addKeys); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an add carrying keys: %v", err)
	}
	remove := sign(t, owner, g.Space, TypeMember, Change{Op: OpRemove, Peer: m.id.String(), Keys: &ks}, t0, add.ID)
	if _, err := gr.Check(remove); err != nil {
		t.Fatalf("the owner's removal with its rekey: %v", err)
	}
	empty := sign(t, owner, g.Space, TypeKey, KeyMessage{}, t0, add.ID)
	if _, err := gr.Check(empty); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an empty key message: %v", err)
	}
}

// BenchmarkSealOpen: the cost of sealing and of opening one ~200-byte
// content (what sealed spaces add per message sent and per message read).
func BenchmarkSealOpen(b *testing.B) {
	k, _ := NewKey()
	h := Headers{From: "12D3KooWsender", CreatedAt: 1700000000000, Type: "text"}
	content := json.RawMessage(`{"text":"` + string(bytes.Repeat([]byte("x"), 200)) + `"}`)
	raw, err := Seal(k, 0, h, content, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := Seal(k, 0, h, content, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			env, _ := ParseEnvelope(raw)
			if _, _, err := Open(env, h, []Key{k}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
