package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// TestReadTailMatchesReadWithin: a follower reading with ReadTail from
// where each read left it gets, at every read, exactly what ReadWithin
// from the same cursor gets, while messages are added one at a time, in
// batches and durably, some expiring and swept, with reads cut by the
// limit and by the byte budget, and across the store's reopening (its
// tables then all predate the follower's snapshot, which ReadTail skips).
func TestReadTailMatchesReadWithin(t *testing.T) {
	dir := t.TempDir()
	var nowMs atomic.Int64
	nowMs.Store(1_000_000)
	opts := store.Options{Dir: dir, SweepInterval: -1, Now: func() time.Time { return time.UnixMilli(nowMs.Load()) }}
	s, err := store.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	sp, raw := protocol.SpaceID("tail"), benchRaw()
	rng := rand.New(rand.NewPCG(7, 11))
	var n uint64
	msg := func() store.Message {
		n++
		m := benchMsg(sp, n, raw[:1+rng.IntN(len(raw))])
		if rng.IntN(4) == 0 {
			m.Expires = nowMs.Load() + int64(1+rng.IntN(50))
		}
		return m
	}
	var tail store.Tail
	got, skipped := 0, 0
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 4:
			ms := make([]store.Message, 1+rng.IntN(6))
			for i := range ms {
				ms[i] = msg()
			}
			if _, err := s.PutBatch(t.Context(), ms, store.Quota{}); err != nil {
				t.Fatal(err)
			}
		case op < 6:
			if _, _, err := s.Put(t.Context(), msg()); err != nil {
				t.Fatal(err)
			}
		case op < 7:
			nowMs.Add(int64(rng.IntN(40)))
		case op < 8:
			if _, err := s.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
		case op < 9 && step%50 == 0:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = store.Open(opts); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(3) > 0 {
			continue // more changes before the follower reads
		}
		// Read up as a follower does, with the cuts a step chooses.
		limit := []int{1, 2, 3, 256}[rng.IntN(4)]
		maxBytes := []int{-1, 1, 200, 1 << 20}[rng.IntN(4)]
		for {
			want, wantNext, wantCut, err := s.ReadWithin(sp, tail.After, limit, maxBytes, 10)
			if err != nil {
				t.Fatal(err)
			}
			es, next, cut, err := s.ReadTail(sp, tail, limit, maxBytes, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != len(want) || next.After != wantNext || cut != wantCut {
				t.Fatalf("step %d after %d (limit %d, max %d): ReadTail %d entries, next %d, cut %v; ReadWithin %d, %d, %v",
					step, tail.After, limit, maxBytes, len(es), next.After, cut, len(want), wantNext, wantCut)
			}
			for i := range es {
				if es[i].ID != want[i].ID || es[i].Cursor != want[i].Cursor || string(es[i].Raw) != string(want[i].Raw) {
					t.Fatalf("step %d: entry %d is %s at %d, want %s at %d", step, i, es[i].ID, es[i].Cursor, want[i].ID, want[i].Cursor)
				}
			}
			got += len(es)
			tail = next
			if !cut && len(es) < limit {
				break
			}
		}
	}
	held, err := s.Count(sp)
	if err != nil {
		t.Fatal(err)
	}
	skipped = int(n) - got
	if got == 0 || skipped == 0 || held == 0 {
		t.Fatalf("followed %d of %d messages (%d held): the test did not exercise reads and expiry", got, n, held)
	}
}

// BenchmarkFollowTail is a follower's read of the k messages each commit
// adds to a space of 20,000 on disk, with ReadWithin from its cursor and
// with ReadTail from its Tail.
func BenchmarkFollowTail(b *testing.B) {
	for _, mode := range []string{"within", "tail"} {
		for _, k := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/%d", mode, k), func(b *testing.B) {
				s := openDisk(b, b.TempDir())
				sp, raw := protocol.SpaceID("bench"), benchRaw()
				var n uint64
				put := func(k int) {
					ms := make([]store.Message, k)
					for i := range ms {
						n++
						ms[i] = benchMsg(sp, n, raw)
					}
					if _, err := s.PutBatch(b.Context(), ms, store.Quota{}); err != nil {
						b.Fatal(err)
					}
				}
				for range 200 {
					put(100)
				}
				tail, err := s.End(sp)
				if err != nil {
					b.Fatal(err)
				}
				t := store.Tail{After: tail}
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					put(k)
					b.StartTimer()
					var es []store.Entry
					if mode == "within" {
						es, t.After, _, err = s.ReadWithin(sp, t.After, 256, 4<<20, 100)
					} else {
						es, t, _, err = s.ReadTail(sp, t, 256, 4<<20, 100)
					}
					if err != nil || len(es) != k {
						b.Fatalf("read %d entries, %v; want %d", len(es), err, k)
					}
				}
			})
		}
	}
}
