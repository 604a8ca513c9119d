// Package storetest is a conformance suite for store.Store, run against
// every way of opening one (on disk, in memory).
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// Opener returns a fresh, empty store opened with opts, completed with
// what the implementation needs (a Dir, InMemory), and arranges for it to
// be closed when t ends (closing twice must be harmless).
type Opener func(t testing.TB, opts store.Options) *store.Store

// RunRangeIndex runs the tests of the range index (Summary, Keys, Split,
// Count and what changes them), for a store opened with a small
// Options.IndexBlocks.
func RunRangeIndex(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"RangeModel", testRangeModel},
		{"RangeIndexRace", testRangeIndexRace},
		{"SyncKeyBounds", testSyncKeyBounds},
		{"DeleteCleansIndexes", testDeleteCleansIndexes},
		{"RetentionCount", testRetentionCount},
		{"SweepBacklog", testSweepBacklog},
		{"ExpiredNewestThenInside", testExpiredNewestThenInside},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// Run runs the suite.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"PutGetHas", testPutGetHas},
		{"PutInvalid", testPutInvalid},
		{"PutLarge", testPutLarge},
		{"Duplicate", testDuplicate},
		{"ReadOrder", testReadOrder},
		{"Paging", testPaging},
		{"ReadAfterLast", testReadAfterLast},
		{"End", testEnd},
		{"ReadUnknownSpace", testReadUnknownSpace},
		{"ReadBadLimit", testReadBadLimit},
		{"SpacesAreSeparate", testSpacesAreSeparate},
		{"Cursor", testCursor},
		{"Heads", testHeads},
		{"HeadsAcrossSpaces", testHeadsAcrossSpaces},
		{"Replies", testReplies},
		{"Changed", testChanged},
		{"Concurrent", testConcurrent},
		{"Spaces", testSpaces},
		{"Peers", testPeers},
		{"NotFound", testNotFound},
		{"Closed", testClosed},
		{"RangeModel", testRangeModel},
		{"RangeIndexRace", testRangeIndexRace},
		{"SyncKeyBounds", testSyncKeyBounds},
		{"ExpiredNewestThenInside", testExpiredNewestThenInside},
		{"Expiry", testExpiry},
		{"ExpiryReadSkips", testExpiryReadSkips},
		{"BackgroundSweep", testBackgroundSweep},
		{"DeleteCleansIndexes", testDeleteCleansIndexes},
		{"RetentionCount", testRetentionCount},
		{"RetentionAge", testRetentionAge},
		{"CountExempt", testCountExempt},
		{"SetRetention", testSetRetention},
		{"SweepBacklog", testSweepBacklog},
		{"Usage", testUsage},
		{"Quota", testQuota},
		{"QuotaConcurrent", testQuotaConcurrent},
		{"UsageAfterSweep", testUsageAfterSweep},
		{"SetLimits", testSetLimits},
		{"BatchModel", testBatchModel},
		{"BatchAdded", testBatchAdded},
		{"BatchQuota", testBatchQuota},
		{"BatchTooBig", testBatchTooBig},
		{"OutboxEnqueue", testOutboxEnqueue},
		{"OutboxDue", testOutboxDue},
		{"OutboxRetry", testOutboxRetry},
		{"OutboxDelivered", testOutboxDelivered},
		{"OutboxKill", testOutboxKill},
		{"DeadLetterPaging", testDeadLetterPaging},
		{"OutboxModel", testOutboxModel},
		{"OutboxKillAtomic", testOutboxKillAtomic},
		{"OutboxConcurrent", testOutboxConcurrent},
		{"OutboxClosed", testOutboxClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// ID returns a message or space ID derived from name.
func ID(name string) protocol.ID { return protocol.MessageID([]byte(name)) }

// Msg returns a message of space named name with parents prev; its Raw
// is derived from name.
func Msg(space protocol.ID, name string, prev ...protocol.ID) store.Message {
	return store.Message{
		ID:    ID(name),
		Space: space,
		Prev:  prev,
		Raw:   []byte(`{"content":"` + name + `"}`),
	}
}

// MustPut puts m and fails t on error.
func MustPut(t testing.TB, s *store.Store, m store.Message) (store.Entry, bool) {
	t.Helper()
	e, added, err := s.Put(t.Context(), m)
	if err != nil {
		t.Fatalf("Put(%s): %v", m.ID, err)
	}
	return e, added
}

// ReadAll reads every entry of space, page entries at a time, checking
// that cursors grow (the cursor returned may be past the last entry when
// expired messages were skipped).
func ReadAll(t testing.TB, s *store.Store, space protocol.ID, page int) []store.Entry {
	t.Helper()
	var (
		all []store.Entry
		cur store.Cursor
	)
	for {
		es, next, err := s.Read(space, cur, page)
		if err != nil {
			t.Fatalf("Read(%s, %v, %d): %v", space, cur, page, err)
		}
		if len(es) > page {
			t.Fatalf("Read returned %d entries, limit %d", len(es), page)
		}
		for _, e := range es {
			if e.Cursor <= cur {
				t.Fatalf("entry %s cursor %d not after %d", e.ID, e.Cursor, cur)
			}
			cur = e.Cursor
		}
		if next < cur {
			t.Fatalf("Read returned next cursor %d, last entry at %d", next, cur)
		}
		if len(es) == 0 && next == cur {
			return all
		}
		cur = next
		all = append(all, es...)
	}
}

func ids(es []store.Entry) []protocol.ID {
	out := make([]protocol.ID, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func checkEntry(t testing.TB, got store.Entry, want store.Message) {
	t.Helper()
	if got.ID != want.ID || got.Space != want.Space || !bytes.Equal(got.Raw, want.Raw) ||
		!slices.Equal(got.Prev, want.Prev) || !slices.Equal(got.ReplyTo, want.ReplyTo) ||
		got.Time != want.Time || got.Expires != want.Expires {
		t.Errorf("entry %s = {space %s time %d expires %d prev %v reply-to %v raw %q}, "+
			"want {space %s time %d expires %d prev %v reply-to %v raw %q}",
			want.ID, got.Space, got.Time, got.Expires, got.Prev, got.ReplyTo, got.Raw,
			want.Space, want.Time, want.Expires, want.Prev, want.ReplyTo, want.Raw)
	}
	if got.Cursor == 0 {
		t.Errorf("entry %s has zero cursor", want.ID)
	}
}

func testPutGetHas(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	a := Msg(sp, "a")
	b := Msg(sp, "b", a.ID)
	b.Raw = bytes.Repeat([]byte("x"), 4096) // above the value threshold

	for _, m := range []store.Message{a, b} {
		if ok, err := s.Has(m.ID); err != nil || ok {
			t.Fatalf("Has(%s) before Put = %v, %v; want false, nil", m.ID, ok, err)
		}
		e, added := MustPut(t, s, m)
		if !added {
			t.Fatalf("Put(%s) added = false for a new message", m.ID)
		}
		checkEntry(t, e, m)
		if ok, err := s.Has(m.ID); err != nil || !ok {
			t.Fatalf("Has(%s) after Put = %v, %v; want true, nil", m.ID, ok, err)
		}
		got, err := s.Get(m.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", m.ID, err)
		}
		checkEntry(t, got, m)
		if got.Cursor != e.Cursor {
			t.Errorf("Get cursor %d, Put cursor %d", got.Cursor, e.Cursor)
		}
	}
	if n, err := s.Count(sp); err != nil || n != 2 {
		t.Errorf("Count = %d, %v; want 2", n, err)
	}
}

// testPutLarge puts messages at the protocol's 1 MiB size limit.
func testPutLarge(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	var prev []protocol.ID
	for i := range 3 {
		m := Msg(sp, fmt.Sprint("large", i), prev...)
		m.Raw = bytes.Repeat([]byte{byte('a' + i)}, 1<<20)
		MustPut(t, s, m)
		got, err := s.Get(m.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		checkEntry(t, got, m)
		prev = append(prev, m.ID)
	}
	if n := len(ReadAll(t, s, sp, 2)); n != 3 {
		t.Errorf("Read %d large messages, want 3", n)
	}
}

func testPutInvalid(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	for _, m := range []store.Message{
		{Space: ID("space"), Raw: []byte("x")},
		{ID: ID("a"), Raw: []byte("x")},
	} {
		if _, _, err := s.Put(t.Context(), m); err == nil {
			t.Errorf("Put(%+v) succeeded, want error", m)
		}
	}
}

func testDuplicate(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	a := Msg(sp, "a")
	first, added := MustPut(t, s, a)
	if !added {
		t.Fatal("first Put: added = false")
	}
	MustPut(t, s, Msg(sp, "b"))
	again, added := MustPut(t, s, a)
	if added {
		t.Error("second Put of the same message: added = true")
	}
	if again.Cursor != first.Cursor {
		t.Errorf("duplicate Put returned cursor %d, first Put %d", again.Cursor, first.Cursor)
	}
	checkEntry(t, again, a)
	all := ReadAll(t, s, sp, 10)
	if want := []protocol.ID{a.ID, ID("b")}; !slices.Equal(ids(all), want) {
		t.Errorf("Read after duplicate = %v, want %v", ids(all), want)
	}
	if n, err := s.Count(sp); err != nil || n != 2 {
		t.Errorf("Count = %d, %v; want 2", n, err)
	}
}

// putN puts n messages named prefix0… into space, each naming the previous.
func putN(t testing.TB, s *store.Store, space protocol.ID, prefix string, n int) []store.Message {
	t.Helper()
	var ms []store.Message
	for i := range n {
		m := Msg(space, fmt.Sprintf("%s%d", prefix, i))
		if i > 0 {
			m.Prev = []protocol.ID{ms[i-1].ID}
		}
		MustPut(t, s, m)
		ms = append(ms, m)
	}
	return ms
}

func testReadOrder(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	// Names chosen so that ID order differs from put order.
	ms := putN(t, s, sp, "m", 20)
	all := ReadAll(t, s, sp, 100)
	if len(all) != len(ms) {
		t.Fatalf("Read returned %d entries, want %d", len(all), len(ms))
	}
	for i := range ms {
		checkEntry(t, all[i], ms[i])
	}
}

func testPaging(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	ms := putN(t, s, sp, "m", 23)
	want := make([]protocol.ID, len(ms))
	for i, m := range ms {
		want[i] = m.ID
	}
	for _, limit := range []int{1, 2, 5, 22, 23, 24, 1000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			if got := ids(ReadAll(t, s, sp, limit)); !slices.Equal(got, want) {
				t.Errorf("paging by %d read %d ids %v, want %d ids %v", limit, len(got), got, len(want), want)
			}
			es, _, err := s.Read(sp, 0, limit)
			if err != nil {
				t.Fatal(err)
			}
			if wantN := min(limit, len(ms)); len(es) != wantN {
				t.Errorf("Read(limit %d) returned %d entries, want %d", limit, len(es), wantN)
			}
		})
	}
	// Resuming from any entry's cursor continues right after that entry.
	all := ReadAll(t, s, sp, 100)
	for i, e := range all {
		es, _, err := s.Read(sp, e.Cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		if i == len(all)-1 {
			if len(es) != 0 {
				t.Errorf("Read after last entry returned %v", ids(es))
			}
		} else if len(es) != 1 || es[0].ID != all[i+1].ID {
			t.Errorf("Read after entry %d returned %v, want %s", i, ids(es), all[i+1].ID)
		}
	}
}

func testReadAfterLast(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	putN(t, s, sp, "m", 3)
	es, cur, err := s.Read(sp, 0, 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("Read = %d entries, %v; want 3", len(es), err)
	}
	for range 2 {
		es, next, err := s.Read(sp, cur, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 0 || next != cur {
			t.Errorf("Read after last = %d entries, cursor %d; want 0 entries, cursor %d", len(es), next, cur)
		}
	}
	// A cursor far beyond the end reads nothing and stays put.
	for _, c := range []store.Cursor{cur + 1000, store.Cursor(^uint64(0))} {
		es, next, err := s.Read(sp, c, 10)
		if err != nil || len(es) != 0 || next != c {
			t.Errorf("Read(after %d) = %d entries, cursor %d, %v; want 0, %d, nil", c, len(es), next, err, c)
		}
	}
	// New messages continue after the cursor.
	m := Msg(sp, "later")
	MustPut(t, s, m)
	es, next, err := s.Read(sp, cur, 10)
	if err != nil || len(es) != 1 || es[0].ID != m.ID || next != es[0].Cursor {
		t.Errorf("Read after a new Put = %v, %d, %v; want [%s]", ids(es), next, err, m.ID)
	}
}

func testEnd(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp, other := ID("space"), ID("other")
	if end, err := s.End(sp); err != nil || end != 0 {
		t.Fatalf("End of an empty space = %d, %v; want the start", end, err)
	}
	putN(t, s, sp, "m", 5)
	putN(t, s, other, "o", 2)
	es, last, err := s.Read(sp, 0, 10)
	if err != nil || len(es) != 5 {
		t.Fatalf("Read = %d entries, %v", len(es), err)
	}
	end, err := s.End(sp)
	if err != nil || end != last {
		t.Fatalf("End = %d, %v; want the cursor of the last message, %d", end, err, last)
	}
	if es, _, err := s.Read(sp, end, 10); err != nil || len(es) != 0 {
		t.Fatalf("Read after End = %d entries, %v; want none", len(es), err)
	}
	// Only what is stored later is read after End.
	m := Msg(sp, "later")
	MustPut(t, s, m)
	es, _, err = s.Read(sp, end, 10)
	if err != nil || len(es) != 1 || es[0].ID != m.ID {
		t.Fatalf("Read after End, after a Put = %v, %v; want [%s]", ids(es), err, m.ID)
	}
	if end2, err := s.End(sp); err != nil || end2 != es[0].Cursor {
		t.Fatalf("End after a Put = %d, %v; want %d", end2, err, es[0].Cursor)
	}
}

func testReadUnknownSpace(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	putN(t, s, ID("space"), "m", 2)
	for _, c := range []store.Cursor{0, 5} {
		es, next, err := s.Read(ID("unknown"), c, 10)
		if err != nil || len(es) != 0 || next != c {
			t.Errorf("Read(unknown, %d) = %d entries, %d, %v; want 0, %d, nil", c, len(es), next, err, c)
		}
	}
	if n, err := s.Count(ID("unknown")); err != nil || n != 0 {
		t.Errorf("Count(unknown) = %d, %v", n, err)
	}
	if h, err := s.Heads(ID("unknown")); err != nil || len(h) != 0 {
		t.Errorf("Heads(unknown) = %v, %v", h, err)
	}
}

func testReadBadLimit(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	for _, limit := range []int{0, -1} {
		if _, _, err := s.Read(ID("space"), 0, limit); err == nil {
			t.Errorf("Read(limit %d) succeeded, want error", limit)
		}
	}
}

func testSpacesAreSeparate(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	a, b := ID("a"), ID("b")
	var wantA, wantB []protocol.ID
	for i := range 10 {
		ma, mb := Msg(a, fmt.Sprint("a", i)), Msg(b, fmt.Sprint("b", i))
		MustPut(t, s, ma)
		MustPut(t, s, mb)
		wantA, wantB = append(wantA, ma.ID), append(wantB, mb.ID)
	}
	if got := ids(ReadAll(t, s, a, 3)); !slices.Equal(got, wantA) {
		t.Errorf("space a = %v, want %v", got, wantA)
	}
	if got := ids(ReadAll(t, s, b, 3)); !slices.Equal(got, wantB) {
		t.Errorf("space b = %v, want %v", got, wantB)
	}
}

func testCursor(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	putN(t, s, sp, "m", 5)
	cursors := []store.Cursor{0, 1, 2, 255, 256, 1 << 40, store.Cursor(^uint64(0))}
	for _, e := range ReadAll(t, s, sp, 2) {
		cursors = append(cursors, e.Cursor)
	}
	for _, c := range cursors {
		text := c.String()
		if (c == 0) != (text == "") {
			t.Errorf("Cursor(%d).String() = %q", c, text)
		}
		got, err := store.ParseCursor(text)
		if err != nil || got != c {
			t.Errorf("ParseCursor(%q) = %d, %v; want %d", text, got, err, c)
		}
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back store.Cursor
		if err := json.Unmarshal(j, &back); err != nil || back != c {
			t.Errorf("JSON round trip of %d via %s = %d, %v", c, j, back, err)
		}
	}
	valid := store.Cursor(7).String()
	for _, bad := range []string{
		"x",
		"AQ",
		valid + "A",
		valid[:len(valid)-1],
		valid[:len(valid)-1] + "=",
		valid[:len(valid)-1] + "+",
		valid[:len(valid)-1] + "/",
		"!!!!!!!!!!!!",
		"AAAAAAAAAAAH", // version 0
		"AgAAAAAAAAAH", // version 2
		"AQAAAAAAAAAA", // the start written as bytes
		" " + valid[1:],
		"AQAAAAAAAAAH==",
	} {
		if c, err := store.ParseCursor(bad); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %d, %v; want ErrBadCursor", bad, c, err)
		}
	}
}

func testHeads(t *testing.T, open Opener) {
	type put struct {
		name string
		prev []string
	}
	tests := []struct {
		name  string
		puts  []put
		heads []string
	}{
		{"empty", nil, nil},
		{"single", []put{{"a", nil}}, []string{"a"}},
		{"chain", []put{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"b"}}}, []string{"c"}},
		{"fork", []put{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a"}}}, []string{"b", "c"}},
		{"merge", []put{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"b", "c"}}}, []string{"d"}},
		{"two roots", []put{{"a", nil}, {"b", nil}}, []string{"a", "b"}},
		{"child before parent", []put{{"b", []string{"a"}}, {"a", nil}}, []string{"b"}},
		{"grandchild first", []put{{"c", []string{"b"}}, {"a", nil}, {"b", []string{"a"}}}, []string{"c"}},
		{"parent never arrives", []put{{"b", []string{"x"}}}, []string{"b"}},
		{"repeated prev", []put{{"a", nil}, {"b", []string{"a", "a"}}}, []string{"b"}},
		{"duplicate put", []put{{"a", nil}, {"b", []string{"a"}}, {"a", nil}}, []string{"b"}},
	}
	s := open(t, store.Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := ID("heads/" + tc.name)
			name := func(n string) string { return tc.name + "/" + n }
			for _, p := range tc.puts {
				var prev []protocol.ID
				for _, q := range p.prev {
					prev = append(prev, ID(name(q)))
				}
				MustPut(t, s, Msg(sp, name(p.name), prev...))
			}
			var want []protocol.ID
			for _, h := range tc.heads {
				want = append(want, ID(name(h)))
			}
			slices.SortFunc(want, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
			got, err := s.Heads(sp)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Heads = %v, want %v", got, want)
			}
		})
	}
}

