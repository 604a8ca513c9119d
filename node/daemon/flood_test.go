package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// kib is a 1 KiB text message's content.
func kib(i int) string {
	return fmt.Sprintf(`{"text":%q}`, fmt.Sprint(i, " ", strings.Repeat("x", 1000)))
}

// TestSpaceQuota: a stranger's messages stop being stored once it holds
// its quota in the space, and the space holds no more than its quota; an
// agent of the node itself that sends past its quota gets a clear error.
// Rates are off, so only the quotas bind.
func TestSpaceQuota(t *testing.T) {
	const spaceQuota, senderQuota = 24 << 10, 8 << 10
	a, ca := startNode(t, func(c *Config) {
		c.Rates = mesh.RateLimits{Off: true}
		c.SpaceLimits = store.SpaceLimits{MaxBytes: spaceQuota, MaxSenderBytes: senderQuota}
	})
	ctx := context.Background()
	sp, err := ca.Join(ctx, "quota")
	if err != nil {
		t.Fatal(err)
	}
	space, _ := protocol.ParseID(sp.ID)
	st := a.node.Store()

	raws := []*rawPeer{newRawPeer(t, a, space), newRawPeer(t, a, space), newRawPeer(t, a, space), newRawPeer(t, a, space)}
	for i := range 30 {
		for _, r := range raws {
			if err := r.topic.Publish(ctx, r.sign(t, space, kib(i)).Encode()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each gets about 7 of its 30 in (8 KiB), until the space's 24 KiB are
	// full: then nobody's.
	eventually(t, 30*time.Second, "the space to fill to its quota", func() bool {
		u, _ := st.Usage(space)
		return u.Bytes > spaceQuota-2<<10
	})
	time.Sleep(500 * time.Millisecond) // anything still on its way
	u, _ := st.Usage(space)
	if u.Bytes > spaceQuota {
		t.Errorf("space holds %d bytes, quota %d", u.Bytes, spaceQuota)
	}
	for i, r := range raws {
		su, _ := st.SenderUsage(space, r.id.String())
		if su.Bytes > senderQuota {
			t.Errorf("raw peer %d holds %d bytes, quota %d per sender", i, su.Bytes, senderQuota)
		}
		t.Logf("raw peer %d: %d messages, %d bytes stored of 30 sent", i, su.Count, su.Bytes)
	}
	if got, err := ca.Spaces(ctx); err != nil || len(got) != 1 || got[0].Bytes != u.Bytes || got[0].Limits == nil || got[0].Limits.MaxBytes != spaceQuota {
		t.Errorf("space as the API shows it: %+v, %v", got, err)
	}

	// The node's own agent: the space is full, and says so.
	_, err = ca.SendText(ctx, "quota", strings.Repeat("y", 1000))
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeQuotaExceeded || ae.Status != 507 || !strings.Contains(ae.Message, "quota") {
		t.Fatalf("send over quota: %v (%+v), want 507 quota_exceeded", err, ae)
	}
	t.Logf("send over quota: %d %s: %s", ae.Status, ae.Code, ae.Message)
	// A space with room of its own takes it.
	if _, err := ca.JoinSpace(ctx, api.JoinRequest{Name: "quota", Limits: &api.SpaceLimits{MaxBytes: 1 << 20, MaxSenderBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.SendText(ctx, "quota", "room again"); err != nil {
		t.Errorf("send after raising the space's quota: %v", err)
	}
}

// TestSpaceMaxMessageSize: a space's own message size limit refuses an
// agent's larger post (413) and ignores a larger gossiped message without
// holding it against its sender, who is still heard.
func TestSpaceMaxMessageSize(t *testing.T) {
	a, ca := startNode(t, nil)
	ctx := context.Background()
	sp, err := ca.JoinSpace(ctx, api.JoinRequest{Name: "small", Limits: &api.SpaceLimits{MaxMessageSize: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if sp.Limits == nil || sp.Limits.MaxMessageSize != 1024 {
		t.Errorf("joined space's limits: %+v", sp.Limits)
	}
	space, _ := protocol.ParseID(sp.ID)
	_, err = ca.SendText(ctx, "small", strings.Repeat("z", 2000))
	if !client.IsCode(err, api.CodeTooLarge) {
		t.Errorf("send of 2 KB to a space of 1 KiB messages: %v, want too_large", err)
	}
	raw := newRawPeer(t, a, space)
	big := raw.sign(t, space, fmt.Sprintf(`{"text":%q}`, strings.Repeat("b", 2000)))
	small := raw.sign(t, space, `{"text":"small"}`)
	for _, m := range []*protocol.Message{big, small} {
		if err := raw.topic.Publish(ctx, m.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the small message", func() bool {
		ok, _ := a.node.Store().Has(small.ID)
		return ok
	})
	if ok, _ := a.node.Store().Has(big.ID); ok {
		t.Error("a message over the space's size limit was stored")
	}
	eventually(t, 5*time.Second, "a score for the raw peer", func() bool {
		_, ok := a.node.Mesh().GossipScore(raw.id)
		return ok
	})
	if s, _ := a.node.Mesh().GossipScore(raw.id); s < 0 {
		t.Errorf("the sender of a message over this node's own size limit has score %v, want no penalty", s)
	}
}

// TestOwnPostsPaced: the node paces its own agents' posts below the rate
// its peers allow one author, waiting a little, then refusing with
// rate_limited.
func TestOwnPostsPaced(t *testing.T) {
	_, ca := startNode(t, func(c *Config) {
		c.Rates = mesh.RateLimits{Author: mesh.Rate{PerSecond: 5, Burst: 5}}
	})
	ctx := context.Background()
	if _, err := ca.Join(ctx, "paced"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 12 {
		if _, err := ca.SendText(ctx, "paced", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// 80% of the rate and burst: 4 at once, then 4 a second.
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("12 posts took %v, want them paced at 4/s after a burst of 4 (about 2 s)", took)
	}

	_, cb := startNode(t, func(c *Config) {
		c.Rates = mesh.RateLimits{Author: mesh.Rate{PerSecond: 0.1, Burst: 1}}
	})
	if _, err := cb.Join(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.SendText(ctx, "slow", "first"); err != nil {
		t.Fatal(err)
	}
	_, err := cb.SendText(ctx, "slow", "too soon")
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeRateLimited || ae.Status != 429 {
		t.Errorf("post over the pace: %v, want 429 rate_limited", err)
	}
}

// TestStrangersShareARate: authors new to the node share the strangers'
// rate until they have been members for the probation; with no
// probation, each author has its own rate after its first message.
func TestStrangersShareARate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		probation time.Duration
		wantMin   int // messages stored of 2 × 20
		wantMax   int
	}{
		{"strangers", time.Hour, 5, 6},
		{"members at once", -1, 30, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ca := startNode(t, func(c *Config) {
				c.Rates = mesh.RateLimits{
					Author:    mesh.Rate{PerSecond: 0.01, Burst: 20},
					Strangers: mesh.Rate{PerSecond: 0.01, Burst: 5},
					Peer:      mesh.Rate{PerSecond: 1000, Burst: 1000},
				}
				c.StrangerProbation = tc.probation
			})
			ctx := context.Background()
			sp, err := ca.Join(ctx, "members")
			if err != nil {
				t.Fatal(err)
			}
			space, _ := protocol.ParseID(sp.ID)
			raws := []*rawPeer{newRawPeer(t, a, space), newRawPeer(t, a, space)}
			publish := func(i int) {
				for _, r := range raws {
					m := r.sign(t, space, fmt.Sprintf(`{"text":"%d"}`, i))
					if err := r.topic.Publish(ctx, m.Encode()); err != nil {
						t.Fatal(err)
					}
				}
			}
			stored := func() (n int, all bool) {
				all = true
				for _, r := range raws {
					su, _ := a.node.Store().SenderUsage(space, r.id.String())
					n += int(su.Count)
					all = all && su.Count > 0
				}
				return n, all
			}
			// An author is known from its first message stored on: wait
			// for both, however loaded the machine, before the rest.
			publish(0)
			eventually(t, 30*time.Second, "each author's first message stored", func() bool { _, all := stored(); return all })
			for i := 1; i < 20; i++ {
				publish(i)
			}
			eventually(t, 30*time.Second, fmt.Sprintf("at least %d of the 40 stored", tc.wantMin), func() bool { n, _ := stored(); return n >= tc.wantMin })
			time.Sleep(time.Second) // anything else on its way is through by then
			n, _ := stored()
			if n < tc.wantMin || n > tc.wantMax {
				t.Errorf("%d of the 40 messages of 2 new authors stored, want %d–%d", n, tc.wantMin, tc.wantMax)
			}
			t.Logf("%s: %d of 40 stored, stats %+v", tc.name, n, a.node.Mesh().FloodStats())
		})
	}
}

// TestNewAuthorBurstNotPenalised: with the default rates, a node new to
// its peers that posts as fast as its pacer lets it is never over a
// peer's bucket, so the peer neither ignores its posts nor lowers its
// score: in an open space it is paced within the strangers' share (which
// it is in at a peer that has not known it for the probation), in a
// private space the members know it at once (they hold its membership)
// and its posts get an author's rate.
func TestNewAuthorBurstNotPenalised(t *testing.T) {
	const posts = 150 // over the strangers' burst (100): unpaced, they would be penalised
	for _, private := range []bool{false, true} {
		t.Run(map[bool]string{false: "open", true: "private"}[private], func(t *testing.T) {
			rates := func(c *Config) {
				if private { // strangers get next to nothing: a's burst is within only if b knows it
					c.Rates = mesh.DefaultRateLimits()
					c.Rates.Strangers = mesh.Rate{PerSecond: 10, Burst: 20}
				}
			}
			a, ca := startNode(t, rates)
			b, cb := startNode(t, func(c *Config) { rates(c); c.Bootstrap = []string{a.Addrs()[0].String()} })
			ctx := context.Background()
			var space string
			if private {
				sp, err := ca.CreatePrivate(ctx, "burst")
				if err != nil {
					t.Fatal(err)
				}
				inv, err := ca.Invite(ctx, "burst", api.InviteRequest{Peer: b.ID().String()})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cb.JoinInvite(ctx, inv.Token); err != nil {
					t.Fatal(err)
				}
				space = sp.ID
			} else {
				sp, err := ca.Join(ctx, "burst")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cb.Join(ctx, "burst"); err != nil {
					t.Fatal(err)
				}
				space = sp.ID
			}
			id, _ := protocol.ParseID(space)
			eventually(t, 10*time.Second, "each on the other's topic", func() bool {
				return slices.Contains(b.node.Mesh().SpacePeers(id), a.ID()) && slices.Contains(a.node.Mesh().SpacePeers(id), b.ID())
			})
			// 16 agents at once: a burst, as a coordinator fanning out tasks.
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := w; i < posts; i += 16 {
						if _, err := ca.SendText(ctx, space, fmt.Sprint(i)); err != nil {
							t.Errorf("post %d: %v", i, err)
							return
						}
					}
				})
			}
			wg.Wait()
			eventually(t, 20*time.Second, "b to hold every post", func() bool {
				su, _ := b.node.Store().SenderUsage(id, a.ID().String())
				return su.Count >= posts
			})
			st := b.node.Mesh().FloodStats()
			if st != (mesh.FloodStats{}) {
				t.Errorf("b ignored some of a's posts as over its rates: %+v", st)
			}
			if s, _ := b.node.Mesh().GossipScore(a.ID()); s < 0 {
				t.Errorf("b scores a %v after its burst, want no penalty", s)
			}
		})
	}
}
