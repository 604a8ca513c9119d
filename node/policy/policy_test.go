package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// newPeer returns a fresh peer ID.
func newPeer(tb testing.TB) peer.ID {
	tb.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// trustSet is a Relations of a fixed set of trusted peers.
type trustSet map[peer.ID]bool

func (s trustSet) IsTrusted(p peer.ID) bool { return s[p] }

func TestCallPolicy(t *testing.T) {
	friend, listed, stranger := newPeer(t), newPeer(t), newPeer(t)
	rel := trustSet{friend: true}
	cases := []struct {
		words  []string
		allows []peer.ID
		words2 []string // Words()
		access string
	}{
		{nil, []peer.ID{friend}, []string{"trusted"}, AccessRestricted},
		{[]string{"trusted"}, []peer.ID{friend}, []string{"trusted"}, AccessRestricted},
		{[]string{"anyone"}, []peer.ID{friend, listed, stranger}, []string{"anyone"}, AccessAnyone},
		{[]string{"trusted", "anyone"}, []peer.ID{friend, listed, stranger}, []string{"anyone"}, AccessAnyone},
		{[]string{listed.String()}, []peer.ID{listed}, []string{"peer:" + listed.String()}, AccessRestricted},
		{[]string{"peer:" + listed.String(), "trusted", listed.String()}, []peer.ID{friend, listed}, []string{"trusted", "peer:" + listed.String()}, AccessRestricted},
	}
	for _, tc := range cases {
		p, err := ParseCallPolicy(tc.words)
		if err != nil {
			t.Fatalf("%q: %v", tc.words, err)
		}
		for _, who := range []peer.ID{friend, listed, stranger} {
			if got, want := p.Allows(who, rel), slices.Contains(tc.allows, who); got != want {
				t.Errorf("%q allows %s: %v, want %v", tc.words, who, got, want)
			}
		}
		if got := p.Words(); !slices.Equal(got, tc.words2) {
			t.Errorf("%q: words %q, want %q", tc.words, got, tc.words2)
		}
		if p.Access() != tc.access {
			t.Errorf("%q: access %q, want %q", tc.words, p.Access(), tc.access)
		}
	}
	// The zero policy is the default: trusted peers only.
	var zero CallPolicy
	if !zero.Allows(friend, rel) || zero.Allows(stranger, rel) || zero.Allows(friend, nil) {
		t.Error("the zero policy must allow the trusted peers and no one else")
	}
	for _, bad := range []string{"everyone", "peer:nope", "space:lab", ""} {
		if _, err := ParseCallPolicy([]string{bad}); err == nil {
			t.Errorf("%q: parsed", bad)
		}
	}
}

func TestTrustList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trust.json")
	tl, err := LoadTrust(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newPeer(t), newPeer(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, isNew, err := tl.Add(a, "alice", t0); err != nil || !isNew {
		t.Fatalf("add a: new %v, %v", isNew, err)
	}
	if _, _, err := tl.Add(b, "", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ta, isNew, err := tl.Add(a, "alice2", t0.Add(2*time.Hour))
	if err != nil || isNew || ta.Name != "alice2" || !ta.Added.Equal(t0) {
		t.Fatalf("rename a: %+v new %v %v; want the name changed, added kept", ta, isNew, err)
	}
	if !tl.IsTrusted(a) || !tl.IsTrusted(b) || tl.IsTrusted(newPeer(t)) {
		t.Fatal("Has is wrong")
	}
	// Durable: a new load sees the same list.
	again, err := LoadTrust(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.List(), tl.List()) || len(again.List()) != 2 {
		t.Fatalf("reloaded %+v, want %+v", again.List(), tl.List())
	}
	if removed, err := tl.Remove(a); err != nil || !removed {
		t.Fatalf("remove a: %v %v", removed, err)
	}
	if removed, err := tl.Remove(a); err != nil || removed {
		t.Fatalf("remove a again: %v %v", removed, err)
	}
	again, _ = LoadTrust(path)
	if again.IsTrusted(a) || !again.IsTrusted(b) {
		t.Fatalf("after remove, reloaded %+v", again.List())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("trust file: %v %v, want mode 0600", fi, err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTrust(path); err == nil {
		t.Fatal("a corrupt trust file loaded")
	}
}

// clock is a test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func admitN(g *Gate, p peer.ID, n int, now time.Time) (accepted int) {
	for range n {
		if g.Admit(p, false, now) == Accept {
			accepted++
		}
	}
	return accepted
}

// TestGateRate: a stranger gets its burst at once, then its rate; the
// clock going back gives nothing; trusted peers are not limited.
func TestGateRate(t *testing.T) {
	c := newClock()
	g := NewGate(DMConfig{Rate: 10, Burst: 50, Quota: 1 << 20, AllRate: 1000, AllBurst: 1000, AllQuota: 1 << 20})
	s, friend := newPeer(t), newPeer(t)
	if n := admitN(g, s, 100, c.now()); n != 50 {
		t.Fatalf("burst: %d accepted, want 50", n)
	}
	if v := g.Admit(s, false, c.now()); v != RateLimited {
		t.Fatalf("past the burst: %v", v)
	}
	c.advance(time.Second)
	if n := admitN(g, s, 100, c.now()); n != 10 {
		t.Fatalf("after 1s: %d accepted, want 10", n)
	}
	c.advance(-time.Minute)
	if n := admitN(g, s, 10, c.now()); n != 0 {
		t.Fatalf("clock back: %d accepted, want 0", n)
	}
	c.advance(time.Minute + 300*time.Millisecond)
	if n := admitN(g, s, 10, c.now()); n != 3 {
		t.Fatalf("after 0.3s: %d accepted, want 3", n)
	}
	c.advance(time.Hour)
	if n := admitN(g, s, 100, c.now()); n != 50 {
		t.Fatalf("after an hour idle: %d accepted, want the burst of 50 (no more)", n)
	}
	for range 1000 {
		if v := g.Admit(friend, true, c.now()); v != Accept {
			t.Fatalf("trusted peer: %v", v)
		}
	}
}

// TestGateAllStrangers: fresh identities share the strangers' rate and
// quota.
func TestGateAllStrangers(t *testing.T) {
	c := newClock()
	g := NewGate(DMConfig{Rate: 10, Burst: 5, Quota: 100, AllRate: 20, AllBurst: 30, AllQuota: 1 << 20})
	accepted := 0
	for range 20 {
		accepted += admitN(g, newPeer(t), 5, c.now())
	}
	if accepted != 30 {
		t.Fatalf("20 fresh identities × 5: %d accepted, want the strangers' burst of 30", accepted)
	}
	c.advance(time.Second)
	accepted = 0
	for range 20 {
		accepted += admitN(g, newPeer(t), 5, c.now())
	}
	if accepted != 20 {
		t.Fatalf("a second later: %d accepted, want the strangers' rate of 20", accepted)
	}
}

// TestGateQuota: a stranger holds at most Quota messages, all strangers
// AllQuota; a refusal for quota spends no rate; Release, Forget and
// SetHeld give room back; trusted peers are not counted.
func TestGateQuota(t *testing.T) {
	c := newClock()
	g := NewGate(DMConfig{Rate: 1000, Burst: 1000, Quota: 3, AllRate: 1000, AllBurst: 1000, AllQuota: 5})
	a, b, x, friend := newPeer(t), newPeer(t), newPeer(t), newPeer(t)
	if n := admitN(g, a, 10, c.now()); n != 3 {
		t.Fatalf("a: %d accepted, want its quota of 3", n)
	}
	if v := g.Admit(a, false, c.now()); v != OverQuota {
		t.Fatalf("a over quota: %v", v)
	}
	if n := admitN(g, b, 10, c.now()); n != 2 {
		t.Fatalf("b: %d accepted, want the 2 left of all strangers' 5", n)
	}
	if v := g.Admit(x, false, c.now()); v != OverQuota {
		t.Fatalf("x with all strangers over quota: %v", v)
	}
	if v := g.Admit(friend, true, c.now()); v != Accept {
		t.Fatalf("trusted with strangers over quota: %v", v)
	}
	if mine, all := g.Held(a); mine != 3 || all != 5 {
		t.Fatalf("held %d/%d, want 3/5", mine, all)
	}
	g.Release(a) // a duplicate: not stored
	if v := g.Admit(x, false, c.now()); v != Accept {
		t.Fatalf("x after a release: %v", v)
	}
	g.Forget(a) // a is trusted now
	if mine, all := g.Held(a); mine != 0 || all != 3 {
		t.Fatalf("after forget: held %d/%d, want 0/3", mine, all)
	}
	g.SetHeld(map[peer.ID]int{b: 1}) // a recount: the rest expired
	if mine, all := g.Held(b); mine != 1 || all != 1 {
		t.Fatalf("after recount: held %d/%d, want 1/1", mine, all)
	}
	// Refusals for quota spent no tokens: the rate is untouched.
	g2 := NewGate(DMConfig{Rate: 1, Burst: 2, Quota: 1, AllRate: 1, AllBurst: 2, AllQuota: 100})
	if n := admitN(g2, a, 50, c.now()); n != 1 {
		t.Fatalf("quota 1: %d accepted", n)
	}
	g2.Release(a)
	if v := g2.Admit(a, false, c.now()); v != Accept {
		t.Fatalf("refusals for quota spent the rate: %v", v)
	}
}

func TestGatePolicyTrusted(t *testing.T) {
	g := NewGate(DMConfig{Policy: DMTrusted})
	now := time.Now()
	if v := g.Admit(newPeer(t), false, now); v != Forbidden {
		t.Fatalf("stranger under policy trusted: %v", v)
	}
	if v := g.Admit(newPeer(t), true, now); v != Accept {
		t.Fatalf("trusted under policy trusted: %v", v)
	}
}

// TestGatePrune: the buckets of strangers that went quiet are dropped, so
// memory follows the strangers sending now, not all there ever were.
func TestGatePrune(t *testing.T) {
	c := newClock()
	g := NewGate(DMConfig{Rate: 10, Burst: 5, Quota: 1 << 20, AllRate: 1e9, AllBurst: 1 << 30, AllQuota: 1 << 30})
	for i := range 3 * minPrune {
		g.Admit(peer.ID(fmt.Sprint("stranger", i)), false, c.now())
		c.advance(time.Second) // every earlier bucket has refilled
	}
	if n := len(g.buckets); n >= minPrune {
		t.Fatalf("%d buckets kept, want fewer than %d", n, minPrune)
	}
}

func TestDMConfigValidate(t *testing.T) {
	if err := (DMConfig{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for _, bad := range []DMConfig{{Policy: "nobody"}, {Rate: -1}, {Quota: -1}, {AllBurst: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
	if d := (DMConfig{Policy: DMTrusted, Quota: 7}).WithDefaults(); d.Policy != DMTrusted || d.Quota != 7 || d.Rate != 10 || d.AllQuota != 10000 {
		t.Fatalf("defaults: %+v", d)
	}
}
