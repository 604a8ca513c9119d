package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// The outbox's conformance cases are in storetest (run by TestDisk and
// TestMemory); these need the store's insides or a reopen.

func openOutboxStore(tb testing.TB, opts Options) *Store {
	tb.Helper()
	if !opts.InMemory && opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	opts.SweepInterval = -1
	opts.GCInterval = -1
	s, err := Open(opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func outboxStores(t *testing.T, fn func(t *testing.T, s *Store)) {
	t.Run("disk", func(t *testing.T) { fn(t, openOutboxStore(t, Options{})) })
	t.Run("memory", func(t *testing.T) { fn(t, openOutboxStore(t, Options{InMemory: true})) })
}

func testOut(name, to string, next int64) Outgoing {
	return Outgoing{
		ID:      protocol.MessageID([]byte(name)),
		To:      to,
		Raw:     []byte("wire:" + name),
		Created: 1000,
		NextTry: next,
	}
}

func mustEnqueue(tb testing.TB, s *Store, o Outgoing) {
	tb.Helper()
	if added, err := s.Enqueue(o); err != nil || !added {
		tb.Fatalf("Enqueue(%s) = %v, %v", o.ID, added, err)
	}
}

func mustPending(tb testing.TB, s *Store) []Outgoing {
	tb.Helper()
	os, err := s.Pending("", math.MaxInt32)
	if err != nil {
		tb.Fatalf("Pending: %v", err)
	}
	return os
}

func mustDead(tb testing.TB, s *Store) []DeadLetter {
	tb.Helper()
	ds, _, err := s.DeadLetters(0, math.MaxInt32)
	if err != nil {
		tb.Fatalf("DeadLetters: %v", err)
	}
	return ds
}

func equalOutgoing(a, b Outgoing) bool {
	return a.ID == b.ID && a.To == b.To && bytes.Equal(a.Raw, b.Raw) && a.Created == b.Created &&
		a.Deadline == b.Deadline && a.Attempts == b.Attempts && a.NextTry == b.NextTry && a.LastError == b.LastError
}

func equalDead(a, b []DeadLetter) bool {
	return slices.EqualFunc(a, b, func(x, y DeadLetter) bool {
		return equalOutgoing(x.Outgoing, y.Outgoing) && x.Reason == y.Reason && x.DeadAt == y.DeadAt && x.Cursor == y.Cursor
	})
}

// TestOutboxReopen checks that the outbox, its indexes and the dead
// letters survive a reopen, and that dead-letter cursors are not reused.
func TestOutboxReopen(t *testing.T) {
	dir := t.TempDir()
	s := openOutboxStore(t, Options{Dir: dir})
	for i := range 10 {
		o := testOut(fmt.Sprint("r", i), fmt.Sprint("peer", i%2), int64(2000+i))
		o.Deadline = 5000
		if i == 0 {
			o.Raw = bytes.Repeat([]byte("r"), MaxOutgoingSize) // three chunks
		}
		mustEnqueue(t, s, o)
	}
	ids := func(i int) protocol.ID { return protocol.MessageID([]byte(fmt.Sprint("r", i))) }
	if err := s.Retry(ids(1), 3, 1500, "refused"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delivered(ids(2)); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 4, 5} {
		if err := s.Kill(ids(i), fmt.Sprint("dead ", i), int64(3000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteDeadLetter(ids(5)); err != nil { // the last: its cursor must not come back
		t.Fatal(err)
	}
	pending, dead := mustPending(t, s), mustDead(t, s)
	due, err := s.Due(2004, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openOutboxStore(t, Options{Dir: dir})
	if got := mustPending(t, s); !slices.EqualFunc(got, pending, equalOutgoing) {
		t.Errorf("Pending after reopen differs: %d entries, before %d", len(got), len(pending))
	}
	if got, err := s.Due(2004, 100); err != nil || !slices.EqualFunc(got, due, equalOutgoing) {
		t.Errorf("Due after reopen = %d entries, %v; before %d", len(got), err, len(due))
	}
	if got := mustDead(t, s); !equalDead(got, dead) {
		t.Errorf("DeadLetters after reopen = %+v, before %+v", got, dead)
	}
	if n, err := s.OutboxLen(); err != nil || n != len(pending) {
		t.Errorf("OutboxLen after reopen = %d, %v; want %d", n, err, len(pending))
	}
	for _, i := range []int{0, 3} { // queued, dead
		o := testOut(fmt.Sprint("r", i), "peer0", 0)
		if added, err := s.Enqueue(o); err != nil || added {
			t.Errorf("Enqueue(r%d) after reopen = %v, %v; want false", i, added, err)
		}
	}
	last := dead[len(dead)-1].Cursor + 1 // r5's, deleted
	if err := s.Kill(ids(6), "after reopen", 4000); err != nil {
		t.Fatal(err)
	}
	ds, _, err := s.DeadLetters(last, 10)
	if err != nil || len(ds) != 1 || ds[0].ID != ids(6) {
		t.Fatalf("DeadLetters after the deleted last = %+v, %v; want r6", ds, err)
	}
}

// corruptions damage entry id of s in different ways.
var corruptions = []struct {
	name   string
	dead   bool // a dead letter, not an outbox entry
	record bool // the record itself, not the wire bytes
	apply  func(txn *badger.Txn, id protocol.ID) error
}{
	{"garbage record", false, true, func(txn *badger.Txn, id protocol.ID) error {
		return txn.Set(outboxKey(id), []byte{1, 2, 3})
	}},
	{"future version", false, true, func(txn *badger.Txn, id protocol.ID) error {
		val, err := get(txn, outboxKey(id))
		if err != nil {
			return err
		}
		val[0] = 9
		return txn.Set(outboxKey(id), val)
	}},
	{"trailing bytes", false, true, func(txn *badger.Txn, id protocol.ID) error {
		val, err := get(txn, outboxKey(id))
		if err != nil {
			return err
		}
		return txn.Set(outboxKey(id), append(val, 0))
	}},
	{"empty record", false, true, func(txn *badger.Txn, id protocol.ID) error {
		return txn.Set(outboxKey(id), nil)
	}},
	{"missing chunk", false, false, func(txn *badger.Txn, id protocol.ID) error {
		return txn.Delete(outboxRawKey(id, 0))
	}},
	{"short chunk", false, false, func(txn *badger.Txn, id protocol.ID) error {
		return txn.Set(outboxRawKey(id, 0), []byte("w"))
	}},
	{"garbage dead letter", true, true, func(txn *badger.Txn, id protocol.ID) error {
		return txn.Set(deadKey(id), []byte{1, 0xff})
	}},
	{"dead letter of another seq", true, true, func(txn *badger.Txn, id protocol.ID) error {
		val, err := get(txn, deadKey(id))
		if err != nil {
			return err
		}
		val[1+seqSize-1]++
		return txn.Set(deadKey(id), val)
	}},
	{"dead letter missing chunk", true, false, func(txn *badger.Txn, id protocol.ID) error {
		return txn.Delete(outboxRawKey(id, 0))
	}},
}

// TestOutboxCorrupt checks that a corrupt entry gives an error naming it,
// does not panic, and can be removed, after which the rest reads again.
func TestOutboxCorrupt(t *testing.T) {
	for _, tc := range corruptions {
		t.Run(tc.name, func(t *testing.T) {
			outboxStores(t, func(t *testing.T, s *Store) {
				good, bad := testOut("good", "peer", 1000), testOut("bad", "peer", 1001)
				mustEnqueue(t, s, good)
				mustEnqueue(t, s, bad)
				if tc.dead {
					for _, o := range []Outgoing{good, bad} {
						if err := s.Kill(o.ID, "x", 2000); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := s.db.Update(func(txn *badger.Txn) error { return tc.apply(txn, bad.ID) }); err != nil {
					t.Fatal(err)
				}
				checkCorrupt := func(what string, err error) {
					t.Helper()
					var ce *CorruptError
					if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.ID != bad.ID || ce.Dead != tc.dead {
						t.Errorf("%s = %v, want a CorruptError for %s", what, err, bad.ID)
					}
				}
				if tc.dead {
					_, _, err := s.DeadLetters(0, 10)
					checkCorrupt("DeadLetters", err)
					if err := s.DeleteDeadLetter(bad.ID); err != nil {
						t.Fatalf("DeleteDeadLetter(corrupt): %v", err)
					}
					if ds := mustDead(t, s); len(ds) != 1 || ds[0].ID != good.ID {
						t.Errorf("DeadLetters after deleting the corrupt one = %+v", ds)
					}
				} else {
					_, err := s.Pending("", 10)
					checkCorrupt("Pending", err)
					_, err = s.Pending("peer", 10)
					checkCorrupt("Pending(peer)", err)
					_, err = s.Due(math.MaxInt64, 10)
					checkCorrupt("Due", err)
					if got, err := s.Due(1000, 10); err != nil || len(got) != 1 {
						t.Errorf("Due before the corrupt entry = %d, %v", len(got), err) // not read
					}
					if tc.record { // the wire bytes are not read
						checkCorrupt("Retry", s.Retry(bad.ID, 1, 5, ""))
						checkCorrupt("Kill", s.Kill(bad.ID, "", 5))
					}
					if added, err := s.Enqueue(bad); err != nil || added {
						t.Errorf("Enqueue(corrupt) = %v, %v; want false, nil", added, err)
					}
					if err := s.Delivered(bad.ID); err != nil {
						t.Fatalf("Delivered(corrupt): %v", err)
					}
					if got := mustPending(t, s); len(got) != 1 || !equalOutgoing(got[0], good) {
						t.Errorf("Pending after removing the corrupt entry = %+v", got)
					}
				}
				if n := countKeysNaming(t, s, bad.ID); n != 0 {
					t.Errorf("%d keys still name the removed entry", n)
				}
			})
		})
	}
}

// countKeysNaming counts the outbox and dead-letter keys (and order
// values) that hold id.
func countKeysNaming(tb testing.TB, s *Store, id protocol.ID) int {
	tb.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if !bytes.ContainsRune([]byte{prefixOutbox, prefixOutboxDue, prefixOutboxTo, prefixOutboxRaw,
				prefixDead, prefixDeadOrder}, rune(k[0])) {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if bytes.Contains(k, id[:]) || bytes.Equal(v, id[:]) {
				n++
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// checkOutboxKeys checks, in one snapshot, that every message is in the
// outbox or among the dead letters, not both, with exactly the index keys
// its record names and its wire bytes; and that nothing else is left
// (but the sent log, which keeps delivered ones without their wire bytes).
func checkOutboxKeys(tb testing.TB, s *Store, ids []protocol.ID) {
	tb.Helper()
	err := s.db.View(func(txn *badger.Txn) error {
		want := make(map[string]bool)
		for _, id := range ids {
			o, n, errO := getOutgoing(txn, id)
			dv, errD := get(txn, deadKey(id))
			queued, dead := errO == nil, errD == nil
			if queued == dead {
				tb.Errorf("%s: in the outbox %v (%v), dead %v (%v)", id, queued, errO, dead, errD)
				continue
			}
			if dead {
				d, m, err := decodeDeadLetter(dv)
				if err != nil {
					return err
				}
				want[string(deadKey(id))] = true
				want[string(deadOrderKey(uint64(d.Cursor)))] = true
				n = m
			} else {
				want[string(outboxKey(id))] = true
				want[string(dueKey(o.NextTry, id))] = true
				want[string(recipientKey(o.To, o.NextTry, id))] = true
			}
			for i := range rawChunks(n) {
				want[string(outboxRawKey(id, i))] = true
			}
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			if k[0] == prefixDeadSeqMax || k[0] == prefixVersion { // store-wide keys
				continue
			}
			if k[0] == prefixSent { // the sent log: see sent_test.go
				continue
			}
			if !want[k] {
				tb.Errorf("stray key %x", k)
			}
			delete(want, k)
		}
		for k := range want {
			tb.Errorf("missing key %x", k)
		}
		return nil
	})
	if err != nil {
		tb.Error(err)
	}
}

// TestOutboxKillSnapshot races Kill and Retry on the same messages while
// checking, in single snapshots, that no message is ever in both tables
// or in neither, and that the indexes always match the records.
func TestOutboxKillSnapshot(t *testing.T) {
	outboxStores(t, func(t *testing.T, s *Store) {
		const n = 40
		var ids []protocol.ID
		for i := range n {
			o := testOut(fmt.Sprint("snap", i), fmt.Sprint("peer", i%3), int64(i))
			mustEnqueue(t, s, o)
			ids = append(ids, o.ID)
		}
		var (
			stop   atomic.Bool
			wg     sync.WaitGroup
			checks atomic.Int64
		)
		wg.Go(func() {
			for !stop.Load() && !t.Failed() {
				checkOutboxKeys(t, s, ids)
				checks.Add(1)
			}
		})
		var mutators sync.WaitGroup
		for w := range 3 {
			mutators.Go(func() {
				for i := range n {
					id := ids[(i*7+w*13)%n]
					if err := s.Retry(id, w+1, int64(100*w+i), "r"); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Retry: %v", err)
					}
					if err := s.Kill(id, "k", 1); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Kill: %v", err)
					}
				}
			})
		}
		mutators.Wait()
		stop.Store(true)
		wg.Wait()
		checkOutboxKeys(t, s, ids)
		if len(mustPending(t, s)) != 0 || len(mustDead(t, s)) != n {
			t.Errorf("after killing everything: %d pending, %d dead", len(mustPending(t, s)), len(mustDead(t, s)))
		}
		t.Logf("%d snapshots checked", checks.Load())
	})
}

// TestOutboxIndexAfterRetries checks the exact key set after many
// concurrent Retries, Deliveries and Enqueues of the same messages.
func TestOutboxIndexAfterRetries(t *testing.T) {
	outboxStores(t, func(t *testing.T, s *Store) {
		const n = 10
		var ids []protocol.ID
		for i := range n {
			ids = append(ids, testOut(fmt.Sprint("idx", i), "peer", 0).ID)
		}
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				for r := range 80 {
					i := (r*5 + w) % n
					o := testOut(fmt.Sprint("idx", i), fmt.Sprint("peer", w%2), int64(r))
					var err error
					switch (r + w) % 5 {
					case 0:
						_, err = s.Enqueue(o)
					case 4:
						err = s.Delivered(o.ID)
					default:
						err = s.Retry(o.ID, r, int64(w*100+r), "x")
					}
					if err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		err := s.db.View(func(txn *badger.Txn) error {
			for _, id := range ids {
				if _, err := get(txn, outboxKey(id)); errors.Is(err, ErrNotFound) {
					for _, k := range keysEndingWith(txn, []byte{prefixOutboxDue}, id[:]) {
						t.Errorf("due key %x left for a delivered message", k)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var queued []protocol.ID
		for _, o := range mustPending(t, s) {
			queued = append(queued, o.ID)
		}
		checkOutboxKeys(t, s, queued)
	})
}

func TestOutgoingRecordRoundTrip(t *testing.T) {
	tests := []DeadLetter{
		{Outgoing: Outgoing{To: "p", Created: 0, NextTry: 0}, Cursor: 1},
		{
			Outgoing: Outgoing{To: strings.Repeat("x", MaxRecipientSize), Created: -5, Deadline: math.MaxInt64,
				NextTry: math.MinInt64, Attempts: maxAttempts, LastError: strings.Repeat("e", MaxReasonSize)},
			Reason: strings.Repeat("r", MaxReasonSize), DeadAt: -1, Cursor: math.MaxUint64,
		},
		{Outgoing: Outgoing{To: "12D3KooWabc", Created: 1767225600000, Deadline: 1767225660000, NextTry: 1767225601000,
			Attempts: 3, LastError: "dial backoff"}, Reason: "deadline", DeadAt: 1767225660001, Cursor: 42},
	}
	for _, want := range tests {
		for _, rawLen := range []int{1, dataChunkSize, dataChunkSize + 1, MaxOutgoingSize} {
			o, n, err := decodeOutgoing(encodeOutgoing(&want.Outgoing, rawLen))
			if err != nil || n != rawLen || !equalOutgoing(o, want.Outgoing) {
				t.Errorf("outgoing round trip of %+v, %d = %+v, %d, %v", want.Outgoing, rawLen, o, n, err)
			}
			d, n, err := decodeDeadLetter(encodeDeadLetter(&want, rawLen))
			if err != nil || n != rawLen || !equalDead([]DeadLetter{d}, []DeadLetter{want}) {
				t.Errorf("dead-letter round trip of %+v, %d = %+v, %d, %v", want, rawLen, d, n, err)
			}
		}
	}
	// Bad records: errors naming what is wrong.
	valid := encodeOutgoing(&Outgoing{To: "p"}, 1)
	bad := map[string][]byte{
		"empty":          nil,
		"version 2":      append([]byte{2}, valid[1:]...),
		"truncated":      valid[:10],
		"no recipient":   encodeOutgoing(&Outgoing{}, 1),
		"no wire bytes":  encodeOutgoing(&Outgoing{To: "p"}, 0),
		"too large":      encodeOutgoing(&Outgoing{To: "p"}, MaxOutgoingSize+1),
		"trailing":       append(slices.Clone(valid), 0),
		"long recipient": encodeOutgoing(&Outgoing{To: strings.Repeat("x", MaxRecipientSize+1)}, 1),
		"long error":     encodeOutgoing(&Outgoing{To: "p", LastError: strings.Repeat("x", MaxReasonSize+1)}, 1),
		"attempts":       encodeOutgoing(&Outgoing{To: "p", Attempts: maxAttempts + 1}, 1),
		"huge length":    append(slices.Clone(valid[:outgoingFixedSize+1]), binary.AppendUvarint(nil, math.MaxUint64)...),
	}
	for name, b := range bad {
		if _, _, err := decodeOutgoing(b); err == nil {
			t.Errorf("decodeOutgoing(%s) succeeded", name)
		}
		d := append([]byte{deadLetterVersion}, binary.BigEndian.AppendUint64(nil, 1)...)
		d = binary.BigEndian.AppendUint64(d, 0)
		d = append(append(d, 0), b...)
		if _, _, err := decodeDeadLetter(d); err == nil {
			t.Errorf("decodeDeadLetter(%s) succeeded", name)
		}
	}
	if _, _, err := decodeOutgoing(append([]byte{2}, valid[1:]...)); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("decodeOutgoing(version 2) = %v, want an error naming the version", err)
	}
	zeroSeq := encodeDeadLetter(&DeadLetter{Outgoing: Outgoing{To: "p"}}, 1)
	if _, _, err := decodeDeadLetter(zeroSeq); err == nil {
		t.Error("decodeDeadLetter(seq 0) succeeded")
	}
}

func FuzzDecodeOutgoing(f *testing.F) {
	o := Outgoing{To: "peer", Created: 5, Deadline: 9, NextTry: 7, Attempts: 2, LastError: "e"}
	f.Add(encodeOutgoing(&o, 100))
	f.Add(encodeDeadLetter(&DeadLetter{Outgoing: o, Reason: "r", DeadAt: 3, Cursor: 4}, 1))
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if o, n, err := decodeOutgoing(b); err == nil {
			o2, n2, err := decodeOutgoing(encodeOutgoing(&o, n))
			if err != nil || n2 != n || !equalOutgoing(o, o2) {
				t.Errorf("re-encoding %x decodes to %+v, %d, %v; want %+v, %d", b, o2, n2, err, o, n)
			}
		}
		if d, n, err := decodeDeadLetter(b); err == nil {
			d2, n2, err := decodeDeadLetter(encodeDeadLetter(&d, n))
			if err != nil || n2 != n || !equalDead([]DeadLetter{d}, []DeadLetter{d2}) {
				t.Errorf("re-encoding %x decodes to %+v, %d, %v; want %+v, %d", b, d2, n2, err, d, n)
			}
		}
	})
}

const benchOutboxRawSize = 256

// BenchmarkOutboxEnqueueDelivered measures one message through the outbox
// on disk: a durable Enqueue, then a durable Delivered.
func BenchmarkOutboxEnqueueDelivered(b *testing.B) {
	s := openOutboxStore(b, Options{})
	raw := bytes.Repeat([]byte("w"), benchOutboxRawSize)
	b.SetBytes(benchOutboxRawSize)
	b.ReportAllocs()
	var n uint64
	for b.Loop() {
		n++
		o := Outgoing{ID: protocol.MessageID(binary.BigEndian.AppendUint64(nil, n)), To: "peer", Raw: raw, Created: 1}
		if added, err := s.Enqueue(o); err != nil || !added {
			b.Fatalf("Enqueue = %v, %v", added, err)
		}
		if err := s.Delivered(o.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOutboxEnqueueDeliveredParallel is the same from many
// goroutines, whose commits share fsyncs.
func BenchmarkOutboxEnqueueDeliveredParallel(b *testing.B) {
	s := openOutboxStore(b, Options{})
	raw := bytes.Repeat([]byte("w"), benchOutboxRawSize)
	b.SetBytes(benchOutboxRawSize)
	b.ReportAllocs()
	b.SetParallelism(4)
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o := Outgoing{ID: protocol.MessageID(binary.BigEndian.AppendUint64(nil, n.Add(1))), To: "peer", Raw: raw, Created: 1}
			if _, err := s.Enqueue(o); err != nil {
				b.Error(err)
				return
			}
			if err := s.Delivered(o.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestOutboxNoLeftovers checks that a message that leaves the outbox or
// the dead letters leaves no key behind (but the dead-letter seq).
func TestOutboxNoLeftovers(t *testing.T) {
	outboxStores(t, func(t *testing.T, s *Store) {
		a, b := testOut("a", "peer", 5), testOut("b", "peer", 6)
		a.Raw = bytes.Repeat([]byte("a"), MaxOutgoingSize) // three chunks
		b.Raw = bytes.Repeat([]byte("b"), dataChunkSize+1) // two chunks
		mustEnqueue(t, s, a)
		mustEnqueue(t, s, b)
		if err := s.Retry(a.ID, 1, 50, "x"); err != nil {
			t.Fatal(err)
		}
		checkOutboxKeys(t, s, []protocol.ID{a.ID, b.ID})
		if err := s.Kill(b.ID, "x", 1); err != nil {
			t.Fatal(err)
		}
		checkOutboxKeys(t, s, []protocol.ID{a.ID, b.ID})
		if err := s.Delivered(a.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteDeadLetter(b.ID); err != nil {
			t.Fatal(err)
		}
		checkOutboxKeys(t, s, nil)
	})
}

// TestOutboxStaleIndex checks that index keys that disagree with the
// records (which the store never writes) are reported, not returned.
func TestOutboxStaleIndex(t *testing.T) {
	outboxStores(t, func(t *testing.T, s *Store) {
		a := testOut("a", "peer", 5)
		mustEnqueue(t, s, a)
		ghost := protocol.MessageID([]byte("ghost"))
		for name, key := range map[string][]byte{
			"stale due key":       dueKey(1, a.ID),
			"stale recipient key": recipientKey("peer", 1, a.ID),
			"other recipient":     recipientKey("other", 5, a.ID),
			"dangling due key":    dueKey(1, ghost),
		} {
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, nil) }); err != nil {
				t.Fatal(err)
			}
			_, err1 := s.Due(10, 10)
			_, err2 := s.Pending("", 10)
			_, err3 := s.Pending("peer", 10)
			_, err4 := s.Pending("other", 10)
			if err := errors.Join(err1, err2, err3, err4); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: reads = %v, want ErrCorrupt", name, err)
			}
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(key) }); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Due(10, 10); err != nil || len(got) != 1 {
				t.Errorf("%s removed: Due = %d, %v", name, len(got), err)
			}
		}
	})
}
