package member

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

type actor struct {
	key crypto.PrivKey
	id  peer.ID
}

func newActor(t testing.TB) actor {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return actor{k, id}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sign(t testing.TB, a actor, space protocol.ID, typ string, content any, at time.Time, prev ...protocol.ID) *protocol.Message {
	t.Helper()
	b, _ := json.Marshal(content)
	m, err := protocol.Sign(a.key, protocol.Draft{Space: space, CreatedAt: at, Type: typ, Prev: prev, Content: b}, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func genesis(t testing.TB, owner actor) *protocol.Message {
	t.Helper()
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	return sign(t, owner, SpaceID(owner.id, nonce), TypeGenesis, Genesis{Name: "audit", Nonce: nonce}, t0)
}

func invite(t testing.TB, issuer actor, g *protocol.Message, role Role, bound peer.ID, heads ...protocol.ID) string {
	t.Helper()
	inv := Invite{Space: g.Space, Role: role, Expires: t0.Add(time.Hour).UnixMilli(), Nonce: []byte("0123456789abcdef"), Heads: heads, Genesis: g.Encode()}
	if bound != "" {
		inv.Peer = bound.String()
	}
	tok, err := Issue(issuer.key, inv)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestGenesisBindsOwner(t *testing.T) {
	a, c := newActor(t), newActor(t)
	g := genesis(t, a)
	if _, err := NewGraph(g); err != nil {
		t.Fatal(err)
	}
	// C signs a genesis claiming A's space ID: refused.
	var gc Genesis
	_ = json.Unmarshal(g.Content, &gc)
	forged := sign(t, c, g.Space, TypeGenesis, gc, t0)
	if _, err := NewGraph(forged); !errors.Is(err, ErrMalformed) {
		t.Fatalf("forged genesis: %v", err)
	}
	if g.Space == protocol.SpaceID("audit") {
		t.Fatal("private ID equals the open space's")
	}
}

func TestAuth(t *testing.T) {
	a, b, c := newActor(t), newActor(t), newActor(t)
	g := genesis(t, a)
	gr, _ := NewGraph(g)
	add := func(m *protocol.Message) {
		t.Helper()
		if miss, err := gr.Check(m); err != nil || miss != nil {
			t.Fatalf("check %s: %v %v", m.Type, miss, err)
		}
		if err := gr.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	refuse := func(m *protocol.Message, want error) {
		t.Helper()
		if _, err := gr.Check(m); !errors.Is(err, want) {
			t.Fatalf("%s: got %v, want %v", m.Type, err, want)
		}
	}
	hello := sign(t, a, g.Space, "text", map[string]string{"text": "hi"}, t0.Add(time.Second), g.ID)
	add(hello)
	refuse(sign(t, c, g.Space, "text", map[string]string{"text": "x"}, t0.Add(time.Second), hello.ID), ErrUnauthorized)
	// Parents unknown: held, not refused.
	orphan := sign(t, b, g.Space, "text", map[string]string{}, t0.Add(time.Second), protocol.SpaceID("nope"))
	if miss, err := gr.Check(orphan); err != nil || len(miss) != 1 {
		t.Fatalf("orphan: %v %v", miss, err)
	}
	tok := invite(t, a, g, Member, b.id, hello.ID)
	join := sign(t, b, g.Space, TypeMember, Change{Op: OpJoin, Peer: b.id.String(), Invite: tok}, t0.Add(2*time.Second), hello.ID)
	// C presenting B's bound invite: refused.
	refuse(sign(t, c, g.Space, TypeMember, Change{Op: OpJoin, Peer: c.id.String(), Invite: tok}, t0.Add(2*time.Second), hello.ID), ErrBadInvite)
	// Expired.
	refuse(sign(t, b, g.Space, TypeMember, Change{Op: OpJoin, Peer: b.id.String(), Invite: tok}, t0.Add(2*time.Hour), hello.ID), ErrBadInvite)
	// Tampered role.
	body, sig, _ := strings.Cut(strings.TrimPrefix(tok, invitePrefix), ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	raw = []byte(strings.Replace(string(raw), `"role":"member"`, `"role":"admin"`, 1))
	tampered := invitePrefix + base64.RawURLEncoding.EncodeToString(raw) + "." + sig
	if _, err := ParseInvite(tampered); !errors.Is(err, ErrBadInvite) {
		t.Fatalf("tampered: %v", err)
	}
	// Forged: signed by C, a non-member, claiming nothing false but C's authority.
	forged := invite(t, c, g, Admin, "", hello.ID)
	refuse(sign(t, c, g.Space, TypeMember, Change{Op: OpJoin, Peer: c.id.String(), Invite: forged}, t0.Add(2*time.Second), hello.ID), ErrBadInvite)
	add(join)
	bMsg := sign(t, b, g.Space, "text", map[string]string{"text": "from b"}, t0.Add(3*time.Second), join.ID)
	add(bMsg)
	if got := gr.Current().Role(b.id); got != Member {
		t.Fatalf("b role %q", got)
	}
	// B (member) may not remove A or invite.
	refuse(sign(t, b, g.Space, TypeMember, Change{Op: OpRemove, Peer: a.id.String()}, t0.Add(4*time.Second), bMsg.ID), ErrUnauthorized)
	rm := sign(t, a, g.Space, TypeMember, Change{Op: OpRemove, Peer: b.id.String()}, t0.Add(4*time.Second), bMsg.ID)
	add(rm)
	refuse(sign(t, b, g.Space, "text", map[string]string{"text": "after"}, t0.Add(5*time.Second), rm.ID), ErrUnauthorized)
	if gr.Current().IsMember(b.id) {
		t.Fatal("b still a member")
	}
	// B posting concurrently with its removal (prev before it): accepted,
	// the same on every node.
	add(sign(t, b, g.Space, "text", map[string]string{"text": "concurrent"}, t0.Add(5*time.Second), bMsg.ID))
}

// TestOrderIndependent: nodes that get the same messages in any order
// (holding those whose parents are missing) accept the same set and end
// in the same state.
func TestOrderIndependent(t *testing.T) {
	a, b, x := newActor(t), newActor(t), newActor(t)
	g := genesis(t, a)
	mk := func(act actor, typ string, c any, sec int, prev ...protocol.ID) *protocol.Message {
		return sign(t, act, g.Space, typ, c, t0.Add(time.Duration(sec)*time.Second), prev...)
	}
	addB := mk(a, TypeMember, Change{Op: OpAdd, Peer: b.id.String(), Role: Admin}, 1, g.ID)
	addX := mk(b, TypeMember, Change{Op: OpAdd, Peer: x.id.String(), Role: Member}, 2, addB.ID)
	// Partition: A removes B (so B's addition of X, concurrent, still
	// stands) and removes X; X posts on its side.
	rmX := mk(a, TypeMember, Change{Op: OpRemove, Peer: x.id.String()}, 3, addX.ID)
	xPost := mk(x, "text", map[string]string{"t": "x"}, 3, addX.ID)
	xLate := mk(x, "text", map[string]string{"t": "late"}, 4, rmX.ID, xPost.ID)
	demoteB := mk(a, TypeMember, Change{Op: OpRole, Peer: b.id.String(), Role: Member}, 3, addX.ID)
	bAddsAgain := mk(b, TypeMember, Change{Op: OpAdd, Peer: x.id.String(), Role: Member}, 4, rmX.ID)
	all := []*protocol.Message{addB, addX, rmX, xPost, xLate, demoteB, bAddsAgain}

	var want map[protocol.ID]bool
	var wantMembers []Entry
	for trial := range 50 {
		gr, _ := NewGraph(g)
		order := mrand.Perm(len(all))
		held := map[protocol.ID]*protocol.Message{}
		got := map[protocol.ID]bool{}
		var try func(m *protocol.Message)
		try = func(m *protocol.Message) {
			miss, err := gr.Check(m)
			if len(miss) > 0 {
				held[m.ID] = m
				return
			}
			delete(held, m.ID)
			if err != nil {
				got[m.ID] = false
				return
			}
			got[m.ID] = true
			_ = gr.Add(m)
			for _, h := range held {
				try(h)
			}
		}
		for _, i := range order {
			try(all[i])
		}
		if trial == 0 {
			want, wantMembers = got, gr.Current().Members()
			if !got[xPost.ID] || got[xLate.ID] {
				t.Fatalf("x's concurrent post must stand, its later one must not: %v %v", got[xPost.ID], got[xLate.ID])
			}
			continue
		}
		for id, ok := range want {
			if got[id] != ok {
				t.Fatalf("order %v: %s accepted=%v, first order said %v", order, id, got[id], ok)
			}
		}
		if gm := gr.Current().Members(); len(gm) != len(wantMembers) {
			t.Fatalf("members differ: %v vs %v", gm, wantMembers)
		}
	}
}

// TestGraphForget: an ordinary message added and then forgotten is gone
// (and can be added again); a control message and the genesis are never
// forgotten.
func TestGraphForget(t *testing.T) {
	owner := newActor(t)
	g := genesis(t, owner)
	gr, err := NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	m := sign(t, owner, g.Space, "text", map[string]string{"text": "hi"}, t0.Add(time.Second), g.ID)
	if err := gr.Add(m); err != nil {
		t.Fatal(err)
	}
	if !gr.Forget(m.ID) || gr.Has(m.ID) {
		t.Fatal("an ordinary message was not forgotten")
	}
	if gr.Forget(m.ID) {
		t.Fatal("forgot a message twice")
	}
	if err := gr.Add(m); err != nil || !gr.Has(m.ID) {
		t.Fatalf("added again: %v", err)
	}
	if gr.Forget(g.ID) || !gr.Has(g.ID) {
		t.Fatal("forgot the genesis")
	}
}
