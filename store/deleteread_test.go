package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// A delete transaction reads without mutateMu (see deleteOnce): a Put may
// commit between its reads and its commit. These tests put one there, in
// the afterDeleteRead hook, and check that the delete does not write what
// it read before that Put, and that Puts do not wait for its reads.

// putDuringDeleteRead puts ms (a relayed batch) in the first n attempts
// of each delete that reads without mutateMu, and counts those attempts. It fails the
// test if a Put waits more than 10 s: the delete holds mutateMu.
func putDuringDeleteRead(t *testing.T, s *Store, n int, ms func(attempt int) []Message) *int {
	attempts := new(int)
	s.afterDeleteRead = func([]protocol.ID) {
		*attempts++
		if *attempts > n {
			return
		}
		done := make(chan error, 1)
		go func() {
			res, err := s.PutBatch(t.Context(), ms(*attempts), Quota{})
			for _, r := range res {
				if err == nil {
					err = r.Err
				}
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("put during a delete's reads: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Put waited 10 s for a delete's reads")
		}
	}
	return attempts
}

// checkHeads compares space's heads (cached, on disk) with the truth:
// the stored messages that no stored message names.
func checkHeads(t *testing.T, s *Store, space protocol.ID, want ...protocol.ID) {
	t.Helper()
	ids := func(hs []protocol.ID) []string {
		var out []string
		for _, h := range hs {
			out = append(out, fmt.Sprintf("%x", h[:4]))
		}
		slices.Sort(out)
		return out
	}
	cached, err := s.Heads(space)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := s.readHeads(space)
	if err != nil {
		t.Fatal(err)
	}
	w := ids(want)
	if got := ids(headsTruth(t, s)[space]); !slices.Equal(got, w) {
		t.Fatalf("stored heads %v, want %v", got, w)
	}
	if got := ids(cached); !slices.Equal(got, w) {
		t.Errorf("cached heads %v, want %v", got, w)
	}
	if got := ids(disk); !slices.Equal(got, w) {
		t.Errorf("head keys %v, want %v", got, w)
	}
}

func openSweepTest(t *testing.T, clock *int64) *Store {
	return openSweepTestAt(t, func() int64 { return *clock })
}

// openSweepTestAt opens a store on disk with no background sweep or GC,
// whose clock reads now (Unix milliseconds); it is closed when t ends.
func openSweepTestAt(t *testing.T, now func() int64) *Store {
	s, err := Open(Options{
		Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1,
		Now: func() time.Time { return time.UnixMilli(now()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sweepOneInTwo sweeps s and fails t unless the sweep deleted one message
// in two attempts (see putDuringDeleteRead): the first conflicted.
func sweepOneInTwo(t *testing.T, s *Store, attempts *int) {
	t.Helper()
	n, err := s.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || *attempts != 2 {
		t.Errorf("the sweep deleted %d in %d attempts, want 1 in 2 (the first conflicting)", n, *attempts)
	}
}

// TestDeleteConflictsWithNewChild: a sweep deletes the only child of a
// stored parent, which it reads as left without children (a head again);
// meanwhile a new child of that parent is put. The parent must stay no
// head (its r key stays), the new child be one.
func TestDeleteConflictsWithNewChild(t *testing.T) {
	clock := int64(1)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	parent := syncTestMsg(sp, "parent")
	old := syncTestMsg(sp, "old")
	old.Prev, old.Expires = []protocol.ID{parent.ID}, 10
	child := syncTestMsg(sp, "child")
	child.Prev = []protocol.ID{parent.ID}
	for _, m := range []Message{parent, old} {
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	checkHeads(t, s, sp, old.ID) // caches them
	attempts := putDuringDeleteRead(t, s, 1, func(int) []Message { return []Message{child} })
	clock = 20
	sweepOneInTwo(t, s, attempts)
	checkHeads(t, s, sp, child.ID)
}

// TestDeleteConflictsWithParentPut: a sweep deletes the only child of a
// parent not stored, which it reads as such (not a head again, only its
// r key to drop); meanwhile the parent is put (and is no head: its child
// names it). The parent must become a head once its child is deleted.
func TestDeleteConflictsWithParentPut(t *testing.T) {
	clock := int64(1)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	parent := syncTestMsg(sp, "parent")
	old := syncTestMsg(sp, "old")
	old.Prev, old.Expires = []protocol.ID{parent.ID}, 10
	if _, _, err := s.Put(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	checkHeads(t, s, sp, old.ID)
	attempts := putDuringDeleteRead(t, s, 1, func(int) []Message { return []Message{parent} })
	clock = 20
	sweepOneInTwo(t, s, attempts)
	checkHeads(t, s, sp, parent.ID)
	if _, err := s.Get(parent.ID); err != nil {
		t.Errorf("the parent: %v", err)
	}
}

// TestDeleteNotStarvedByPuts deletes a message and 16 not stored yet,
// one of which is put in each attempt that reads without mutateMu (after
// the delete read it as not stored): every such attempt conflicts, and the
// delete must still be made, by an attempt that reads holding mutateMu.
func TestDeleteNotStarvedByPuts(t *testing.T) {
	clock := int64(1)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	parent := syncTestMsg(sp, "parent")
	old := syncTestMsg(sp, "old")
	old.Prev = []protocol.ID{parent.ID}
	for _, m := range []Message{parent, old} {
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	ids := []protocol.ID{old.ID}
	var later []Message
	for i := range maxPutAttempts {
		m := syncTestMsg(sp, fmt.Sprint("later", i))
		later = append(later, m)
		ids = append(ids, m.ID)
	}
	attempts := putDuringDeleteRead(t, s, maxPutAttempts, func(i int) []Message { return later[i-1 : i] })
	n, err := s.deleteMessages(ids)
	if err != nil {
		t.Fatal(err)
	}
	if *attempts != optimisticDeletes {
		t.Errorf("%d attempts read without mutateMu, want %d", *attempts, optimisticDeletes)
	}
	// old and the messages put before the last attempt.
	if n != 1+optimisticDeletes {
		t.Errorf("deleted %d, want %d", n, 1+optimisticDeletes)
	}
	checkHeads(t, s, sp, parent.ID)
}

// TestSweepYieldsToPuts: a sweep pauses after a delete transaction during
// which a Put was made, and only then (see deletePaced).
func TestSweepYieldsToPuts(t *testing.T) {
	clock := int64(1)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	const batches = 3
	put := func(name string, expires int64) {
		m := syncTestMsg(sp, name)
		m.Expires = expires
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range batches * sweepBatch {
		put(fmt.Sprint("old", i), 10)
	}
	clock = 20
	n, err := s.Sweep(t.Context())
	if err != nil || n != batches*sweepBatch {
		t.Fatalf("the sweep deleted %d (%v), want %d", n, err, batches*sweepBatch)
	}
	if p := s.sweepPauses.Load(); p != 0 {
		t.Errorf("a sweep with no Puts paused %d times", p)
	}

	for i := range batches * sweepBatch {
		put(fmt.Sprint("later", i), 30)
	}
	// A Put in each delete transaction but the first.
	deletes := 0
	s.afterDeleteRead = func([]protocol.ID) {
		if deletes++; deletes > 1 {
			put(fmt.Sprint("during", deletes), 0)
		}
	}
	clock = 40
	n, err = s.Sweep(t.Context())
	if err != nil || n != batches*sweepBatch {
		t.Fatalf("the sweep deleted %d (%v), want %d", n, err, batches*sweepBatch)
	}
	if p := s.sweepPauses.Load(); p != batches-1 {
		t.Errorf("the sweep paused %d times, want %d (after each delete with a Put)", p, batches-1)
	}
}

// TestRetentionCountBounded: a count retention deletes at most the excess
// it found when it started, so a space that takes messages in faster than
// the sweep deletes them does not keep the sweep (and sweepMu) to itself.
// Here each delete transaction is met by more new messages than it
// deletes: before the bound, the sweep ran for as long as they came.
func TestRetentionCountBounded(t *testing.T) {
	clock := int64(1)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	const keep, stored = 10, 10 + 2*sweepBatch
	for i := range stored {
		m := syncTestMsg(sp, fmt.Sprintf("m%d", i))
		m.Time = int64(i + 1)
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	rounds, next := 0, stored
	s.afterDeleteRead = func([]protocol.ID) {
		if rounds++; rounds > 20 {
			return // enough to tell: the bound allows 2
		}
		for range sweepBatch + 1 {
			m := syncTestMsg(sp, fmt.Sprintf("m%d", next))
			m.Time = int64(next + 1)
			next++
			if _, _, err := s.PutRelayed(t.Context(), m, Quota{}); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := s.applyRetention(t.Context(), sp, Retention{MaxCount: keep}, clock); err != nil {
		t.Fatal(err)
	}
	if rounds != 2 {
		t.Fatalf("%d delete transactions for an excess of %d (batches of %d), want 2", rounds, stored-keep, sweepBatch)
	}
}
