package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestSweepSendLatencyFigures measures what a durable send waits while a
// sweep deletes a large backlog: it fills a store on disk with
// WEFT_SWEEP_FIGURES messages (e.g. 100000) across 10 spaces, each naming
// the one before it in its space, all expiring at once; then a sender
// makes one durable Put every 2 ms, first for 3 s without a sweep, then
// while one Sweep deletes the backlog. It logs the send latency
// (p50/p99/max) of both phases, the sweep's throughput, and how long
// lock probes (mutateMu shared, as a Put takes it) waited. Figures, not
// assertions: it runs only when WEFT_SWEEP_FIGURES is set (go test -run
// SweepSendLatency -v ./store).
func TestSweepSendLatencyFigures(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv("WEFT_SWEEP_FIGURES"))
	if total <= 0 {
		t.Skip("set WEFT_SWEEP_FIGURES to a number of messages (e.g. 100000) to measure")
	}
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	s := openSweepTestAt(t, clock.Load)

	// The backlog: relayed batches, as messages from the network come.
	const spaces = 10
	raw := make([]byte, 256)
	for i := range raw {
		raw[i] = byte('a' + i%26)
	}
	expires := clock.Load() + 1000
	start := time.Now()
	last := make([]protocol.ID, spaces)
	batch := make([]Message, 0, 1000)
	for n := range total {
		sp := n % spaces
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(n))
		m := Message{
			ID:      protocol.MessageID(b[:]),
			Space:   protocol.SpaceID(fmt.Sprint("backlog", sp)),
			Time:    clock.Load() - int64(total-n),
			Expires: expires,
			Raw:     raw,
			From:    fmt.Sprint("sender", n%7),
		}
		if !last[sp].IsZero() {
			m.Prev = []protocol.ID{last[sp]}
		}
		last[sp] = m.ID
		batch = append(batch, m)
		if len(batch) == cap(batch) || n == total-1 {
			res, err := s.PutBatch(t.Context(), batch, Quota{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			batch = batch[:0]
		}
	}
	t.Logf("filled %d messages in %v", total, time.Since(start).Round(time.Millisecond))

	live := protocol.SpaceID("live")
	var sent int
	var prev protocol.ID
	// send makes durable Puts every 2 ms until stop is closed and returns
	// their latencies.
	send := func(stop <-chan struct{}) []time.Duration {
		var lat []time.Duration
		next := time.Now()
		for {
			select {
			case <-stop:
				return lat
			default:
			}
			if d := time.Until(next); d > 0 {
				time.Sleep(d) // pacing, not synchronisation
			}
			next = next.Add(2 * time.Millisecond)
			sent++
			m := Message{
				ID: protocol.MessageID([]byte(fmt.Sprint("send", sent))), Space: live,
				Time: clock.Load(), Raw: raw, From: "me",
			}
			if !prev.IsZero() {
				m.Prev = []protocol.ID{prev}
			}
			t0 := time.Now()
			if _, _, err := s.PutWithin(t.Context(), m, Quota{}); err != nil {
				t.Error(err)
				return lat
			}
			lat = append(lat, time.Since(t0))
			prev = m.ID
		}
	}
	// probe takes mutateMu shared every 2 ms until stop and returns its
	// waits.
	probe := func(stop <-chan struct{}) []time.Duration {
		var lat []time.Duration
		for {
			select {
			case <-stop:
				return lat
			case <-time.After(2 * time.Millisecond):
			}
			t0 := time.Now()
			s.mutateMu.RLock()
			lat = append(lat, time.Since(t0))
			s.mutateMu.RUnlock()
		}
	}
	phase := func(name string, work func()) {
		stop := make(chan struct{})
		var lat, waits []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { lat = send(stop) })
		wg.Go(func() { waits = probe(stop) })
		work()
		close(stop)
		wg.Wait()
		t.Logf("%s: %d sends: %s; lock waits: %s", name, len(lat), quantiles(lat), quantiles(waits))
	}

	if os.Getenv("WEFT_SWEEP_INDEX") != "" {
		// The range indexes, as a node that syncs or counts the spaces has.
		for sp := range spaces {
			if _, err := s.Count(protocol.SpaceID(fmt.Sprint("backlog", sp))); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase("no sweep", func() { time.Sleep(3 * time.Second) })
	clock.Add(2000)
	phase("sweep", func() {
		t0 := time.Now()
		n, err := s.Sweep(context.Background())
		if err != nil {
			t.Error(err)
		}
		d := time.Since(t0)
		t.Logf("sweep removed %d in %v: %.0f messages/s", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
		if n != total {
			t.Errorf("sweep removed %d, want %d", n, total)
		}
	})
}

// quantiles formats lat's p50, p99 and max.
func quantiles(lat []time.Duration) string {
	if len(lat) == 0 {
		return "none"
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	r := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
	return fmt.Sprintf("p50 %s p99 %s max %s", r(q(0.5)), r(q(0.99)), r(lat[len(lat)-1]))
}