func testHeadsAcrossSpaces(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	s1, s2 := ID("s1"), ID("s2")
	p := Msg(s2, "p")
	q := Msg(s1, "q", p.ID)
	r := Msg(s2, "r") // a root named by a message arriving before it, in another space
	u := Msg(s1, "u", r.ID)
	MustPut(t, s, p)
	MustPut(t, s, q)
	MustPut(t, s, u)
	MustPut(t, s, r)
	h1, err1 := s.Heads(s1)
	h2, err2 := s.Heads(s2)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	want1 := []protocol.ID{q.ID, u.ID}
	slices.SortFunc(want1, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	if !slices.Equal(h1, want1) || len(h2) != 0 {
		t.Errorf("Heads(s1) = %v, Heads(s2) = %v; want %v, []", h1, h2, want1)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func testChanged(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	a, b := ID("a"), ID("b")
	chA1, chA2, chB := s.Changed(a), s.Changed(a), s.Changed(b)
	if closed(chA1) || closed(chB) {
		t.Fatal("Changed channel closed before any Put")
	}
	m := Msg(a, "m")
	MustPut(t, s, m)
	// Put signals before it returns.
	if !closed(chA1) || !closed(chA2) {
		t.Error("Changed(a) not closed after a Put into a")
	}
	if closed(chB) {
		t.Error("Changed(b) closed by a Put into a")
	}
	chA3 := s.Changed(a)
	if closed(chA3) {
		t.Error("fresh Changed(a) already closed")
	}
	MustPut(t, s, m)
	if closed(chA3) {
		t.Error("Changed(a) closed by a duplicate Put")
	}
	MustPut(t, s, Msg(a, "n"))
	if !closed(chA3) {
		t.Error("Changed(a) not closed after a second new Put")
	}

	// Waiters in other goroutines are all woken.
	ch := s.Changed(b)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Error("waiter not woken")
			}
		})
	}
	MustPut(t, s, Msg(b, "x"))
	wg.Wait()
}

