package store_test

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

const benchRawSize = 256

// benchMsg returns message n of space: a unique ID, created at n ms and
// benchRawSize raw bytes.
func benchMsg(space protocol.ID, n uint64, raw []byte) store.Message {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return store.Message{ID: protocol.MessageID(b[:]), Space: space, Time: int64(n), Raw: raw}
}

func benchRaw() []byte {
	raw := make([]byte, benchRawSize)
	for i := range raw {
		raw[i] = byte('a' + i%26)
	}
	return raw
}

// BenchmarkPut measures one durable (fsync'd) Put at a time on disk.
func BenchmarkPut(b *testing.B) {
	s := openDisk(b, b.TempDir())
	sp, raw := protocol.SpaceID("bench"), benchRaw()
	b.SetBytes(benchRawSize)
	b.ReportAllocs()
	var n uint64
	for b.Loop() {
		n++
		if _, _, err := s.Put(b.Context(), benchMsg(sp, n, raw)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutParallel measures concurrent durable Puts on disk; group
// commit lets them share fsyncs, so ns/op falls well below BenchmarkPut's.
func BenchmarkPutParallel(b *testing.B) {
	s := openDisk(b, b.TempDir())
	sp, raw := protocol.SpaceID("bench"), benchRaw()
	b.SetBytes(benchRawSize)
	b.ReportAllocs()
	b.SetParallelism(4) // 4 × GOMAXPROCS writers
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.Put(b.Context(), benchMsg(sp, n.Add(1), raw)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// fill puts messages 1..total into sp concurrently.
func fill(b *testing.B, s *store.Store, sp protocol.ID, total uint64) {
	b.Helper()
	const writers = 128
	raw := benchRaw()
	var (
		next atomic.Uint64
		wg   sync.WaitGroup
	)
	for range writers {
		wg.Go(func() {
			for n := next.Add(1); n <= total; n = next.Add(1) {
				if _, _, err := s.Put(b.Context(), benchMsg(sp, n, raw)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// BenchmarkRead10At100k reads a 10-message page from a random cursor of a
// space holding 100,000 messages on disk.
func BenchmarkRead10At100k(b *testing.B) {
	const total, page = 100_000, 10
	s := openDisk(b, b.TempDir())
	sp := protocol.SpaceID("bench")
	fill(b, s, sp, total)
	all, _, err := s.Read(sp, 0, 1)
	if err != nil || len(all) != 1 {
		b.Fatalf("Read first: %v", err)
	}
	first := all[0].Cursor - 1
	if n, err := s.Count(sp); err != nil || n != total {
		b.Fatalf("Count = %d, %v; want %d", n, err, total)
	}
	// Seqs are dense here (no failed commits), so cursors first..first+total-page
	// each have a full page after them.
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(page * benchRawSize)
	b.ReportAllocs()
	for b.Loop() {
		c := first + store.Cursor(rng.Uint64N(total-page+1))
		es, _, err := s.Read(sp, c, page)
		if err != nil || len(es) != page {
			b.Fatalf("Read(after %d) = %d entries, %v", c, len(es), err)
		}
	}
}

// BenchmarkSummary100k sums a whole space of 100,000 messages on disk (the
// first step of every sync). build-ms is the first call's cost, which
// builds the space's range index from disk.
func BenchmarkSummary100k(b *testing.B) {
	const total = 100_000
	s := openDisk(b, b.TempDir())
	sp := protocol.SpaceID("bench")
	fill(b, s, sp, total)
	start := time.Now()
	if n, _, err := s.Summary(sp, protocol.MinSyncKey, protocol.MaxSyncKey); err != nil || n != total {
		b.Fatalf("Summary = %d, %v; want %d", n, err, total)
	}
	build := time.Since(start)
	b.ReportAllocs()
	for b.Loop() {
		if n, _, err := s.Summary(sp, protocol.MinSyncKey, protocol.MaxSyncKey); err != nil || n != total {
			b.Fatalf("Summary = %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(build.Microseconds())/1000, "build-ms")
}

// BenchmarkSplit16At100k splits a random range of a 100,000-message space
// 16 ways and sums each part, as a sync round over a differing range does.
func BenchmarkSplit16At100k(b *testing.B) {
	const total = 100_000
	s := openDisk(b, b.TempDir())
	sp := protocol.SpaceID("bench")
	fill(b, s, sp, total)
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	for b.Loop() {
		x, y := int64(rng.Uint64N(total)), int64(rng.Uint64N(total))
		lo, hi := protocol.SyncKey{Time: min(x, y)}, protocol.SyncKey{Time: max(x, y) + 1}
		bounds, err := s.Split(sp, lo, hi, 16)
		if err != nil {
			b.Fatal(err)
		}
		for i := range len(bounds) + 1 {
			l, h := lo, hi
			if i > 0 {
				l = bounds[i-1]
			}
			if i < len(bounds) {
				h = bounds[i]
			}
			if _, _, err := s.Summary(sp, l, h); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPutBatchIntake measures what a late joiner's store does: 100,000
// messages of 600 raw bytes, each naming two earlier ones, stored by
// PutBatch 256 at a time as sync exchanges are. It reports the process's
// CPU time per message (Badger's flushes and compactions included, until
// the last batch is stored).
func BenchmarkPutBatchIntake(b *testing.B) {
	const total, batch = 100_000, 256
	sp := protocol.SpaceID("bench")
	raw := make([]byte, 600)
	for i := range raw {
		raw[i] = byte('a' + i%26)
	}
	ms := make([]store.Message, total)
	for i := range ms {
		ms[i] = benchMsg(sp, uint64(i), raw)
		ms[i].From = "sender"
		if i > 1 {
			ms[i].Prev = []protocol.ID{ms[i-1].ID, ms[i-2].ID}
		}
	}
	for b.Loop() {
		b.StopTimer()
		s := openDisk(b, b.TempDir())
		cpu0 := processCPU(b)
		b.StartTimer()
		for i := 0; i < total; i += batch {
			if _, err := s.PutBatch(b.Context(), ms[i:min(i+batch, total)], store.Quota{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/total, "cpu-µs/msg")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPutSend measures durable Puts as a node's sends make them, one
// at a time and from 8 writers: each names its space's heads as Prev and
// carries a sender, so it reads and unheads its parents as a send does.
// cpu-µs/op is the process's CPU per Put (the fsync's kernel time too).
func BenchmarkPutSend(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(map[int]string{1: "1", 8: "8"}[writers], func(b *testing.B) {
			s := openDisk(b, b.TempDir())
			sp, raw := protocol.SpaceID("bench"), benchRaw()
			b.ReportAllocs()
			var n atomic.Uint64
			cpu0 := processCPU(b)
			var wg sync.WaitGroup
			per := b.N / writers
			b.ResetTimer()
			for range writers {
				wg.Go(func() {
					for range per {
						heads, err := s.Heads(sp)
						if err != nil {
							b.Error(err)
							return
						}
						m := benchMsg(sp, n.Add(1), raw)
						m.Prev, m.From = heads, "12D3KooWbenchsenderbenchsenderbenchsenderbenchsender"
						if _, _, err := s.Put(b.Context(), m); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if total := float64(per * writers); total > 0 {
				b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/total, "cpu-µs/op")
			}
		})
	}
}

// BenchmarkPutBatchGossip measures what a daemon that publishes nothing
// does with a space's gossip: small batches (node/group.go commits what
// arrives together) of messages from several senders, each naming the
// space's current heads, into a space of 50,000 messages (a chain) whose
// heads are cached. cpu-µs/msg is the process's CPU per message (Badger's flushes
// and compactions included).
func BenchmarkPutBatchGossip(b *testing.B) {
	const batch = 4
	s := openDisk(b, b.TempDir())
	sp, raw := protocol.SpaceID("bench"), benchRaw()
	const stored = 50_000
	ms := make([]store.Message, 0, 256)
	for i := range uint64(stored) {
		m := benchMsg(sp, i, raw)
		if i > 0 {
			m.Prev = []protocol.ID{benchMsg(sp, i-1, nil).ID}
		}
		if ms = append(ms, m); len(ms) == cap(ms) || i == stored-1 {
			if _, err := s.PutBatch(b.Context(), ms, store.Quota{}); err != nil {
				b.Fatal(err)
			}
			ms = ms[:0]
		}
	}
	if _, err := s.Heads(sp); err != nil { // cached, as a daemon's are
		b.Fatal(err)
	}
	n := uint64(1_000_000)
	ms = make([]store.Message, batch)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		heads, err := s.Heads(sp)
		if err != nil {
			b.Fatal(err)
		}
		for i := range ms {
			n++
			ms[i] = benchMsg(sp, n, raw)
			ms[i].Prev, ms[i].From = heads, "sender"+string(rune('a'+i))
		}
		if _, err := s.PutBatch(b.Context(), ms, store.Quota{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N*batch), "cpu-µs/msg")
}

// BenchmarkHasAbsent measures the read a Put makes of a new message's
// key (it finds nothing) in a store of 100,000 messages just put: every
// table of level 0 and one of each level below is asked, each through
// its bloom filter (see badgerOptions).
func BenchmarkHasAbsent(b *testing.B) {
	const stored = 100_000
	s := openDisk(b, b.TempDir())
	sp, raw := protocol.SpaceID("bench"), benchRaw()
	ms := make([]store.Message, 0, 256)
	for i := range uint64(stored) {
		if ms = append(ms, benchMsg(sp, i, raw)); len(ms) == cap(ms) || i == stored-1 {
			if _, err := s.PutBatch(b.Context(), ms, store.Quota{}); err != nil {
				b.Fatal(err)
			}
			ms = ms[:0]
		}
	}
	n := uint64(1 << 40)
	cpu0 := processCPU(b)
	for b.Loop() {
		n++
		if ok, err := s.Has(benchMsg(sp, n, nil).ID); err != nil || ok {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
