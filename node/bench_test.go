package node

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// Benchmarks of the local API, end to end through the Unix socket: HTTP,
// JSON, signing, a durable (fsync'd) Badger write and a gossip publish.
//
//	go test ./node -run '^$' -bench . -benchtime 5s

// BenchmarkAPISend: one agent sending one message at a time.
func BenchmarkAPISend(b *testing.B) {
	_, c := startNode(b, nil)
	ctx := context.Background()
	if _, err := c.Join(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	req := api.SendRequest{Content: json.RawMessage(`{"text":"a message of about a hundred bytes, like a short agent finding or status line"}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Send(ctx, "bench", req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}

// BenchmarkAPISendParallel: many agents (or one agent's many goroutines)
// sending into one daemon at once; concurrent writes share fsyncs.
func BenchmarkAPISendParallel(b *testing.B) {
	_, c := startNode(b, nil)
	ctx := context.Background()
	if _, err := c.Join(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	req := api.SendRequest{Content: json.RawMessage(`{"text":"a message of about a hundred bytes, like a short agent finding or status line"}`)}
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Send(ctx, "bench", req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}

// BenchmarkAPIRead10At100k: a 10-message page from a random position of a
// space holding 100,000 messages.
func BenchmarkAPIRead10At100k(b *testing.B) {
	const total = 100_000
	n, c := startNode(b, nil)
	ctx := context.Background()
	sp, _, err := n.Join("big", nil)
	if err != nil {
		b.Fatal(err)
	}
	cursors := fill(b, n, sp.ID, total)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		after := cursors[rand.IntN(len(cursors)-10)]
		page, err := c.Read(ctx, "big", after.String(), 10)
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Messages) != 10 {
			b.Fatalf("page of %d", len(page.Messages))
		}
	}
}

// fill stores total signed messages in a space straight into the store
// (the API path is measured elsewhere) and returns their cursors.
func fill(b *testing.B, n *Node, space protocol.ID, total int) []store.Cursor {
	b.Helper()
	start := time.Now()
	cursors := make([]store.Cursor, total)
	var wg sync.WaitGroup
	var fail sync.Once
	workers := 32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				m, err := protocol.Sign(n.key, protocol.Draft{Space: space, CreatedAt: time.Now(), Type: "text",
					Content: json.RawMessage(fmt.Sprintf(`{"text":"message %d"}`, i))}, n.cfg.Limits)
				if err == nil {
					var e store.Entry
					e, _, err = n.store.Put(context.Background(), storeMessage(m))
					cursors[i] = e.Cursor
				}
				if err != nil {
					fail.Do(func() { b.Error(err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	b.Logf("stored %d messages in %s", total, time.Since(start).Round(time.Millisecond))
	return cursors
}
