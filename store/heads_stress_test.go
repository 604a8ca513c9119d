package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// headsTruth reads every stored message and returns, per space, the
// stored messages no stored message names in Prev.
func headsTruth(t *testing.T, s *Store) map[protocol.ID][]protocol.ID {
	t.Helper()
	type rec struct {
		space protocol.ID
		prev  []protocol.ID
	}
	all := map[protocol.ID]rec{}
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		pre := []byte{prefixMessage}
		opts.Prefix = pre
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(pre); it.Next() {
			k := it.Item().KeyCopy(nil)
			if len(k) != 1+protocol.IDSize {
				continue
			}
			id := protocol.ID(k[1:])
			e, err := readEntry(txn, id)
			if err != nil {
				return err
			}
			all[id] = rec{e.Space, e.Prev}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := map[protocol.ID]bool{}
	for id, r := range all {
		for _, p := range r.prev {
			if p != id {
				named[p] = true
			}
		}
	}
	out := map[protocol.ID][]protocol.ID{}
	for id, r := range all {
		if !named[id] {
			out[r.space] = append(out[r.space], id)
		}
	}
	for sp := range out {
		slices.SortFunc(out[sp], func(a, b protocol.ID) int { return slices.Compare(a[:], b[:]) })
	}
	return out
}

// TestHeadsStress puts a random graph of 3,000 messages in two spaces,
// out of order, through every way of putting (relayed, durable, batches;
// some refused by a quota), while senders name the cached heads, a space's
// cache is dropped now and then (read again from disk while Puts are in
// flight) and, every other round, messages are deleted; commits are held
// before their heads update at random. The cached heads, the head keys on
// disk and the truth (stored messages no stored message names) must
// agree, no Put may stay pending, and (without deletes) every parent a
// send named must be stored; again after a reopen. (Written by review of
// the cached heads following commits without a read.)
func TestHeadsStress(t *testing.T) {
	for round := range 8 {
		t.Run(fmt.Sprint(round), func(t *testing.T) { headsStress(t, round, round%2 == 0) })
	}
}

func headsStress(t *testing.T, seed int, deletes bool) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.afterCommit = func(*Message) {
		if rand.IntN(3) == 0 {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		}
	}
	spaces := []protocol.ID{protocol.MessageID([]byte(fmt.Sprint("sa", seed))), protocol.MessageID([]byte(fmt.Sprint("sb", seed)))}
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	const n = 3000
	ms := make([]Message, n)
	for i := range ms {
		sp := spaces[r.IntN(2)]
		m := Message{ID: protocol.MessageID([]byte(fmt.Sprint(seed, "m", i))), Space: sp, Raw: []byte(fmt.Sprint("m", i)), Time: int64(i)}
		for k := r.IntN(4); k > 0 && i > 0; k-- {
			m.Prev = append(m.Prev, ms[max(0, i-1-r.IntN(min(i, 8)))].ID)
		}
		if r.IntN(10) == 0 {
			m.Prev = append(m.Prev, protocol.MessageID([]byte(fmt.Sprint("never", i))))
		}
		if r.IntN(8) == 0 {
			m.From = "greedy"
		}
		ms[i] = m
	}
	var mu sync.Mutex
	stored := map[protocol.ID]bool{}
	named := map[protocol.ID]bool{}
	var wg sync.WaitGroup
	var next atomic.Int64
	stop := make(chan struct{})
	// Out-of-order delivery of ms through each way of putting.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(seed), uint64(w+100)))
			for range n / 2 {
				at := int(next.Add(1)) % n
				q := Quota{}
				if r.IntN(3) == 0 {
					q.SenderBytes = 40
				}
				switch r.IntN(3) {
				case 0:
					m := ms[min(n-1, at+r.IntN(3))]
					if _, _, err := s.PutRelayed(t.Context(), m, q); err != nil && !isQuota(err) {
						t.Error(err)
					}
				case 1:
					m := ms[min(n-1, at+r.IntN(3))]
					if _, _, err := s.PutWithin(t.Context(), m, q); err != nil && !isQuota(err) {
						t.Error(err)
					}
				case 2:
					var b []Message
					for k := 1 + r.IntN(6); k > 0; k-- {
						b = append(b, ms[min(n-1, at+r.IntN(6))])
					}
					if _, err := s.PutBatch(t.Context(), b, q); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	// Senders: name the cached heads.
	for si, sp := range spaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h, err := s.Heads(sp)
				if err != nil {
					t.Error(err)
					return
				}
				m := Message{ID: protocol.MessageID([]byte(fmt.Sprint(seed, "send", si, i))), Space: sp, Prev: h, Raw: []byte("s"), Time: int64(1000 + i)}
				if i%2 == 0 {
					_, _, err = s.PutRelayed(t.Context(), m, Quota{})
				} else {
					_, _, err = s.Put(t.Context(), m)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				stored[m.ID] = true
				for _, p := range h {
					named[p] = true
				}
				mu.Unlock()
			}
		}()
	}
	// Drop a space's cache now and then: the next Heads reads it again
	// while Puts are in flight.
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(seed), 999))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(r.IntN(3)) * time.Millisecond):
			}
			s.headsMu.Lock()
			delete(s.heads, spaces[r.IntN(2)])
			s.headsMu.Unlock()
			if deletes && r.IntN(3) == 0 {
				var ids []protocol.ID
				for k := r.IntN(4); k >= 0; k-- {
					ids = append(ids, ms[r.IntN(n)].ID)
				}
				if _, err := s.deleteMessages(ids); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	for _, sp := range spaces {
		if _, err := s.Heads(sp); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	check := func(when string) {
		truth := headsTruth(t, s)
		for _, sp := range spaces {
			cached, err := s.Heads(sp)
			if err != nil {
				t.Fatal(err)
			}
			disk, err := s.readHeads(sp)
			if err != nil {
				t.Fatal(err)
			}
			want := truth[sp]
			if !slices.Equal(cached, want) || !slices.Equal(disk, want) {
				t.Errorf("%s space %d: cached %d disk %d truth %d\n cached-truth %v\n truth-cached %v\n disk-truth %v\n truth-disk %v", when, sp[0], len(cached), len(disk), len(want),
					notIn(cached, want), notIn(want, cached), notIn(disk, want), notIn(want, disk))
			}
		}
		s.pendingMu.Lock()
		left := len(s.pending)
		s.pendingMu.Unlock()
		if left != 0 {
			t.Errorf("%s: %d pending left", when, left)
		}
	}
	check("end")
	if !deletes {
		for p := range named {
			if has, err := s.Has(p); err != nil || !has {
				t.Errorf("a send named %x, not stored (%v)", p[:4], err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: dir, SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("reopen")
}

// notIn returns the IDs of a that b lacks, shortened.
func notIn(a, b []protocol.ID) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, fmt.Sprintf("%x", x[:4]))
		}
	}
	return out
}

func isQuota(err error) bool { return errors.Is(err, ErrQuota) }
