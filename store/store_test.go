package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
	"github.com/weftmesh/weft/store/storetest"
)

func openDisk(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(store.Options{Dir: dir, GCInterval: 50 * time.Millisecond})
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

func openMemory(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(store.Options{InMemory: true})
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
	storetest.Run(t, func(t testing.TB) *store.Store { return openDisk(t, t.TempDir()) })
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
