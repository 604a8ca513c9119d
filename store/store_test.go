package store_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
	"github.com/weftmesh/weft/store/storetest"
)

func openDisk(t testing.TB, dir string) *store.Store {
	t.Helper()
	return openDiskWith(t, dir, store.Options{GCInterval: 50 * time.Millisecond})
}

func openDiskWith(t testing.TB, dir string, opts store.Options) *store.Store {
	t.Helper()
	opts.Dir = dir
	s, err := store.Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func openMemory(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	opts.InMemory = true
	s, err := store.Open(opts)
	if err != nil {
		t.Fatalf("Open(in memory): %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestDisk(t *testing.T) {
	storetest.Run(t, func(t testing.TB, opts store.Options) *store.Store {
		if opts.GCInterval == 0 {
			opts.GCInterval = 50 * time.Millisecond
		}
		return openDiskWith(t, t.TempDir(), opts)
	})
}

// TestDiskColdIndex runs the range index's tests with one block of each
// space's index in memory: the others are read back from Badger.
func TestDiskColdIndex(t *testing.T) {
	storetest.RunRangeIndex(t, func(t testing.TB, opts store.Options) *store.Store {
		opts.IndexBlocks, opts.IndexReads = 1, -1 // every query reads blocks back
		return openDiskWith(t, t.TempDir(), opts)
	})
}

func TestMemory(t *testing.T) {
	storetest.Run(t, openMemory)
}

func TestOpenNeedsDir(t *testing.T) {
	if s, err := store.Open(store.Options{}); err == nil {
		s.Close()
		t.Fatal("Open without Dir or InMemory succeeded")
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	a, b := storetest.ID("space a"), storetest.ID("space b")
	joined := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	seen := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)

	s := openDisk(t, dir)
	var want []protocol.ID
	for i := range 30 {
		m := storetest.Msg(a, fmt.Sprint("a", i))
		if i > 0 {
			m.Prev = []protocol.ID{want[i-1]}
		}
		storetest.MustPut(t, s, m)
		want = append(want, m.ID)
		storetest.MustPut(t, s, storetest.Msg(b, fmt.Sprint("b", i)))
	}
	if _, _, err := s.JoinSpace(store.Space{ID: a, Name: "a", JoinedAt: joined}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPeer(store.Peer{ID: "peer", Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, LastSeen: seen}); err != nil {
		t.Fatal(err)
	}
	before := storetest.ReadAll(t, s, a, 7)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDisk(t, dir)
	after := storetest.ReadAll(t, s, a, 7)
	if len(after) != len(before) {
		t.Fatalf("after reopen %d entries, before %d", len(after), len(before))
	}
	for i := range before {
		if after[i].ID != before[i].ID || after[i].Cursor != before[i].Cursor || string(after[i].Raw) != string(before[i].Raw) {
			t.Errorf("entry %d: after reopen %s@%d, before %s@%d", i, after[i].ID, after[i].Cursor, before[i].ID, before[i].Cursor)
		}
	}
	if n, err := s.Count(b); err != nil || n != 30 {
		t.Errorf("Count(b) = %d, %v; want 30", n, err)
	}
	if h, err := s.Heads(a); err != nil || !slices.Equal(h, []protocol.ID{want[len(want)-1]}) {
		t.Errorf("Heads(a) = %v, %v; want the last message", h, err)
	}

	// The counter continues after the last seq.
	last := before[len(before)-1].Cursor
	e, added := storetest.MustPut(t, s, storetest.Msg(a, "next", want[len(want)-1]))
	if !added || e.Cursor <= last {
		t.Errorf("Put after reopen at cursor %d (added %v), want after %d", e.Cursor, added, last)
	}
	es, next, err := s.Read(a, last, 10)
	if err != nil || len(es) != 1 || es[0].ID != e.ID || next != e.Cursor {
		t.Errorf("Read after reopen = %d entries, %d, %v", len(es), next, err)
	}
	// A duplicate of a message stored before the reopen is still a duplicate.
	if _, added := storetest.MustPut(t, s, storetest.Msg(a, "a0")); added {
		t.Error("message from before reopen added again")
	}

	sp, err := s.Space(a)
	if err != nil || sp.Name != "a" || !sp.JoinedAt.Equal(joined) {
		t.Errorf("Space after reopen = %+v, %v", sp, err)
	}
	ps, err := s.Peers()
	if err != nil || len(ps) != 1 || ps[0].ID != "peer" || !ps[0].LastSeen.Equal(seen) || len(ps[0].Addrs) != 1 {
		t.Errorf("Peers after reopen = %+v, %v", ps, err)
	}
}

// TestReopenAfterDeletes checks that the range index is rebuilt from disk
// after deletes, and that the seq of a deleted newest message is not
// reused (a follower's cursor may point at it).
func TestReopenAfterDeletes(t *testing.T) {
	const t0 = 1_000_000
	dir := t.TempDir()
	clock := storetest.NewClock(t0)
	opts := store.Options{Now: clock.Now, SweepInterval: -1}
	sp := storetest.ID("reopen")
	rng := rand.New(rand.NewPCG(7, 8))

	s := openDiskWith(t, dir, opts)
	md := storetest.Model{}
	var last store.Entry
	for i := range 1500 {
		m := storetest.Msg(sp, fmt.Sprint("r", i))
		m.Time = t0 - rng.Int64N(5000)
		if rng.IntN(4) == 0 || i == 1499 {
			m.Expires = t0 // the newest (by seq) among them
		} else {
			md.Add(m)
		}
		if i == 700 {
			if _, _, err := s.Summary(sp, protocol.MinSyncKey, protocol.MaxSyncKey); err != nil {
				t.Fatal(err)
			}
		}
		last, _ = storetest.MustPut(t, s, m)
	}
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	keys := md.Sorted()
	storetest.CheckRange(t, s, sp, keys, protocol.MinSyncKey, protocol.MaxSyncKey)
	heads, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDiskWith(t, dir, opts)
	storetest.CheckRange(t, s, sp, keys, protocol.MinSyncKey, protocol.MaxSyncKey)
	for range 20 {
		lo, hi := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
		storetest.CheckRange(t, s, sp, keys, lo, hi)
	}
	if h, err := s.Heads(sp); err != nil || !slices.Equal(h, heads) {
		t.Errorf("Heads after reopen = %v, %v; want %v", h, err, heads)
	}
	e, _ := storetest.MustPut(t, s, storetest.Msg(sp, "after"))
	if e.Cursor <= last.Cursor {
		t.Errorf("Put after reopen got cursor %d, not after the deleted newest %d", e.Cursor, last.Cursor)
	}
}

func TestRetentionJSON(t *testing.T) {
	tests := []struct {
		in   store.Retention
		json string
	}{
		{store.Retention{}, `{}`},
		{store.Retention{MaxCount: 5}, `{"max_count":5}`},
		{store.Retention{MaxAge: 90 * time.Minute}, `{"max_age":"1h30m0s"}`},
		{store.Retention{MaxCount: 1, MaxAge: time.Millisecond}, `{"max_count":1,"max_age":"1ms"}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.json {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.in, b, err, tc.json)
		}
		var back store.Retention
		if err := json.Unmarshal(b, &back); err != nil || back != tc.in {
			t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var r store.Retention
	if err := json.Unmarshal([]byte(`{"max_age":60000}`), &r); err != nil || r.MaxAge != time.Minute {
		t.Errorf("Unmarshal of max_age in ms = %+v, %v", r, err)
	}
	for _, bad := range []string{`{"max_age":"soon"}`, `{"max_age":"-1s"}`, `{"max_count":-1}`, `{"max_age":true}`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
	sp, err := json.Marshal(store.Space{Name: "x"})
	if err != nil || strings.Contains(string(sp), "retention") {
		t.Errorf("a space without retention encodes as %s, %v", sp, err)
	}
	if _, err := store.Open(store.Options{InMemory: true, Retention: store.Retention{MaxCount: -1}}); err == nil {
		t.Error("Open with a negative default retention succeeded")
	}
}
