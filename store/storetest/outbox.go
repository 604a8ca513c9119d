package storetest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// Out returns an outgoing message named name for recipient to, queued at
// created and due then; its Raw is derived from name.
func Out(name, to string, created int64) store.Outgoing {
	return store.Outgoing{
		ID:      ID(name),
		To:      to,
		Raw:     []byte("wire:" + name),
		Created: created,
		NextTry: created,
	}
}

// MustEnqueue enqueues o and fails t on error.
func MustEnqueue(t testing.TB, s *store.Store, o store.Outgoing) bool {
	t.Helper()
	added, err := s.Enqueue(o)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", o.ID, err)
	}
	return added
}

// AllPending returns the whole outbox (Pending("")), failing t on error.
func AllPending(t testing.TB, s *store.Store) []store.Outgoing {
	t.Helper()
	os, err := s.Pending("", math.MaxInt32)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return os
}

// AllDeadLetters reads every dead letter, page at a time, checking that
// cursors grow.
func AllDeadLetters(t testing.TB, s *store.Store, page int) []store.DeadLetter {
	t.Helper()
	var (
		all []store.DeadLetter
		cur store.Cursor
	)
	for {
		ds, next, err := s.DeadLetters(cur, page)
		if err != nil {
			t.Fatalf("DeadLetters(%v, %d): %v", cur, page, err)
		}
		if len(ds) > page {
			t.Fatalf("DeadLetters returned %d, limit %d", len(ds), page)
		}
		for _, d := range ds {
			if d.Cursor <= cur {
				t.Fatalf("dead letter %s cursor %d not after %d", d.ID, d.Cursor, cur)
			}
			cur = d.Cursor
		}
		if next != cur {
			t.Fatalf("DeadLetters returned next cursor %d, last dead letter at %d", next, cur)
		}
		if len(ds) == 0 {
			return all
		}
		all = append(all, ds...)
	}
}

func outIDs(os []store.Outgoing) []protocol.ID {
	out := make([]protocol.ID, len(os))
	for i, o := range os {
		out[i] = o.ID
	}
	return out
}

