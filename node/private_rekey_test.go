package node

import (
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol/member"
)

// TestSealedRekeySkipsUnwrappable: a member whose peer ID holds no Ed25519
// key (an admin may add any peer ID) cannot be given a key; a rotation
// (here the rekey a removal carries) gives the key to the others instead
// of failing, which left a sealed space's key unrotatable for good.
func TestSealedRekeySkipsUnwrappable(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	sp, err := a.CreatePrivate(ctx, "vault", true)
	if err != nil {
		t.Fatal(err)
	}
	add := func(k crypto.PrivKey) peer.ID {
		t.Helper()
		p, err := peer.IDFromPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.change(ctx, "vault", member.Change{Op: member.OpAdd, Peer: p.String(), Role: member.Member}); err != nil {
			t.Fatalf("add %s: %v", p, err)
		}
		return p
	}
	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ed, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	odd := add(secp)
	gone := add(ed)
	rm, err := a.Remove(ctx, "vault", gone)
	if err != nil {
		t.Fatalf("remove (its rekey): %v", err)
	}
	var c member.Change
	if err := json.Unmarshal(rm.Content, &c); err != nil {
		t.Fatal(err)
	}
	if c.Keys == nil || len(c.Keys.Shares) != 1 || c.Keys.Shares[0].Peer != a.ID().String() {
		t.Fatalf("the removal's keys: %+v, want one share, to the owner (not to %s nor %s)", c.Keys, odd, gone)
	}
	s := a.private.get(sp.ID)
	within(t, 10*time.Second, "the owner to hold epoch 1", func() bool { e, _, _ := s.keys.current(); return e == 1 })
}
