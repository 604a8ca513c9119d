package store_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// TestReadTailAcrossReopen: the last commits before a
// Close only delete (tombstones); CompactL0OnClose drops them, so after
// Open Badger's oracle restarts below the follower's snapshot and a new
// Put gets a commit timestamp <= Tail.since: ReadTail must not skip it
// (found by review).
func TestReadTailAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	var nowMs atomic.Int64
	nowMs.Store(1_000_000)
	opts := store.Options{Dir: dir, SweepInterval: -1, GCInterval: -1, Now: func() time.Time { return time.UnixMilli(nowMs.Load()) }}
	s, err := store.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	sp, raw := protocol.SpaceID("tail"), benchRaw()
	const k = 8
	// Message n (seq n) expires at n's reverse order: the highest seq goes first,
	// so only the first sweep writes the seq mark; the others only delete,
	// and the last one deletes the usage counters too.
	for n := uint64(1); n <= k; n++ {
		m := benchMsg(sp, n, raw)
		m.Expires = nowMs.Load() + int64(10*(k+1-n))
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	var tail store.Tail
	_, tail, _, err = s.ReadTail(sp, tail, 256, -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	for range k {
		nowMs.Add(10)
		if _, err := s.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The follower reads (nothing new): its snapshot is after every sweep.
	es, tail, _, err := s.ReadTail(sp, tail, 256, -1, 10)
	if err != nil || len(es) != 0 {
		t.Fatalf("read %d, %v", len(es), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = store.Open(opts); err != nil {
		t.Fatal(err)
	}
	for n := uint64(100); n < 103; n++ {
		if _, _, err := s.Put(t.Context(), benchMsg(sp, n, raw)); err != nil {
			t.Fatal(err)
		}
	}
	want, _, _, err := s.ReadWithin(sp, tail.After, 256, -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _, err := s.ReadTail(sp, tail, 256, -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("after reopen: ReadTail %d entries, ReadWithin %d from cursor %d", len(got), len(want), tail.After)
	}
}
