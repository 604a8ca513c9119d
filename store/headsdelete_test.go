package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// TestHeadsAfterDelete runs a sweep continuously, deleting heads (3 of
// 4 messages expire 1 ms after they are sent), while 4 senders read their
// space's heads and put a message naming them. A message whose delete
// had committed before a sender read the heads must not be among them,
// nor named as a parent by any stored message. Each delete is held a
// moment between its commit and its in-memory updates, where Heads used
// to read the deleted message from the cached heads.
func TestHeadsAfterDelete(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))

	var (
		mu   sync.Mutex
		gone = map[protocol.ID]int{} // deleted message -> its place in the order of deletes
	)
	s.afterDelete = func(deleted []Message) {
		mu.Lock()
		for _, m := range deleted {
			gone[m.ID] = len(gone)
		}
		mu.Unlock()
		time.Sleep(200 * time.Microsecond) // between the commit and the heads update
	}
	// deletedBefore reports whether id's delete committed before the
	// first n deletes were recorded.
	deletedBefore := func(id protocol.ID, n int) bool {
		mu.Lock()
		defer mu.Unlock()
		i, ok := gone[id]
		return ok && i < n
	}

	ctx, cancel := context.WithCancel(t.Context())
	var sweeper sync.WaitGroup
	sweeper.Go(func() {
		for ctx.Err() == nil {
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("sweep: %v", err)
			}
		}
	})

	const senders, each = 4, 300
	var (
		wg        sync.WaitGroup
		stale     atomic.Int64
		sentMu    sync.Mutex
		snapshots = map[protocol.ID]int{} // message -> deletes recorded before its heads were read
	)
	for w := range senders {
		wg.Go(func() {
			for i := range each {
				mu.Lock()
				n := len(gone)
				mu.Unlock()
				heads, err := s.Heads(sp)
				if err != nil {
					t.Error(err)
					return
				}
				for _, h := range heads {
					if deletedBefore(h, n) && stale.Add(1) <= 5 {
						t.Errorf("Heads named %x, deleted before it was called", h[:4])
					}
				}
				now := time.Now().UnixMilli()
				m := Message{
					ID:    protocol.MessageID([]byte(fmt.Sprint("m", w, ".", i))),
					Space: sp, Time: now, Prev: heads, Raw: []byte("x"),
				}
				if i%4 != 0 {
					m.Expires = now + 1
				}
				if _, _, err := s.Put(t.Context(), m); err != nil {
					t.Errorf("put: %v", err)
					return
				}
				sentMu.Lock()
				snapshots[m.ID] = n
				sentMu.Unlock()
			}
		})
	}
	wg.Wait()
	cancel()
	sweeper.Wait()

	mu.Lock()
	deleted := len(gone)
	mu.Unlock()
	t.Logf("%d messages deleted; Heads named one after its delete %d times", deleted, stale.Load())
	if deleted < senders*each/2 {
		t.Fatalf("%d of %d messages deleted: too few to test anything", deleted, senders*each)
	}
	// The stored messages (the sweeps deleted the others): none names a
	// parent deleted before its heads were read.
	checked := 0
	for id, n := range snapshots {
		var e Entry
		err := s.db.View(func(txn *badger.Txn) (err error) { e, err = readEntry(txn, id); return err }) // expired or not
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, p := range e.Prev {
			if deletedBefore(p, n) && stale.Add(1) <= 10 {
				t.Errorf("message %x names %x, deleted before its heads were read", id[:4], p[:4])
			}
		}
	}
	t.Logf("%d messages left stored, checked", checked)
}

// TestHeadsDoesNotWaitForPuts holds a Put of one space between its commit
// and its in-memory updates while a sweep waits to delete a message of
// another: Heads of that other space must answer meanwhile. (Heads once
// took mutateMu shared, and a waiting writer holds new readers back, so
// every send of every space waited for the slowest Put in flight, such as
// one updating a range index still being built.)
func TestHeadsDoesNotWaitForPuts(t *testing.T) {
	clock := time.UnixMilli(1_000_000)
	s, err := Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := protocol.MessageID([]byte("a")), protocol.MessageID([]byte("b"))
	old := syncTestMsg(b, "old")
	old.Expires = 1 // expired: the sweep deletes it
	for _, m := range []Message{old, syncTestMsg(b, "b1")} {
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Heads(b); err != nil { // cached
		t.Fatal(err)
	}

	slow := syncTestMsg(a, "slow")
	held, release := make(chan struct{}), make(chan struct{})
	s.afterCommit = func(m *Message) {
		if m.ID == slow.ID {
			close(held)
			<-release
		}
	}
	putDone := make(chan error, 1)
	go func() {
		_, _, err := s.PutRelayed(t.Context(), slow, Quota{})
		putDone <- err
	}()
	<-held
	sweepDone := make(chan error, 1)
	go func() {
		_, err := s.Sweep(t.Context())
		sweepDone <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.mutateMu.TryRLock() { // until the sweep waits for the lock
		s.mutateMu.RUnlock()
		if time.Now().After(deadline) {
			t.Fatal("the sweep never waited for mutateMu")
		}
		time.Sleep(time.Millisecond)
	}

	headsDone := make(chan error, 1)
	go func() {
		_, err := s.Heads(b)
		headsDone <- err
	}()
	var headsErr error
	answered := false
	select {
	case headsErr = <-headsDone:
		answered = true
	case <-time.After(10 * time.Second):
	}
	close(release)
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	if err := <-sweepDone; err != nil {
		t.Fatal(err)
	}
	if !answered {
		t.Fatal("Heads waited for a Put of another space (held) and the sweep behind it")
	}
	if headsErr != nil {
		t.Fatal(headsErr)
	}
	heads, err := s.Heads(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range heads {
		if h == old.ID {
			t.Errorf("the expired message is still a head after the sweep")
		}
	}
}
