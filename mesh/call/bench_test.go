package call

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// latencies records one duration per benchmark iteration and reports their
// median and 99th percentile in µs.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	b.Helper()
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := min(len(s)-1, int(q*float64(len(s))))
		return float64(s[i]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkInvoke: a unary call's round trip through the call protocol on
// loopback TCP (one new stream per call).
func BenchmarkInvoke(b *testing.B) {
	p := newPair(b, HandlerFunc(func(_ context.Context, c *Call) {
		c.Final(c.Request.Input, nil)
	}))
	connectWarm(b, p)
	ctx := context.Background()
	req := protocol.CallRequest{Name: "echo", Input: json.RawMessage(`{"n":1}`)}
	lat := make(latencies, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if _, err := p.caller.Invoke(ctx, p.b.ID(), req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b)
}

// echoProtocol is a test protocol that answers every frame with itself.
const echoProtocol = "/weft/test/echo/1.0.0"

// BenchmarkRawStreamRTT is the floor under BenchmarkInvoke: a small frame
// echoed over a plain libp2p stream between the same kind of hosts, on one
// stream reused and on a new stream per round trip.
func BenchmarkRawStreamRTT(b *testing.B) {
	a, h := newHost(b), newHost(b)
	h.SetStreamHandler(echoProtocol, func(st network.Stream) {
		defer st.Close()
		r, w := bufio.NewReader(st), bufio.NewWriter(st)
		for {
			f, err := frame.Read(r, 1<<10)
			if err != nil {
				return
			}
			if frame.Write(w, f) != nil || w.Flush() != nil {
				st.Reset()
				return
			}
		}
	})
	connect(b, a, h)
	msg := []byte(`{"name":"echo","input":{"n":1}}`)
	ctx := context.Background()
	roundTrip := func(r *bufio.Reader, w *bufio.Writer) {
		if err := frame.Write(w, msg); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if _, err := frame.Read(r, 1<<10); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("reuse", func(b *testing.B) {
		st, err := a.NewStream(ctx, h.ID(), echoProtocol)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		r, w := bufio.NewReader(st), bufio.NewWriter(st)
		roundTrip(r, w) // protocol negotiation
		lat := make(latencies, 0, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			roundTrip(r, w)
			lat = append(lat, time.Since(t0))
		}
		lat.report(b)
	})

	b.Run("new-stream", func(b *testing.B) {
		lat := make(latencies, 0, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			st, err := a.NewStream(ctx, h.ID(), echoProtocol)
			if err != nil {
				b.Fatal(err)
			}
			roundTrip(bufio.NewReader(st), bufio.NewWriter(st))
			st.Close()
			lat = append(lat, time.Since(t0))
		}
		lat.report(b)
	})
}

// BenchmarkStreamFrames: throughput of a stream call's small deltas, one
// call of b.N deltas.
func BenchmarkStreamFrames(b *testing.B) {
	p := newPair(b, HandlerFunc(func(_ context.Context, c *Call) {
		n, err := strconv.Atoi(string(c.Request.Input))
		if err != nil {
			c.Fail(protocol.Errorf(protocol.CodeBadRequest, "%v", err))
			return
		}
		for i := range n {
			if c.Delta(fmt.Appendf(nil, `{"i":%d}`, i)) != nil {
				return
			}
		}
		c.Final(nil, nil)
	}))
	connectWarm(b, p)
	b.ReportAllocs()
	b.ResetTimer()
	cs, err := p.caller.Call(context.Background(), p.b.ID(), protocol.CallRequest{
		Name: "count", Stream: true, Input: json.RawMessage(strconv.Itoa(b.N)),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	deltas := 0
	for {
		f, err := cs.Next()
		if err != nil {
			b.Fatal(err)
		}
		if f.Kind == protocol.FrameDelta {
			deltas++
		}
		if f.Kind == protocol.FrameFinal {
			break
		}
	}
	b.StopTimer()
	if deltas != b.N {
		b.Fatalf("%d deltas, want %d", deltas, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
