package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
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
	sp, _, err := n.node.Join("big", nil)
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
func fill(b *testing.B, n *Daemon, space protocol.ID, total int) []store.Cursor {
	b.Helper()
	start := time.Now()
	cursors := make([]store.Cursor, total)
	var wg sync.WaitGroup
	var fail sync.Once
	workers := 32
	key := keyOf(b, n)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				m, err := protocol.Sign(key, protocol.Draft{Space: space, CreatedAt: time.Now(), Type: "text",
					Content: json.RawMessage(fmt.Sprintf(`{"text":"message %d"}`, i))}, n.cfg.Limits)
				if err == nil {
					var e node.Message
					e, _, err = n.node.Accept(context.Background(), m)
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

// BenchmarkCatchUp: a node that joins a space late, knowing only one
// member's address, fetches its whole history. Timed from the new daemon's
// start to the moment it holds every message; each fetched message is
// validated and stored durably. Run with -benchtime 1x (setting up the
// 100k space takes a while).
func BenchmarkCatchUp(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			a, _ := startNode(b, nil)
			sp, _, err := a.node.Join("catchup", nil)
			if err != nil {
				b.Fatal(err)
			}
			sendMany(b, a, sp.ID, n, 8, "history")
			var bytesIn, bytesOut int64
			for b.Loop() {
				c, cc, stop := runNode(b, bootstrapTo(a))
				if _, err := cc.Join(context.Background(), "catchup"); err != nil {
					b.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Minute)
				for count(b, c, sp.ID) < n {
					if time.Now().After(deadline) {
						b.Fatalf("caught up on %d of %d", count(b, c, sp.ID), n)
					}
					time.Sleep(5 * time.Millisecond)
				}
				b.StopTimer()
				// Session stats are recorded when the session ends, just
				// after the last message is stored.
				for c.node.Mesh().SyncStats().Received < n && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				st := c.node.Mesh().SyncStats()
				bytesIn += st.BytesReceived
				bytesOut += st.BytesSent
				stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(bytesIn)/float64(b.N), "bytes-in/op")
			b.ReportMetric(float64(bytesOut)/float64(b.N), "bytes-out/op")
		})
	}
}
