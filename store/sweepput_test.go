package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestSweepBetweenReadAndCommit runs a sweep in every attempt of a
// durable Put, after the Put has read its parents and before it commits,
// each sweep deleting one more of the 20 parents (they expire one by
// one). A Put must not fail because of housekeeping: it used to retry
// once per sweep, each one deleting a key it had read, and give up after
// 16 conflicts. Both ways of putting are tried: one Put, and a batch
// (as the commit queue writes concurrent Puts).
func TestSweepBetweenReadAndCommit(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) { sweepBetweenReadAndCommit(t, batch) })
	}
}

func sweepBetweenReadAndCommit(t *testing.T, batch bool) {
	var clock atomic.Int64
	s := openSweepTestAt(t, clock.Load)
	sp := protocol.MessageID([]byte("space"))
	const parents = 20
	child := syncTestMsg(sp, "child")
	sibling := syncTestMsg(sp, "sibling") // put with child in the batch case
	for i := range parents {
		p := syncTestMsg(sp, fmt.Sprint("parent", i))
		p.Time, p.Expires = int64(i), int64(1000+i)
		if _, _, err := s.Put(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		child.Prev = append(child.Prev, p.ID)
		sibling.Prev = append(sibling.Prev, p.ID)
	}
	// The heads are not cached: the Put reads each parent from disk.

	var (
		attempts int
		sweeps   sync.WaitGroup
		removed  atomic.Int64
	)
	s.afterRead = func(m *Message) {
		if m.ID != child.ID && m.ID != sibling.ID {
			return
		}
		attempts++
		// One more parent expires, and a sweep deletes it: before the
		// Put commits, or, once the Put is done, after.
		clock.Store(int64(1000 + attempts - 1))
		done := make(chan struct{})
		sweeps.Go(func() {
			defer close(done)
			n, err := s.Sweep(t.Context())
			if err != nil {
				t.Error(err)
			}
			removed.Add(int64(n))
		})
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond): // waiting for the Put
		}
	}

	if batch {
		res, err := s.PutBatch(t.Context(), []Message{child, sibling}, Quota{})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Errorf("put batch: %v", err)
		}
	} else if _, _, err := s.Put(t.Context(), child); err != nil {
		t.Errorf("put: %v", err)
	}
	sweeps.Wait()
	t.Logf("%d attempts, %d parents deleted", attempts, removed.Load())
	if removed.Load() == 0 {
		t.Fatal("no sweep deleted a parent: the test tests nothing")
	}
	e, err := s.Get(child.ID)
	if err != nil {
		t.Fatalf("the child is not stored: %v", err)
	}
	if len(e.Prev) != parents {
		t.Errorf("the child names %d parents, want %d", len(e.Prev), parents)
	}
	heads, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range heads {
		if h != child.ID && h != sibling.ID {
			t.Errorf("head %s, want only the child and its sibling", h)
		}
	}
}

// TestSweepDoesNotFailPuts runs a sweep every 2 ms while 8 senders make
// 4,000 Puts, each naming its space's heads. Half go into a space whose
// retention keeps 32 messages (a quarter of those with a TTL of 1 ms), so
// that the sweeps delete continuously, heads included, and half into one
// that keeps everything. No Put may fail, and nothing may be lost: every
// message of the second space is stored, and of the first the sweeps
// removed exactly those not stored.
//
// "durable": every sender sends as the API does (durable Puts, which the
// commit queue writes one transaction at a time), so no Put conflicts with
// another and any retry is a sweep's doing: there must be none. "mixed":
// 2 of the senders put as a node puts messages from the network (relayed
// batches, which may conflict with the others; retries are theirs).
func TestSweepDoesNotFailPuts(t *testing.T) {
	t.Run("durable", func(t *testing.T) { sweepDoesNotFailPuts(t, 0) })
	t.Run("mixed", func(t *testing.T) { sweepDoesNotFailPuts(t, 2) })
}

