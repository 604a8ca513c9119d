package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// Benchmarks of direct calls through two daemons, each agent on its own
// daemon's Unix socket:
//
//	caller ─HTTP─▶ daemon A ─libp2p stream─▶ daemon B ─HTTP─▶ handler agent
//
//	go test ./node -run '^$' -bench 'Invoke|StreamFrames' -benchtime 3s

// serveEcho registers an echo handler (unary and stream) on c and waits
// until the daemon has it.
func serveEcho(b testing.TB, c *client.Client, deltas int) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Serve(ctx, api.HandlerRequest{Names: []string{"echo", "count"}, Concurrency: 256},
			func(ctx context.Context, call api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
				if call.Name == "count" {
					for i := range deltas {
						if err := send(json.RawMessage(strconv.Itoa(i))); err != nil {
							return nil, nil, err
						}
					}
					return json.RawMessage(`"done"`), nil, nil
				}
				return call.Input, nil, nil
			}, func() { close(ready) })
	}()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		b.Fatal("handler not registered")
	}
}

// percentiles reports p50 and p99 of ds in µs.
func percentiles(b *testing.B, ds []time.Duration, prefix string) {
	slices.Sort(ds)
	p := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(p(0.50), prefix+"p50-µs")
	b.ReportMetric(p(0.99), prefix+"p99-µs")
}

// BenchmarkInvoke: a unary call through both daemons' APIs, one at a time,
// with the raw libp2p stream round trip between the same two daemons
// measured in the same run (the floor under any call protocol).
func BenchmarkInvoke(b *testing.B) {
	a, ca, nb, cb := pair(b)
	trust(b, cb, a)
	serveEcho(b, cb, 0)
	ctx := context.Background()
	req := api.InvokeRequest{Peer: nb.ID().String(), Name: "echo", Input: json.RawMessage(`{"text":"a small request of about a hundred bytes, like a tool call's arguments"}`)}
	for range 100 { // warm up connections
		if _, err := ca.Invoke(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	raw := rawRTT(b, a, nb, 2000)
	lat := make([]time.Duration, 0, 1<<16)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := ca.Invoke(ctx, req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	percentiles(b, lat, "invoke-")
	percentiles(b, raw, "raw-rtt-")
}

// rawRTT measures n round trips of a 100-byte frame on one libp2p stream
// from a to b (an echo protocol registered for the benchmark).
func rawRTT(b testing.TB, a, nb *Daemon, n int) []time.Duration {
	const proto = "/weft-bench/echo/1"
	nb.node.Mesh().Host().SetStreamHandler(proto, func(s network.Stream) {
		defer s.Close()
		io.Copy(s, s)
	})
	b.Cleanup(func() { nb.node.Mesh().Host().RemoveStreamHandler(proto) })
	s, err := a.node.Mesh().Host().NewStream(context.Background(), nb.ID(), proto)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	msg := make([]byte, 100)
	buf := make([]byte, 100)
	r := bufio.NewReader(s)
	out := make([]time.Duration, 0, n)
	for i := range n + 100 {
		t0 := time.Now()
		if _, err := s.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			b.Fatal(err)
		}
		if i >= 100 {
			out = append(out, time.Since(t0))
		}
	}
	return out
}

// BenchmarkInvokeParallel: 16 callers at once.
func BenchmarkInvokeParallel(b *testing.B) {
	a, ca, nb, cb := pair(b)
	trust(b, cb, a)
	serveEcho(b, cb, 0)
	ctx := context.Background()
	req := api.InvokeRequest{Peer: nb.ID().String(), Name: "echo", Input: json.RawMessage(`{"n":1}`)}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ca.Invoke(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkStreamFrames: one stream call of 100,000 small deltas, from the
// handler agent's HTTP body through both daemons to the caller's NDJSON;
// reports frames per second.
func BenchmarkStreamFrames(b *testing.B) {
	const deltas = 100_000
	a, ca, nb, cb := pair(b)
	trust(b, cb, a)
	serveEcho(b, cb, deltas)
	ctx := context.Background()
	req := api.InvokeRequest{Peer: nb.ID().String(), Name: "count"}
	b.ResetTimer()
	frames := 0
	for b.Loop() {
		want := 0
		err := ca.InvokeStream(ctx, req, func(f api.Frame) error {
			frames++
			if f.Kind == "delta" {
				if string(f.Data) != strconv.Itoa(want) {
					b.Fatalf("delta %s, want %d", f.Data, want)
				}
				want++
			}
			return nil
		})
		if err != nil || want != deltas {
			b.Fatalf("stream: %d deltas, %v", want, err)
		}
	}
	b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
}