func deadIDs(ds []store.DeadLetter) []protocol.ID {
	out := make([]protocol.ID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func sameOutgoing(a, b store.Outgoing) bool {
	return a.ID == b.ID && a.To == b.To && bytes.Equal(a.Raw, b.Raw) && a.Created == b.Created &&
		a.Deadline == b.Deadline && a.Attempts == b.Attempts && a.NextTry == b.NextTry && a.LastError == b.LastError
}

func checkOutgoing(t testing.TB, got, want store.Outgoing) {
	t.Helper()
	if !sameOutgoing(got, want) {
		t.Errorf("outgoing %s =\n  {to %q created %d deadline %d attempts %d next %d err %q raw %d bytes}, want\n"+
			"  {to %q created %d deadline %d attempts %d next %d err %q raw %d bytes}",
			want.ID, got.To, got.Created, got.Deadline, got.Attempts, got.NextTry, got.LastError, len(got.Raw),
			want.To, want.Created, want.Deadline, want.Attempts, want.NextTry, want.LastError, len(want.Raw))
	}
}

// sortOutbox sorts os in next-try order, as Pending and Due return them.
func sortOutbox(os []store.Outgoing) {
	slices.SortFunc(os, func(a, b store.Outgoing) int {
		if a.NextTry != b.NextTry {
			return cmp.Compare(a.NextTry, b.NextTry)
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
}

func testOutboxEnqueue(t *testing.T, open Opener) {
	const t0 = 1_000_000
	clock := NewClock(t0)
	s := open(t, store.Options{Now: clock.Now, SweepInterval: -1})

	a := Out("a", "peer1", t0-50)
	a.Deadline = t0 + 1000
	if !MustEnqueue(t, s, a) {
		t.Fatal("first Enqueue: added = false")
	}
	// The same ID again, whatever it holds, is not added.
	b := Out("b", "peer2", t0)
	b.ID = a.ID
	if MustEnqueue(t, s, b) {
		t.Error("second Enqueue of the same ID: added = true")
	}
	got := AllPending(t, s)
	if len(got) != 1 {
		t.Fatalf("Pending = %v, want [a]", outIDs(got))
	}
	checkOutgoing(t, got[0], a)
	if n, err := s.OutboxLen(); err != nil || n != 1 {
		t.Errorf("OutboxLen = %d, %v; want 1", n, err)
	}

	// Defaults: Created from the store's clock, NextTry = Created.
	c := store.Outgoing{ID: ID("c"), To: "peer1", Raw: []byte("x")}
	MustEnqueue(t, s, c)
	c.Created, c.NextTry = t0, t0
	// A NextTry past the deadline is moved back to it; a long error is cut
	// at a UTF-8 boundary.
	d := Out("d", "peer1", t0)
	d.Deadline, d.NextTry = t0+10, t0+500
	d.LastError = strings.Repeat("é", store.MaxReasonSize) // 2 bytes each
	MustEnqueue(t, s, d)
	d.NextTry = d.Deadline
	d.LastError = d.LastError[:store.MaxReasonSize]
	// Wire bytes at the limit fit, in memory too.
	big := Out("big", "peer3", t0+1)
	big.Raw = bytes.Repeat([]byte{'w'}, store.MaxOutgoingSize)
	big.Raw[len(big.Raw)-1] = 'z'
	MustEnqueue(t, s, big)

	want := []store.Outgoing{a, c, d, big}
	sortOutbox(want)
	got = AllPending(t, s)
	if !slices.Equal(outIDs(got), outIDs(want)) {
		t.Fatalf("Pending = %v, want %v", outIDs(got), outIDs(want))
	}
	for i := range want {
		checkOutgoing(t, got[i], want[i])
	}

	// Refused, with nothing stored.
	bad := map[string]store.Outgoing{
		"zero id":        {To: "p", Raw: []byte("x")},
		"no recipient":   {ID: ID("e1"), Raw: []byte("x")},
		"long recipient": {ID: ID("e2"), To: strings.Repeat("p", store.MaxRecipientSize+1), Raw: []byte("x")},
		"no wire bytes":  {ID: ID("e3"), To: "p"},
		"too large":      {ID: ID("e4"), To: "p", Raw: make([]byte, store.MaxOutgoingSize+1)},
		"attempts":       {ID: ID("e5"), To: "p", Raw: []byte("x"), Attempts: -1},
	}
	for name, o := range bad {
		if added, err := s.Enqueue(o); err == nil || added {
			t.Errorf("Enqueue(%s) = %v, %v; want an error", name, added, err)
		}
	}
	if n, err := s.OutboxLen(); err != nil || n != len(want) {
		t.Errorf("OutboxLen = %d, %v; want %d", n, err, len(want))
	}
	// A recipient at the size limit is fine.
	long := Out("long", strings.Repeat("p", store.MaxRecipientSize), t0)
	MustEnqueue(t, s, long)
	if got, err := s.Pending(long.To, 10); err != nil || len(got) != 1 {
		t.Errorf("Pending(long recipient) = %v, %v", outIDs(got), err)
	}

	// A dead letter is not queued again; once deleted, it may be.
	if err := s.Kill(a.ID, "gone", t0); err != nil {
		t.Fatal(err)
	}
	if MustEnqueue(t, s, a) {
		t.Error("Enqueue of a dead letter: added = true")
	}
	if err := s.DeleteDeadLetter(a.ID); err != nil {
		t.Fatal(err)
	}
	if !MustEnqueue(t, s, a) {
		t.Error("Enqueue after DeleteDeadLetter: added = false")
	}
	// A delivered message is forgotten: queued again if enqueued again.
	if err := s.Delivered(c.ID); err != nil {
		t.Fatal(err)
	}
	if !MustEnqueue(t, s, c) {
		t.Error("Enqueue after Delivered: added = false")
	}
}

func testOutboxDue(t *testing.T, open Opener) {
	const t0 = 1_000_000
	s := open(t, store.Options{SweepInterval: -1})
	var all []store.Outgoing
	for i := range 30 {
		o := Out(fmt.Sprint("m", i), fmt.Sprint("peer", i%3), t0)
		o.NextTry = t0 + int64(i%10)*100 - 300 // ties: ordered by ID
		if i == 7 {
			o.NextTry = -5 // before 1970
		}
		MustEnqueue(t, s, o)
		all = append(all, o)
	}
	sortOutbox(all)
	byID := make(map[protocol.ID]store.Outgoing)
	for _, o := range all {
		byID[o.ID] = o
	}
	for _, now := range []int64{math.MinInt64, -6, -5, t0 - 301, t0 - 300, t0, t0 + 550, math.MaxInt64} {
		var want []protocol.ID
		for _, o := range all {
			if o.NextTry <= now {
				want = append(want, o.ID)
			}
		}
		for _, limit := range []int{1, 4, 100} {
			got, err := s.Due(now, limit)
			if err != nil {
				t.Fatalf("Due(%d, %d): %v", now, limit, err)
			}
			if w := want[:min(limit, len(want))]; !slices.Equal(outIDs(got), w) {
				t.Errorf("Due(%d, %d) = %v, want %v", now, limit, outIDs(got), w)
			}
			for _, o := range got {
				checkOutgoing(t, o, byID[o.ID])
			}
		}
	}
	if got := AllPending(t, s); !slices.Equal(outIDs(got), outIDs(all)) {
		t.Errorf("Pending(\"\") = %v, want %v", outIDs(got), outIDs(all))
	}
	for p := range 3 {
		to := fmt.Sprint("peer", p)
		var want []store.Outgoing
		for _, o := range all {
			if o.To == to {
				want = append(want, o)
			}
		}
		got, err := s.Pending(to, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(outIDs(got), outIDs(want)) {
			t.Errorf("Pending(%s) = %v, want %v", to, outIDs(got), outIDs(want))
		}
		for i := range min(len(got), len(want)) {
			checkOutgoing(t, got[i], want[i])
		}
		if got, err := s.Pending(to, 2); err != nil || !slices.Equal(outIDs(got), outIDs(want[:2])) {
			t.Errorf("Pending(%s, 2) = %v, %v", to, outIDs(got), err)
		}
	}
	// A recipient whose ID is a prefix of another's sees only its own.
	for _, to := range []string{"peer", "peer00", "nobody", strings.Repeat("x", store.MaxRecipientSize+1)} {
		if got, err := s.Pending(to, 10); err != nil || len(got) != 0 {
			t.Errorf("Pending(%.20s) = %v, %v; want none", to, outIDs(got), err)
		}
	}
	for _, limit := range []int{0, -1} {
		if _, err := s.Due(t0, limit); err == nil {
			t.Errorf("Due(limit %d) succeeded", limit)
		}
		if _, err := s.Pending("", limit); err == nil {
			t.Errorf("Pending(limit %d) succeeded", limit)
		}
		if _, _, err := s.DeadLetters(0, limit); err == nil {
			t.Errorf("DeadLetters(limit %d) succeeded", limit)
		}
	}
}

func testOutboxRetry(t *testing.T, open Opener) {
	const t0 = 1_000_000
	s := open(t, store.Options{SweepInterval: -1})
	a, b := Out("a", "peer1", t0), Out("b", "peer1", t0+10)
	a.Deadline = t0 + 5000
	MustEnqueue(t, s, a)
	MustEnqueue(t, s, b)

	// a fails and is due again after b.
	if err := s.Retry(a.ID, 1, t0+100, "dial: no route"); err != nil {
		t.Fatal(err)
	}
	a.Attempts, a.NextTry, a.LastError = 1, t0+100, "dial: no route"
	if got, err := s.Due(t0+50, 10); err != nil || !slices.Equal(outIDs(got), []protocol.ID{b.ID}) {
		t.Errorf("Due(t0+50) after Retry = %v, %v; want [b]", outIDs(got), err)
	}
	got, err := s.Due(t0+100, 10)
	if err != nil || !slices.Equal(outIDs(got), []protocol.ID{b.ID, a.ID}) {
		t.Fatalf("Due(t0+100) after Retry = %v, %v; want [b a]", outIDs(got), err)
	}
	checkOutgoing(t, got[1], a)
	if got, err := s.Pending("peer1", 10); err != nil || !slices.Equal(outIDs(got), []protocol.ID{b.ID, a.ID}) {
		t.Errorf("Pending(peer1) after Retry = %v, %v; want [b a]", outIDs(got), err)
	}

	// Earlier again, then past the deadline: moved back to it.
	if err := s.Retry(a.ID, 2, t0-1, ""); err != nil {
		t.Fatal(err)
	}
	a.Attempts, a.NextTry, a.LastError = 2, t0-1, ""
	if got := AllPending(t, s); !slices.Equal(outIDs(got), []protocol.ID{a.ID, b.ID}) {
		t.Errorf("Pending after a second Retry = %v, want [a b]", outIDs(got))
	}
	if err := s.Retry(a.ID, 3, t0+1e9, "timeout"); err != nil {
		t.Fatal(err)
	}
	a.Attempts, a.NextTry, a.LastError = 3, a.Deadline, "timeout"
	got = AllPending(t, s)
	if !slices.Equal(outIDs(got), []protocol.ID{b.ID, a.ID}) {
		t.Fatalf("Pending after a Retry past the deadline = %v, want [b a]", outIDs(got))
	}
	checkOutgoing(t, got[1], a)
	if got, err := s.Due(a.Deadline, 10); err != nil || len(got) != 2 {
		t.Errorf("Due(deadline) = %v, %v; want both", outIDs(got), err)
	}
	if n, err := s.OutboxLen(); err != nil || n != 2 {
		t.Errorf("OutboxLen after Retries = %d, %v; want 2", n, err)
	}

	if err := s.Retry(ID("missing"), 1, t0, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Retry(missing) = %v, want ErrNotFound", err)
	}
	if err := s.Retry(a.ID, -1, t0, ""); err == nil {
		t.Error("Retry with negative attempts succeeded")
	}
	if err := s.Delivered(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Retry(b.ID, 1, t0, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Retry after Delivered = %v, want ErrNotFound", err)
	}
	if err := s.Kill(a.ID, "expired", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Retry(a.ID, 4, t0, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Retry after Kill = %v, want ErrNotFound", err)
	}
	if ds := AllDeadLetters(t, s, 10); len(ds) != 1 || ds[0].Attempts != 3 {
		t.Errorf("dead letters after a Retry of a dead one = %+v", ds)
	}
}

func testOutboxDelivered(t *testing.T, open Opener) {
	const t0 = 1_000_000
	s := open(t, store.Options{SweepInterval: -1})
	a, b := Out("a", "peer1", t0), Out("b", "peer1", t0)
	a.Raw = bytes.Repeat([]byte("a"), 600<<10) // two chunks
	MustEnqueue(t, s, a)
	MustEnqueue(t, s, b)
	for range 2 { // idempotent
		if err := s.Delivered(a.ID); err != nil {
			t.Fatalf("Delivered: %v", err)
		}
	}
	if err := s.Delivered(ID("never queued")); err != nil {
		t.Errorf("Delivered(never queued) = %v", err)
	}
	if got := AllPending(t, s); !slices.Equal(outIDs(got), []protocol.ID{b.ID}) {
		t.Errorf("Pending after Delivered = %v, want [b]", outIDs(got))
	}
	if got, err := s.Due(math.MaxInt64, 10); err != nil || !slices.Equal(outIDs(got), []protocol.ID{b.ID}) {
		t.Errorf("Due after Delivered = %v, %v; want [b]", outIDs(got), err)
	}
	if got, err := s.Pending("peer1", 10); err != nil || !slices.Equal(outIDs(got), []protocol.ID{b.ID}) {
		t.Errorf("Pending(peer1) after Delivered = %v, %v; want [b]", outIDs(got), err)
	}
	if n, err := s.OutboxLen(); err != nil || n != 1 {
		t.Errorf("OutboxLen = %d, %v; want 1", n, err)
	}
	// Queued again with smaller wire bytes: none of the old ones are left.
	a.Raw = []byte("short")
	MustEnqueue(t, s, a)
	got := AllPending(t, s)
	if len(got) != 2 {
		t.Fatalf("Pending = %v", outIDs(got))
	}
	for _, o := range got {
		if o.ID == a.ID {
			checkOutgoing(t, o, a)
		}
	}
	// Delivered does not touch dead letters.
	if err := s.Kill(b.ID, "no", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delivered(b.ID); err != nil {
		t.Fatal(err)
	}
	if ds := AllDeadLetters(t, s, 10); len(ds) != 1 || ds[0].ID != b.ID {
		t.Errorf("dead letters after Delivered of a dead one = %v, want [b]", deadIDs(ds))
	}
}

func testOutboxKill(t *testing.T, open Opener) {
	const t0 = 1_000_000
	clock := NewClock(t0 + 7)
	s := open(t, store.Options{Now: clock.Now, SweepInterval: -1})
	a, b := Out("a", "peer1", t0), Out("b", "peer2", t0+1)
	a.Deadline = t0 + 100
	a.Raw = bytes.Repeat([]byte("k"), 700<<10) // two chunks
	MustEnqueue(t, s, a)
	MustEnqueue(t, s, b)
	if err := s.Retry(a.ID, 5, t0+50, "refused"); err != nil {
		t.Fatal(err)
	}
	a.Attempts, a.NextTry, a.LastError = 5, t0+50, "refused"

	if err := s.Kill(a.ID, "deadline passed", t0+100); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := s.Kill(a.ID, "again", t0+101); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Kill = %v, want ErrNotFound", err)
	}
	if err := s.Kill(ID("missing"), "x", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Kill(missing) = %v, want ErrNotFound", err)
	}
	if got := AllPending(t, s); !slices.Equal(outIDs(got), []protocol.ID{b.ID}) {
		t.Errorf("Pending after Kill = %v, want [b]", outIDs(got))
	}
	if got, err := s.Pending("peer1", 10); err != nil || len(got) != 0 {
		t.Errorf("Pending(peer1) after Kill = %v, %v; want none", outIDs(got), err)
	}
	if got, err := s.Due(math.MaxInt64, 10); err != nil || !slices.Equal(outIDs(got), []protocol.ID{b.ID}) {
		t.Errorf("Due after Kill = %v, %v; want [b]", outIDs(got), err)
	}
	if n, err := s.OutboxLen(); err != nil || n != 1 {
		t.Errorf("OutboxLen after Kill = %d, %v; want 1", n, err)
	}

	// at 0 is the store's clock; a long reason is cut.
	long := strings.Repeat("r", store.MaxReasonSize+10)
	if err := s.Kill(b.ID, long, 0); err != nil {
		t.Fatal(err)
	}
	ds := AllDeadLetters(t, s, 10)
	if !slices.Equal(deadIDs(ds), []protocol.ID{a.ID, b.ID}) {
		t.Fatalf("DeadLetters = %v, want [a b]", deadIDs(ds))
	}
	checkOutgoing(t, ds[0].Outgoing, a)
	if ds[0].Reason != "deadline passed" || ds[0].DeadAt != t0+100 {
		t.Errorf("dead letter a: reason %q at %d", ds[0].Reason, ds[0].DeadAt)
	}
	checkOutgoing(t, ds[1].Outgoing, b)
	if ds[1].Reason != long[:store.MaxReasonSize] || ds[1].DeadAt != t0+7 {
		t.Errorf("dead letter b: reason of %d bytes at %d, want %d bytes at %d",
			len(ds[1].Reason), ds[1].DeadAt, store.MaxReasonSize, t0+7)
	}
	if n, err := s.OutboxLen(); err != nil || n != 0 {
		t.Errorf("OutboxLen = %d, %v; want 0", n, err)
	}

	if err := s.DeleteDeadLetter(a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDeadLetter(a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteDeadLetter = %v, want ErrNotFound", err)
	}
	if ds := AllDeadLetters(t, s, 10); !slices.Equal(deadIDs(ds), []protocol.ID{b.ID}) {
		t.Errorf("DeadLetters after delete = %v, want [b]", deadIDs(ds))
	}
	// Queued and killed again: a new place at the end of the list.
	a.Attempts, a.NextTry, a.LastError = 0, t0, ""
	MustEnqueue(t, s, a)
	if err := s.Kill(a.ID, "again", t0+200); err != nil {
		t.Fatal(err)
	}
	ds = AllDeadLetters(t, s, 1)
	if !slices.Equal(deadIDs(ds), []protocol.ID{b.ID, a.ID}) {
		t.Fatalf("DeadLetters = %v, want [b a]", deadIDs(ds))
	}
	checkOutgoing(t, ds[1].Outgoing, a)
}

func testDeadLetterPaging(t *testing.T, open Opener) {
	const t0 = 1_000_000
	s := open(t, store.Options{SweepInterval: -1})
	var want []protocol.ID
	for i := range 23 {
		o := Out(fmt.Sprint("d", i), "peer", t0)
		o.NextTry = t0 - int64(i) // outbox order is the reverse of death order
		MustEnqueue(t, s, o)
		want = append(want, o.ID)
	}
	for i, id := range want {
		if err := s.Kill(id, fmt.Sprint("reason ", i), t0+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 2, 5, 22, 23, 24, 1000} {
		if got := deadIDs(AllDeadLetters(t, s, limit)); !slices.Equal(got, want) {
			t.Errorf("paging by %d read %v, want %v", limit, got, want)
		}
	}
	// Resuming from any dead letter's cursor continues right after it.
	all := AllDeadLetters(t, s, 100)
	for i, d := range all {
		if d.Reason != fmt.Sprint("reason ", i) || d.DeadAt != t0+int64(i) {
			t.Errorf("dead letter %d: reason %q at %d", i, d.Reason, d.DeadAt)
		}
		ds, next, err := s.DeadLetters(d.Cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i == len(all)-1:
			if len(ds) != 0 || next != d.Cursor {
				t.Errorf("DeadLetters after the last = %v, %d; want none, %d", deadIDs(ds), next, d.Cursor)
			}
		case len(ds) != 1 || ds[0].ID != all[i+1].ID || next != ds[0].Cursor:
			t.Errorf("DeadLetters after %d = %v, %d; want %s", i, deadIDs(ds), next, all[i+1].ID)
		}
	}
	last := all[len(all)-1].Cursor
	for _, c := range []store.Cursor{last + 1000, store.Cursor(^uint64(0))} {
		if ds, next, err := s.DeadLetters(c, 10); err != nil || len(ds) != 0 || next != c {
			t.Errorf("DeadLetters(after %d) = %d, %d, %v; want 0, %d, nil", c, len(ds), next, err, c)
		}
	}

	// Deleted ones are skipped, including the last; its cursor is not
	// reused, so a reader past it still sees what dies next.
	for _, i := range []int{0, 5, 6, 22} {
		if err := s.DeleteDeadLetter(want[i]); err != nil {
			t.Fatal(err)
		}
	}
	rest := slices.Concat(want[1:5], want[7:22])
	if got := deadIDs(AllDeadLetters(t, s, 3)); !slices.Equal(got, rest) {
		t.Errorf("after deletes = %v, want %v", got, rest)
	}
	late := Out("late", "peer", t0)
	MustEnqueue(t, s, late)
	if err := s.Kill(late.ID, "late", t0); err != nil {
		t.Fatal(err)
	}
	ds, next, err := s.DeadLetters(last, 10)
	if err != nil || len(ds) != 1 || ds[0].ID != late.ID || ds[0].Cursor <= last || next != ds[0].Cursor {
		t.Errorf("DeadLetters(after the deleted last) = %v, %d, %v; want [late] after %d", deadIDs(ds), next, err, last)
	}
}

// testOutboxModel runs random operations against a model of the outbox
// and dead letters and compares every view of them.
func testOutboxModel(t *testing.T, open Opener) {
	const (
		t0   = 1_000_000
		nIDs = 40
		ops  = 1500
	)
	clock := NewClock(t0)
	s := open(t, store.Options{Now: clock.Now, SweepInterval: -1})
	rng := rand.New(rand.NewPCG(5, 6))
	recipients := []string{"p", "pp", "peer-x", "q"}
	outbox := make(map[protocol.ID]store.Outgoing)
	dead := make(map[protocol.ID]store.DeadLetter)
	var deadOrder []protocol.ID
	clamp := func(next, deadline int64) int64 {
		if deadline != 0 && next > deadline {
			return deadline
		}
		return next
	}

	check := func(step int) {
		t.Helper()
		var want []store.Outgoing
		for _, o := range outbox {
			want = append(want, o)
		}
		sortOutbox(want)
		got := AllPending(t, s)
		if !slices.Equal(outIDs(got), outIDs(want)) {
			t.Fatalf("step %d: Pending = %v, want %v", step, outIDs(got), outIDs(want))
		}
		for i := range want {
			checkOutgoing(t, got[i], want[i])
		}
		if n, err := s.OutboxLen(); err != nil || n != len(want) {
			t.Fatalf("step %d: OutboxLen = %d, %v; want %d", step, n, err, len(want))
		}
		now := t0 + rng.Int64N(4000) - 2000
		limit := 1 + rng.IntN(nIDs)
		var due []protocol.ID
		for _, o := range want {
			if o.NextTry <= now && len(due) < limit {
				due = append(due, o.ID)
			}
		}
		if got, err := s.Due(now, limit); err != nil || !slices.Equal(outIDs(got), due) {
			t.Fatalf("step %d: Due(%d, %d) = %v, %v; want %v", step, now, limit, outIDs(got), err, due)
		}
		for _, to := range recipients {
			var mine []protocol.ID
			for _, o := range want {
				if o.To == to {
					mine = append(mine, o.ID)
				}
			}
			if got, err := s.Pending(to, nIDs); err != nil || !slices.Equal(outIDs(got), mine) {
				t.Fatalf("step %d: Pending(%s) = %v, %v; want %v", step, to, outIDs(got), err, mine)
			}
		}
		ds := AllDeadLetters(t, s, 1+rng.IntN(8))
		if !slices.Equal(deadIDs(ds), deadOrder) {
			t.Fatalf("step %d: DeadLetters = %v, want %v", step, deadIDs(ds), deadOrder)
		}
		for _, d := range ds {
			w := dead[d.ID]
			checkOutgoing(t, d.Outgoing, w.Outgoing)
			if d.Reason != w.Reason || d.DeadAt != w.DeadAt {
				t.Fatalf("step %d: dead letter %s: %q at %d, want %q at %d", step, d.ID, d.Reason, d.DeadAt, w.Reason, w.DeadAt)
			}
		}
	}

	for step := range ops {
		id := ID(fmt.Sprint("model", rng.IntN(nIDs)))
		_, queued := outbox[id]
		_, isDead := dead[id]
		switch op := rng.IntN(10); {
		case op < 3: // enqueue
			o := store.Outgoing{
				ID:      id,
				To:      recipients[rng.IntN(len(recipients))],
				Raw:     fmt.Appendf(nil, "raw %d", step),
				Created: t0 + int64(step),
				NextTry: t0 + rng.Int64N(3000) - 1500,
			}
			if rng.IntN(3) == 0 {
				o.Deadline = t0 + rng.Int64N(3000) - 1000
			}
			added, err := s.Enqueue(o)
			if err != nil || added != (!queued && !isDead) {
				t.Fatalf("step %d: Enqueue = %v, %v; queued %v dead %v", step, added, err, queued, isDead)
			}
			if added {
				o.NextTry = clamp(o.NextTry, o.Deadline)
				outbox[id] = o
			}
		case op < 6: // retry
			attempts, next := rng.IntN(10), t0+rng.Int64N(3000)-1500
			msg := fmt.Sprint("error ", step)
			err := s.Retry(id, attempts, next, msg)
			if queued != (err == nil) || (!queued && !errors.Is(err, store.ErrNotFound)) {
				t.Fatalf("step %d: Retry = %v; queued %v", step, err, queued)
			}
			if queued {
				o := outbox[id]
				o.Attempts, o.NextTry, o.LastError = attempts, clamp(next, o.Deadline), msg
				outbox[id] = o
			}
		case op < 7: // delivered
			if err := s.Delivered(id); err != nil {
				t.Fatalf("step %d: Delivered = %v", step, err)
			}
			delete(outbox, id)
		case op < 9: // kill
			at := t0 + int64(step)
			err := s.Kill(id, fmt.Sprint("dead ", step), at)
			if queued != (err == nil) || (!queued && !errors.Is(err, store.ErrNotFound)) {
				t.Fatalf("step %d: Kill = %v; queued %v", step, err, queued)
			}
			if queued {
				dead[id] = store.DeadLetter{Outgoing: outbox[id], Reason: fmt.Sprint("dead ", step), DeadAt: at}
				deadOrder = append(deadOrder, id)
				delete(outbox, id)
			}
		default: // delete a dead letter
			err := s.DeleteDeadLetter(id)
			if isDead != (err == nil) || (!isDead && !errors.Is(err, store.ErrNotFound)) {
				t.Fatalf("step %d: DeleteDeadLetter = %v; dead %v", step, err, isDead)
			}
			delete(dead, id)
			deadOrder = slices.DeleteFunc(deadOrder, func(x protocol.ID) bool { return x == id })
		}
		if step%25 == 0 || step == ops-1 {
			check(step)
		}
	}
}

// testOutboxKillAtomic races Kill against Retry and repeated Enqueues of
// the same messages while readers watch: a message must always be in the
// outbox or among the dead letters, never both, never neither. Messages
// only move from the outbox to the dead letters here, so reading the
// dead letters, then the outbox, then the dead letters again shows a
// message in both (first read, second) or in neither (second, third)
// only if some snapshot had it so.
func testOutboxKillAtomic(t *testing.T, open Opener) {
	const (
		t0      = 1_000_000
		n       = 60
		killers = 3
	)
	s := open(t, store.Options{SweepInterval: -1})
	var outs []store.Outgoing
	for i := range n {
		o := Out(fmt.Sprint("atomic", i), fmt.Sprint("peer", i%4), t0)
		MustEnqueue(t, s, o)
		outs = append(outs, o)
	}

	deadSet := func() map[protocol.ID]bool {
		m := make(map[protocol.ID]bool)
		for _, d := range AllDeadLetters(t, s, 7) {
			if m[d.ID] {
				t.Errorf("%s is a dead letter twice", d.ID)
			}
			m[d.ID] = true
		}
		return m
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for rounds := 0; ; rounds++ {
				stop := closed(done)
				d1 := deadSet()
				pending := make(map[protocol.ID]bool)
				for _, o := range AllPending(t, s) {
					pending[o.ID] = true
				}
				d2 := deadSet()
				for _, o := range outs {
					if d1[o.ID] && pending[o.ID] {
						t.Errorf("round %d: %s in the outbox and among the dead letters", rounds, o.ID)
					}
					if !pending[o.ID] && !d2[o.ID] {
						t.Errorf("round %d: %s neither in the outbox nor among the dead letters", rounds, o.ID)
					}
				}
				if stop || t.Failed() {
					return
				}
			}
		})
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		kills = make(map[protocol.ID]int)
	)
	for k := range killers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(k), 9))
			for _, i := range rng.Perm(n) {
				o := outs[i]
				err := s.Kill(o.ID, fmt.Sprint("killer ", k), t0)
				switch {
				case err == nil:
					mu.Lock()
					kills[o.ID]++
					mu.Unlock()
				case !errors.Is(err, store.ErrNotFound):
					t.Errorf("Kill(%s): %v", o.ID, err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 3 * n {
			o := outs[i%n]
			if err := s.Retry(o.ID, i, t0+int64(i), "retry"); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Retry(%s): %v", o.ID, err)
			}
			if added, err := s.Enqueue(o); err != nil || added {
				t.Errorf("Enqueue(%s) again = %v, %v; want false, nil", o.ID, added, err)
			}
		}
	})
	wg.Wait()
	close(done)
	readers.Wait()

	for _, o := range outs {
		if kills[o.ID] != 1 {
			t.Errorf("%s killed %d times", o.ID, kills[o.ID])
		}
	}
	if got := AllPending(t, s); len(got) != 0 {
		t.Errorf("outbox after killing everything = %v", outIDs(got))
	}
	if n, err := s.OutboxLen(); err != nil || n != 0 {
		t.Errorf("OutboxLen = %d, %v; want 0", n, err)
	}
	if ds := deadSet(); len(ds) != n {
		t.Errorf("%d dead letters, want %d", len(ds), n)
	}
}

// testOutboxConcurrent runs Enqueue, Retry and Delivered on the same
// messages from many goroutines, then checks that the outbox and its
// indexes agree: every entry is indexed once, at its own NextTry.
func testOutboxConcurrent(t *testing.T, open Opener) {
	const (
		t0      = 1_000_000
		workers = 8
		n       = 24
		rounds  = 60
	)
	s := open(t, store.Options{SweepInterval: -1})
	out := func(i int) store.Outgoing { return Out(fmt.Sprint("busy", i), fmt.Sprint("peer", i%3), t0) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for r := range rounds {
				i := rng.IntN(n)
				o := out(i)
				switch rng.IntN(4) {
				case 0:
					if _, err := s.Enqueue(o); err != nil {
						t.Errorf("Enqueue: %v", err)
					}
				case 1, 2:
					// NextTry, attempts and error agree, so a record mixing two
					// Retries would show.
					next := t0 + int64(w*1000+r)
					err := s.Retry(o.ID, w*1000+r, next, fmt.Sprint(next))
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Errorf("Retry: %v", err)
					}
				case 3:
					if err := s.Delivered(o.ID); err != nil {
						t.Errorf("Delivered: %v", err)
					}
				}
				if r%10 == 0 {
					if _, err := s.Due(t0+int64(rng.IntN(8000)), 5); err != nil {
						t.Errorf("Due: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	all := AllPending(t, s)
	due, err := s.Due(math.MaxInt64, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outIDs(due), outIDs(all)) {
		t.Errorf("Due(all) = %v, Pending = %v", outIDs(due), outIDs(all))
	}
	if cnt, err := s.OutboxLen(); err != nil || cnt != len(all) {
		t.Errorf("OutboxLen = %d, %v; Pending has %d", cnt, err, len(all))
	}
	seen := make(map[protocol.ID]bool)
	byTo := 0
	for p := range 3 {
		to := fmt.Sprint("peer", p)
		mine, err := s.Pending(to, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		byTo += len(mine)
		for _, o := range mine {
			if o.To != to || seen[o.ID] {
				t.Errorf("Pending(%s) returned %s for %s (seen before: %v)", to, o.ID, o.To, seen[o.ID])
			}
			seen[o.ID] = true
		}
	}
	if byTo != len(all) {
		t.Errorf("Pending per recipient found %d, Pending(\"\") %d", byTo, len(all))
	}
	for i, o := range all {
		if i > 0 && (all[i-1].NextTry > o.NextTry) {
			t.Errorf("Pending out of order at %d", i)
		}
		if o.Attempts == 0 {
			if o.NextTry != t0 || o.LastError != "" {
				t.Errorf("%s never retried but next %d, error %q", o.ID, o.NextTry, o.LastError)
			}
		} else if o.NextTry != t0+int64(o.Attempts) || o.LastError != fmt.Sprint(o.NextTry) {
			t.Errorf("%s: attempts %d, next %d, error %q do not match", o.ID, o.Attempts, o.NextTry, o.LastError)
		}
		if !bytes.HasPrefix(o.Raw, []byte("wire:busy")) {
			t.Errorf("%s: raw %q", o.ID, o.Raw)
		}
	}
}

func testOutboxClosed(t *testing.T, open Opener) {
	s := open(t, store.Options{SweepInterval: -1})
	o := Out("o", "peer", 1)
	MustEnqueue(t, s, o)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{}
	_, calls["Enqueue"] = s.Enqueue(Out("p", "peer", 1))
	_, calls["Pending"] = s.Pending("", 1)
	_, calls["Due"] = s.Due(1, 1)
	calls["Retry"] = s.Retry(o.ID, 1, 2, "")
	calls["Delivered"] = s.Delivered(o.ID)
	calls["Kill"] = s.Kill(o.ID, "", 1)
	_, _, calls["DeadLetters"] = s.DeadLetters(0, 1)
	calls["DeleteDeadLetter"] = s.DeleteDeadLetter(o.ID)
	_, calls["OutboxLen"] = s.OutboxLen()
	for name, err := range calls {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}
