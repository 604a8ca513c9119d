package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// queued returns how many Puts wait in s's commit queue.
func queued(s *Store) int {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return len(s.commits.queue)
}

// waitQueued waits until n Puts wait in s's commit queue.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queued(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Puts queued, want %d", queued(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDurablePutsShareATransaction holds the first durable Put inside its
// commit (commitMu held by the test) while more arrive: they must all be
// written in one more transaction, answered each with its own entry, with
// heads, order and duplicates as separate Puts give them, and durable
// (one sync for the batch).
func TestDurablePutsShareATransaction(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	root := syncTestMsg(sp, "root")

	type answer struct {
		e     Entry
		added bool
		err   error
	}
	s.commitMu.Lock()
	first := make(chan answer, 1)
	go func() {
		e, added, err := s.PutWithin(t.Context(), root, Quota{})
		first <- answer{e, added, err}
	}()
	// The lone Put leads at once: it is in its commit, not queued.
	waitQueued(t, s, 0)
	deadline := time.Now().Add(10 * time.Second)
	for s.commits.batches.Load() != 0 || !leading(s) {
		if time.Now().After(deadline) {
			t.Fatal("first Put does not lead")
		}
		time.Sleep(time.Millisecond)
	}

	// Children of root, a child of a child, and one message twice.
	var ms []Message
	for i := range 6 {
		m := syncTestMsg(sp, fmt.Sprint("child", i))
		m.Prev = []protocol.ID{root.ID}
		ms = append(ms, m)
	}
	grand := syncTestMsg(sp, "grandchild")
	grand.Prev = []protocol.ID{ms[0].ID}
	ms = append(ms, grand, ms[1])
	answers := make([]answer, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			e, added, err := s.PutWithin(t.Context(), m, Quota{})
			answers[i] = answer{e, added, err}
		})
	}
	waitQueued(t, s, len(ms))
	syncs := s.syncer.syncs.Load()
	s.commitMu.Unlock()
	wg.Wait()
	a := <-first
	if a.err != nil || !a.added {
		t.Fatalf("first Put: added %v, %v", a.added, a.err)
	}
	if got := s.commits.batches.Load(); got != 2 {
		t.Fatalf("%d transactions for 1 Put and %d queued behind it, want 2", got, len(ms))
	}
	if got := s.syncer.syncs.Load() - syncs; got < 1 || got > 2 {
		t.Fatalf("%d syncs for two batches", got)
	}
	cursors := map[Cursor]bool{a.e.Cursor: true}
	dups := 0
	for i, a := range answers {
		m := ms[i]
		if a.err != nil {
			t.Fatalf("put %d: %v", i, a.err)
		}
		if a.e.ID != m.ID || string(a.e.Raw) != string(m.Raw) {
			t.Fatalf("put %d answered with %s", i, a.e.ID)
		}
		if !a.added {
			dups++
			continue
		}
		if cursors[a.e.Cursor] {
			t.Fatalf("put %d: cursor %d given twice", i, a.e.Cursor)
		}
		cursors[a.e.Cursor] = true
	}
	if dups != 1 {
		t.Fatalf("%d Puts not added, want the one duplicate", dups)
	}
	heads, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	want := map[protocol.ID]bool{grand.ID: true}
	for _, m := range ms[1:6] {
		want[m.ID] = true
	}
	if len(heads) != len(want) {
		t.Fatalf("heads %v, want %d of them", heads, len(want))
	}
	for _, h := range heads {
		if !want[h] {
			t.Fatalf("head %s is not one", h)
		}
	}
	got, _, err := s.Read(sp, 0, 100)
	if err != nil || len(got) != 8 {
		t.Fatalf("read %d messages, %v; want 8", len(got), err)
	}
}

func leading(s *Store) bool {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return s.commits.leading
}

// TestDurablePutsBatchedKeepTheirOwn checks that Puts queued together
// keep their own quota and context: one over its quota is refused and
// the others stored, one whose context ended while it waited is not
// stored, and different quotas are each applied.
func TestDurablePutsBatchedKeepTheirOwn(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	s.commitMu.Lock()
	lead := make(chan error, 1)
	go func() {
		_, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "lead"), Quota{})
		lead <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !leading(s) {
		if time.Now().After(deadline) {
			t.Fatal("first Put does not lead")
		}
		time.Sleep(time.Millisecond)
	}
	// 4 bytes each ("q-00"…), quota 10 bytes for the space: "lead" (4)
	// and one more fit, the next does not.
	tight := Quota{SpaceBytes: 10}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 2 {
		m := syncTestMsg(sp, fmt.Sprintf("q-%02d", i))
		wg.Go(func() { _, _, errs[i] = s.PutWithin(t.Context(), m, tight) })
		waitQueued(t, s, i+1)
	}
	ctx, cancel := context.WithCancel(t.Context())
	gone := syncTestMsg(sp, "gone")
	wg.Go(func() { _, _, errs[2] = s.PutWithin(ctx, gone, Quota{}) })
	waitQueued(t, s, 3)
	cancel()
	free := syncTestMsg(sp, "free-with-no-quota")
	var freeErr error
	wg.Go(func() { _, _, freeErr = s.PutWithin(t.Context(), free, Quota{}) })
	waitQueued(t, s, 4)
	s.commitMu.Unlock()
	wg.Wait()
	if err := <-lead; err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], ErrQuota) {
		t.Fatalf("within quota: %v; over it: %v (want ErrQuota)", errs[0], errs[1])
	}
	if !errors.Is(errs[2], context.Canceled) {
		t.Fatalf("Put whose context ended while queued: %v", errs[2])
	}
	if has, _ := s.Has(gone.ID); has {
		t.Fatal("Put whose context ended while queued was stored")
	}
	if freeErr != nil {
		t.Fatalf("Put with no quota, queued with tight ones: %v", freeErr)
	}
	if got := s.commits.batches.Load(); got != 2 {
		t.Fatalf("%d batches, want 2", got)
	}
}