// testConcurrent: writers put into one space concurrently (some IDs from
// two writers at once) while followers tail it with Read + Changed. Every
// follower must see every message exactly once: a message must never
// become visible behind a cursor a follower has already passed.
func testConcurrent(t *testing.T, open Opener) {
	const (
		writers   = 8
		perWriter = 40
		total     = writers * perWriter
	)
	s := open(t, store.Options{})
	sp := ID("busy")
	gen := func(w, i int) store.Message {
		m := Msg(sp, fmt.Sprintf("w%d/%d", w, i))
		if i > 0 {
			m.Prev = []protocol.ID{ID(fmt.Sprintf("w%d/%d", w, i-1))}
		}
		return m
	}

	type result struct {
		seen  map[protocol.ID]int
		order []protocol.ID
	}
	followerLimits := []int{1, 3, 7, 50}
	results := make([]result, len(followerLimits))
	deadline := time.Now().Add(60 * time.Second)

	writersDone := make(chan struct{})
	var followers sync.WaitGroup
	for f, limit := range followerLimits {
		followers.Go(func() {
			r := result{seen: make(map[protocol.ID]int)}
			var cur store.Cursor
			for time.Now().Before(deadline) {
				ch := s.Changed(sp)
				es, next, err := s.Read(sp, cur, limit)
				if err != nil {
					t.Errorf("follower %d: Read: %v", f, err)
					return
				}
				for _, e := range es {
					if e.Cursor <= cur {
						t.Errorf("follower %d: cursor went back %d → %d", f, cur, e.Cursor)
					}
					cur = e.Cursor
					r.seen[e.ID]++
					r.order = append(r.order, e.ID)
				}
				if next != cur {
					t.Errorf("follower %d: next cursor %d, last entry %d", f, next, cur)
				}
				if len(es) == 0 {
					if closed(writersDone) {
						break // every Put has returned and this Read saw the end
					}
					select {
					case <-ch:
					case <-writersDone:
					case <-time.After(time.Until(deadline)):
						t.Errorf("follower %d: timed out with %d of %d messages", f, len(r.order), total)
					}
				}
			}
			results[f] = r
		})
	}

	var writersWG sync.WaitGroup
	var added sync.Map // id → times added
	for w := range writers {
		writersWG.Go(func() {
			for i := range perWriter {
				ms := []store.Message{gen(w, i)}
				if i%3 == 0 {
					// Race the next writer for its message.
					ms = append(ms, gen((w+1)%writers, i))
				}
				for _, m := range ms {
					e, ok, err := s.Put(t.Context(), m)
					if err != nil {
						t.Errorf("writer %d: Put: %v", w, err)
						return
					}
					if e.ID != m.ID || e.Cursor == 0 {
						t.Errorf("writer %d: Put returned entry %s at %d", w, e.ID, e.Cursor)
					}
					if ok {
						n, _ := added.LoadOrStore(m.ID, new(atomic.Int32))
						n.(*atomic.Int32).Add(1)
					}
				}
			}
		})
	}
	writersWG.Wait()
	close(writersDone)
	followers.Wait()
	if t.Failed() {
		return
	}

	nAdded := 0
	added.Range(func(k, v any) bool {
		nAdded++
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Errorf("message %s added %d times", k, n)
		}
		return true
	})
	if nAdded != total {
		t.Errorf("%d messages added, want %d", nAdded, total)
	}

	all := ReadAll(t, s, sp, 64)
	want := ids(all)
	uniq := make(map[protocol.ID]bool)
	for _, id := range want {
		if uniq[id] {
			t.Errorf("message %s appears twice in the order index", id)
		}
		uniq[id] = true
	}
	if len(uniq) != total {
		t.Errorf("order index holds %d distinct messages, want %d", len(uniq), total)
	}
	for w := range writers {
		for i := range perWriter {
			if !uniq[gen(w, i).ID] {
				t.Errorf("message w%d/%d missing", w, i)
			}
		}
	}
	if n, err := s.Count(sp); err != nil || n != total {
		t.Errorf("Count = %d, %v; want %d", n, err, total)
	}

	for f, r := range results {
		if !slices.Equal(r.order, want) {
			t.Errorf("follower %d (limit %d) saw %d messages, want the %d of the final order", f, followerLimits[f], len(r.order), len(want))
		}
		for id, n := range r.seen {
			if n != 1 {
				t.Errorf("follower %d saw %s %d times", f, id, n)
			}
		}
	}

	heads, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	var wantHeads []protocol.ID
	for w := range writers {
		wantHeads = append(wantHeads, gen(w, perWriter-1).ID)
	}
	slices.SortFunc(wantHeads, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	if !slices.Equal(heads, wantHeads) {
		t.Errorf("Heads = %v, want the last message of each writer %v", heads, wantHeads)
	}
}

