package store

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestSentLogRecordsDelivered(t *testing.T) {
	outboxStores(t, func(t *testing.T, s *Store) {
		a, b := testOut("a", "peer-1", 1000), testOut("b", "peer-2", 1000)
		mustEnqueue(t, s, a)
		mustEnqueue(t, s, b)
		if err := s.Retry(b.ID, 2, 2000, "unreachable"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []Outgoing{b, a} {
			if err := s.Delivered(id.ID); err != nil {
				t.Fatal(err)
			}
		}
		// Delivered again (no longer queued) adds nothing.
		if err := s.Delivered(a.ID); err != nil {
			t.Fatal(err)
		}
		got, next, err := s.Sent(0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != b.ID || got[1].ID != a.ID {
			t.Fatalf("Sent = %+v, want b then a", got)
		}
		if got[0].To != "peer-2" || got[0].Attempts != 3 || got[1].Attempts != 1 || got[0].Created != 1000 || got[0].Delivered == 0 {
			t.Fatalf("Sent = %+v", got)
		}
		if more, n2, err := s.Sent(next, 10); err != nil || len(more) != 0 || n2 != next {
			t.Fatalf("Sent(after last) = %v, %v, %v", more, n2, err)
		}
		if one, _, err := s.Sent(got[0].Cursor, 10); err != nil || len(one) != 1 || one[0].ID != a.ID {
			t.Fatalf("Sent(after first) = %v, %v", one, err)
		}
		if _, _, err := s.Sent(0, 0); err == nil {
			t.Fatal("Sent with limit 0: no error")
		}
	})
}

func TestSentLogBounded(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	s := openOutboxStore(t, Options{InMemory: true, Now: func() time.Time { return time.UnixMilli(now.Load()) }})
	deliver := func(name string) {
		t.Helper()
		o := testOut(name, "peer-1", 1000)
		mustEnqueue(t, s, o)
		if err := s.Delivered(o.ID); err != nil {
			t.Fatal(err)
		}
	}
	const extra = 5
	for i := range SentMax + extra {
		deliver(fmt.Sprint("m", i))
	}
	got, _, err := s.Sent(0, 2*SentMax)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != SentMax {
		t.Fatalf("sent log holds %d, want the last %d", len(got), SentMax)
	}
	if want := testOut(fmt.Sprint("m", extra), "", 0).ID; got[0].ID != want {
		t.Fatalf("oldest kept = %s, want m%d", got[0].ID, extra)
	}
	// Sweep deletes what Sent no longer lists.
	if n := countPrefix(t, s, prefixSent); n != SentMax+extra {
		t.Fatalf("%d sent-log keys stored before a sweep, want %d", n, SentMax+extra)
	}
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, s, prefixSent); n != SentMax {
		t.Fatalf("%d sent-log keys stored after a sweep, want %d", n, SentMax)
	}

	// Past SentMaxAge nothing is listed, and the sweep deletes them all
	// but the ones delivered since.
	now.Add(SentMaxAge.Milliseconds() + 1)
	if got, _, err := s.Sent(0, 2*SentMax); err != nil || len(got) != 0 {
		t.Fatalf("after %v: Sent = %d entries, %v; want none", SentMaxAge, len(got), err)
	}
	deliver("late")
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, s, prefixSent); n != 1 {
		t.Fatalf("%d sent-log keys stored after the old ones expired, want 1", n)
	}
	if got, _, err := s.Sent(0, 10); err != nil || len(got) != 1 || got[0].ID != testOut("late", "", 0).ID {
		t.Fatalf("Sent = %+v, %v; want the late one", got, err)
	}
}

// TestSentLogAfterReopen: the sent log's order goes on after a reopen.
func TestSentLogAfterReopen(t *testing.T) {
	dir := t.TempDir()
	var last Cursor
	for round := range 2 {
		s, err := Open(Options{Dir: dir, SweepInterval: -1, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		o := testOut(fmt.Sprint("r", round), "peer-1", 1000)
		mustEnqueue(t, s, o)
		if err := s.Delivered(o.ID); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.Sent(0, 10)
		if err != nil || len(got) != round+1 || got[round].ID != o.ID || got[round].Cursor <= last {
			t.Fatalf("round %d: Sent = %+v, %v", round, got, err)
		}
		last = got[round].Cursor
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func countPrefix(t *testing.T, s *Store, prefix byte) int {
	t.Helper()
	n, err := s.countKeys(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
