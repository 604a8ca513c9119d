package node

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// BenchmarkReadCaughtUp reads, as the API does (ReadWithin, pages of
// 1,000), the messages a node caught up on by sync in an open, a private
// and a sealed space: what a private space's read costs next to an open
// one's. ns/op is one read of every message; ns/msg a message's share.
func BenchmarkReadCaughtUp(b *testing.B) {
	const msgs = 5000
	ctx := b.Context()
	a := benchNode(b, nil)
	j := benchNode(b, a)
	spaces := map[string]protocol.ID{}
	sp, _, err := a.Join("open-r", nil)
	if err != nil {
		b.Fatal(err)
	}
	spaces["open"] = sp.ID
	for _, sealed := range []bool{false, true} {
		name := map[bool]string{false: "private", true: "sealed"}[sealed]
		sp, err := a.CreatePrivate(ctx, name+"-r", sealed)
		if err != nil {
			b.Fatal(err)
		}
		spaces[name] = sp.ID
	}
	for _, space := range spaces {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < msgs; i += 8 {
					if _, err := a.Send(ctx, space, Post{Content: fmt.Appendf(nil, `{"text":"catch-up %d"}`, i)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	if _, _, err := j.Join("open-r", nil); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"private", "sealed"} {
		_, tok, err := a.Invite(name+"-r", InviteOptions{Peer: j.ID()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := j.JoinInvite(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
	for name, space := range spaces {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			c, _ := j.store.Count(space)
			if c >= msgs {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %d of %d caught up", name, c, msgs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, name := range []string{"open", "private", "sealed"} {
		space := spaces[name]
		prev, bytes, n := 0, 0, 0
		var after store.Cursor
		for {
			page, next, err := j.readStored(space, after, 1000)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range page {
				prev += len(m.Prev)
				bytes += len(m.Wire())
				n++
			}
			if len(page) == 0 {
				break
			}
			after = next
		}
		b.Logf("%s: %d messages, %.1f parents and %d bytes each", name, n, float64(prev)/float64(n), bytes/n)
		b.Run(name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				// Labelled, for a profile of one kind (-tagfocus space=open).
				pprof.Do(ctx, pprof.Labels("space", name), func(context.Context) {
					n = 0
					var after store.Cursor
					for {
						page, next, _, err := j.ReadWithin(space, after, 1000, MaxAnswerBytes)
						if err != nil {
							b.Fatal(err)
						}
						n += len(page)
						if len(page) == 0 {
							break
						}
						after = next
					}
				})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/msg")
		})
	}
}

// benchNode starts a node for a benchmark (see privNode).
func benchNode(b *testing.B, boot *Node) *Node {
	b.Helper()
	cfg := Default()
	cfg.Home, cfg.MDNS, cfg.DHTMode = b.TempDir(), false, "client"
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Rates.Off = true
	if boot != nil {
		for _, ad := range boot.mesh.Addrs() {
			cfg.Bootstrap = append(cfg.Bootstrap, ad.String()+"/p2p/"+boot.ID().String())
		}
	}
	n, err := New(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}
