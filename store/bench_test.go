package store_test

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

const benchRawSize = 256

// benchMsg returns message n of space: a unique ID and benchRawSize raw bytes.
func benchMsg(space protocol.ID, n uint64, raw []byte) store.Message {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return store.Message{ID: protocol.MessageID(b[:]), Space: space, Raw: raw}
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

// BenchmarkRead10At100k reads a 10-message page from a random cursor of a
// space holding 100,000 messages on disk.
func BenchmarkRead10At100k(b *testing.B) {
	const total, page, writers = 100_000, 10, 128
	s := openDisk(b, b.TempDir())
	sp, raw := protocol.SpaceID("bench"), benchRaw()
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
		return
	}
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