func testSpaces(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	joined := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	b := store.Space{ID: protocol.SpaceID("bravo"), Name: "bravo", JoinedAt: joined}
	a := store.Space{ID: protocol.SpaceID("alpha"), Name: "alpha"}

	tests := []struct {
		name        string
		in          store.Space
		wantName    string
		wantCreated bool
	}{
		{"new", b, "bravo", true},
		{"again", b, "bravo", false},
		{"again renamed", store.Space{ID: b.ID, Name: "other", JoinedAt: time.Now()}, "bravo", false},
		{"second", a, "alpha", true},
	}
	for _, tc := range tests {
		got, created, err := s.JoinSpace(tc.in)
		if err != nil {
			t.Fatalf("%s: JoinSpace: %v", tc.name, err)
		}
		if created != tc.wantCreated || got.ID != tc.in.ID || got.Name != tc.wantName || got.JoinedAt.IsZero() {
			t.Errorf("%s: JoinSpace = %+v, %v; want name %q, created %v", tc.name, got, created, tc.wantName, tc.wantCreated)
		}
		if tc.in.ID == b.ID && !got.JoinedAt.Equal(joined) {
			t.Errorf("%s: JoinedAt = %v, want %v", tc.name, got.JoinedAt, joined)
		}
	}
	if _, _, err := s.JoinSpace(store.Space{Name: "zero"}); err == nil {
		t.Error("JoinSpace with a zero ID succeeded")
	}

	list, err := s.Spaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "bravo" {
		t.Fatalf("Spaces = %+v, want alpha, bravo", list)
	}
	got, err := s.Space(b.ID)
	if err != nil || got.Name != "bravo" || !got.JoinedAt.Equal(joined) {
		t.Errorf("Space(bravo) = %+v, %v", got, err)
	}

	// Leaving keeps the messages.
	m := Msg(b.ID, "m")
	MustPut(t, s, m)
	if err := s.LeaveSpace(b.ID); err != nil {
		t.Fatalf("LeaveSpace: %v", err)
	}
	if _, err := s.Space(b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Space after leave: %v, want ErrNotFound", err)
	}
	if err := s.LeaveSpace(b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second LeaveSpace: %v, want ErrNotFound", err)
	}
	if list, err := s.Spaces(); err != nil || len(list) != 1 || list[0].ID != a.ID {
		t.Errorf("Spaces after leave = %+v, %v; want alpha", list, err)
	}
	if ok, err := s.Has(m.ID); err != nil || !ok {
		t.Errorf("message gone after LeaveSpace: %v, %v", ok, err)
	}
	// Joining again creates a new record.
	if _, created, err := s.JoinSpace(b); err != nil || !created {
		t.Errorf("rejoin: created %v, %v", created, err)
	}
}