func sweepDoesNotFailPuts(t *testing.T, relayers int) {
	s, err := Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	swept := protocol.MessageID([]byte("swept"))
	kept := protocol.MessageID([]byte("kept"))
	if _, _, err := s.JoinSpace(Space{ID: swept, Retention: Retention{MaxCount: 32}}); err != nil {
		t.Fatal(err)
	}

	var (
		attemptsMu sync.Mutex
		attempts   = map[protocol.ID]int{}
		retries    int
	)
	s.afterRead = func(m *Message) {
		attemptsMu.Lock()
		defer attemptsMu.Unlock()
		if attempts[m.ID]++; attempts[m.ID] > 1 {
			retries++
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	var (
		removed atomic.Int64
		sweeps  atomic.Int64
		sweeper sync.WaitGroup
	)
	sweeper.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			n, err := s.Sweep(ctx)
			removed.Add(int64(n))
			sweeps.Add(1)
			if err != nil && ctx.Err() == nil {
				t.Errorf("sweep: %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})

	const senders, each = 8, 500
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		mu     sync.Mutex
		put    = map[protocol.ID]int{} // messages added per space
	)
	for w := range senders {
		wg.Go(func() {
			for i := range each {
				space := swept
				if i%2 == 1 {
					space = kept
				}
				heads, err := s.Heads(space)
				if err != nil {
					t.Error(err)
					return
				}
				now := time.Now().UnixMilli()
				m := Message{
					ID:    protocol.MessageID([]byte(fmt.Sprint("m", w, ".", i))),
					Space: space,
					Time:  now,
					Prev:  heads,
					Raw:   []byte(fmt.Sprint("message ", w, ".", i)),
					From:  fmt.Sprint("sender", w),
				}
				if space == swept && i%4 == 0 {
					m.Expires = now + 1
				}
				added := false
				if w < relayers {
					var res []PutResult
					if res, err = s.PutBatch(t.Context(), []Message{m}, Quota{}); err == nil {
						added, err = res[0].Added, res[0].Err
					}
				} else {
					_, added, err = s.Put(t.Context(), m)
				}
				if err != nil {
					if failed.Add(1) <= 5 {
						t.Errorf("put %d.%d: %v", w, i, err)
					}
					continue
				}
				if !added {
					t.Errorf("put %d.%d: not added", w, i)
				}
				mu.Lock()
				put[space]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cancel()
	sweeper.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d puts failed", n, senders*each)
	}
	attemptsMu.Lock()
	t.Logf("%d sweeps removed %d messages while %d transactions were put, %d of them again", sweeps.Load(), removed.Load(), len(attempts), retries)
	if relayers == 0 && retries > 0 {
		t.Errorf("%d durable Puts were tried again: a sweep committed between their reads and their commit", retries)
	}
	attemptsMu.Unlock()
	if removed.Load() < int64(put[swept])/2 {
		t.Fatalf("the sweeps removed %d of %d messages while the senders sent: too few to test anything", removed.Load(), put[swept])
	}
	// A last sweep with nothing concurrent, so that the counts settle.
	n, err := s.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	removed.Add(int64(n))

	keptCount, err := s.Count(kept)
	if err != nil {
		t.Fatal(err)
	}
	if keptCount != put[kept] {
		t.Errorf("the space without retention holds %d messages, %d were put", keptCount, put[kept])
	}
	sweptCount, err := s.Count(swept)
	if err != nil {
		t.Fatal(err)
	}
	if sweptCount > 32 {
		t.Errorf("the swept space holds %d messages, its retention keeps 32", sweptCount)
	}
	if got := int64(sweptCount) + removed.Load(); got != int64(put[swept]) {
		t.Errorf("the swept space holds %d and the sweeps removed %d: %d, but %d were put", sweptCount, removed.Load(), got, put[swept])
	}
	for _, space := range []protocol.ID{swept, kept} {
		u, err := s.Usage(space)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := s.Count(space)
		if u.Count != int64(want) {
			t.Errorf("space %x: usage counts %d messages, %d stored", space[:4], u.Count, want)
		}
	}
}