func testPeers(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	if ps, err := s.Peers(); err != nil || len(ps) != 0 {
		t.Fatalf("Peers on an empty store = %v, %v", ps, err)
	}
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	for _, p := range []store.Peer{
		{ID: "12D3KooWb", Addrs: []string{"/ip4/10.0.0.2/tcp/4001"}, LastSeen: t0},
		{ID: "12D3KooWa", LastSeen: t0},
		{ID: "12D3KooWb", Addrs: []string{"/ip4/10.0.0.3/tcp/4001", "/ip6/::1/udp/4001/quic-v1"}, LastSeen: t0.Add(time.Hour)},
	} {
		if err := s.PutPeer(p); err != nil {
			t.Fatalf("PutPeer(%s): %v", p.ID, err)
		}
	}
	if err := s.PutPeer(store.Peer{}); err == nil {
		t.Error("PutPeer with an empty ID succeeded")
	}
	ps, err := s.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].ID != "12D3KooWa" || ps[1].ID != "12D3KooWb" {
		t.Fatalf("Peers = %+v, want a, b", ps)
	}
	if !slices.Equal(ps[1].Addrs, []string{"/ip4/10.0.0.3/tcp/4001", "/ip6/::1/udp/4001/quic-v1"}) ||
		!ps[1].LastSeen.Equal(t0.Add(time.Hour)) || !ps[0].LastSeen.Equal(t0) {
		t.Errorf("Peers = %+v, want b updated", ps)
	}
}

func testNotFound(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	missing := ID("missing")
	if _, err := s.Get(missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get: %v, want ErrNotFound", err)
	}
	if _, err := s.Space(missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Space: %v, want ErrNotFound", err)
	}
	if err := s.LeaveSpace(missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LeaveSpace: %v, want ErrNotFound", err)
	}
	if ok, err := s.Has(missing); ok || err != nil {
		t.Errorf("Has = %v, %v; want false, nil", ok, err)
	}
}

func testClosed(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("space")
	m := Msg(sp, "m")
	MustPut(t, s, m)
	waiting := s.Changed(sp)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if !closed(waiting) {
		t.Error("Close did not wake a Changed waiter")
	}
	if !closed(s.Changed(sp)) {
		t.Error("Changed after Close returned an open channel")
	}
	calls := map[string]error{}
	_, _, calls["Put"] = s.Put(t.Context(), Msg(sp, "n"))
	_, calls["Has"] = s.Has(m.ID)
	_, calls["Get"] = s.Get(m.ID)
	_, _, calls["Read"] = s.Read(sp, 0, 1)
	_, calls["Count"] = s.Count(sp)
	_, calls["Heads"] = s.Heads(sp)
	_, _, calls["JoinSpace"] = s.JoinSpace(store.Space{ID: sp, Name: "x"})
	calls["LeaveSpace"] = s.LeaveSpace(sp)
	_, calls["Space"] = s.Space(sp)
	_, calls["Spaces"] = s.Spaces()
	calls["PutPeer"] = s.PutPeer(store.Peer{ID: "p"})
	_, calls["Peers"] = s.Peers()
	_, _, calls["Summary"] = s.Summary(sp, protocol.MinSyncKey, protocol.MaxSyncKey)
	_, calls["Keys"] = s.Keys(sp, protocol.MinSyncKey, protocol.MaxSyncKey, 1)
	_, calls["Split"] = s.Split(sp, protocol.MinSyncKey, protocol.MaxSyncKey, 2)
	_, _, calls["Wire"] = s.Wire(m.Space, m.ID)
	_, calls["Floor"] = s.Floor(sp)
	_, calls["SetRetention"] = s.SetRetention(sp, store.Retention{MaxCount: 1})
	_, calls["Sweep"] = s.Sweep(t.Context())
	_, calls["Replies"] = s.Replies(m.ID, 1)
	for name, err := range calls {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func testReplies(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	space := ID("replies")
	root := Msg(space, "root")
	MustPut(t, s, root)
	var want []protocol.ID
	for _, name := range []string{"r1", "r2", "r3"} {
		m := Msg(space, name)
		m.ReplyTo = []protocol.ID{root.ID}
		MustPut(t, s, m)
		MustPut(t, s, m) // a duplicate indexes nothing twice
		want = append(want, m.ID)
	}
	// A reply stored before the message it replies to is still found.
	early := Msg(space, "early")
	early.ReplyTo = []protocol.ID{ID("late")}
	MustPut(t, s, early)
	MustPut(t, s, Msg(space, "late"))

	slices.SortFunc(want, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	got, err := s.Replies(root.ID, 10)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Replies(root) = %v, %v; want %v", got, err, want)
	}
	if got, err := s.Replies(root.ID, 2); err != nil || len(got) != 2 {
		t.Errorf("Replies(root, 2) = %v, %v", got, err)
	}
	if got, err := s.Replies(ID("late"), 10); err != nil || len(got) != 1 || got[0] != early.ID {
		t.Errorf("Replies(late) = %v, %v", got, err)
	}
	if got, err := s.Replies(ID("r1"), 10); err != nil || len(got) != 0 {
		t.Errorf("Replies(leaf) = %v, %v", got, err)
	}
	if _, err := s.Replies(root.ID, 0); err == nil {
		t.Error("Replies with limit 0 succeeded")
	}
	e, err := s.Get(ID("r1"))
	if err != nil || !slices.Equal(e.ReplyTo, []protocol.ID{root.ID}) {
		t.Errorf("Get returns ReplyTo %v, %v; want [%s]", e.ReplyTo, err, root.ID)
	}
}
