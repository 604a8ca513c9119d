package store

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// compactors counts the goroutines running Badger's compactors.
func compactors() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "badger/v4.(*levelsController).runCompactor(")
}

// The store parks Badger's compactors (each a 50 ms ticker) once no write
// has been seen for compactIdleAfter and no level needs compaction, starts
// them again as the next write begins, and closes cleanly parked; what was
// written is there after a reopen.
func TestCompactorsParkWhenIdle(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	sp := protocol.SpaceID("idle")
	put := func(i int) {
		t.Helper()
		m := Message{ID: protocol.MessageID([]byte{byte(i)}), Space: sp, From: "a", Raw: make([]byte, 100)}
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitCompactors := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for compactors() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d compactors running, want %d", compactors(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCompactors(2)
	put(1)
	g := s.compact
	t0 := time.Now()
	g.check(t0) // sees the write
	g.check(t0.Add(compactIdleAfter - time.Second))
	waitCompactors(2) // not quiet for long enough yet
	g.check(t0.Add(compactIdleAfter))
	waitCompactors(0)
	g.check(t0.Add(2 * compactIdleAfter))
	g.mu.Lock()
	parks := g.parks
	g.mu.Unlock()
	if parks != 1 {
		t.Fatalf("parked %d times, want 1", parks)
	}

	put(2) // starts them at once
	waitCompactors(2)
	g.check(t0.Add(2*compactIdleAfter + time.Second)) // sees the write
	g.check(t0.Add(3 * compactIdleAfter))
	waitCompactors(2)

	// Parked at Close: the store starts them for Badger's Close, which
	// stops them.
	g.check(t0.Add(4 * compactIdleAfter))
	waitCompactors(0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitCompactors(0)
	s = openAt(t, dir)
	defer s.Close()
	if u, err := s.Usage(sp); err != nil || u.Count != 2 {
		t.Fatalf("after reopen: %+v, %v; want 2 messages", u, err)
	}
}

// A store that goes quiet with settleTables or more level-0 tables
// compacts level 0 once before it parks the compactors (every read goes
// through each level-0 table); what was written is all there after, and
// after a reopen.
func TestSettleLevelZero(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	sp := protocol.SpaceID("settle")
	raw := make([]byte, 800) // inline: the record holds it, in the LSM tree
	const n, batch = 30_000, 500
	ms := make([]Message, 0, batch)
	for i := range n {
		ms = append(ms, Message{ID: protocol.MessageID(binary.BigEndian.AppendUint64(nil, uint64(i))), Space: sp, From: "a", Time: int64(i), Raw: raw})
		if len(ms) == batch {
			if _, err := s.PutBatch(t.Context(), ms, Quota{}); err != nil {
				t.Fatal(err)
			}
			ms = ms[:0]
		}
	}
	level0 := func() int { return s.db.Levels()[0].NumTables }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not by the deadline (level 0 holds %d tables)", what, level0())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("memtables flushed", func() bool { return level0() >= settleTables })

	g := s.compact
	counts := func() (settles, parks int) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.settles, g.parks
	}
	t0 := time.Now()
	g.check(t0) // sees the writes
	// Quiet from here on: each check moves time on, as the gate's own
	// ticker does (which may also have run a check meanwhile).
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; ; i++ {
		g.check(t0.Add(compactIdleAfter + time.Duration(i)*compactCheck))
		if settles, parks := counts(); parks > 0 {
			if settles != 1 {
				t.Fatalf("parked after %d compactions of level 0, want 1", settles)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never parked (level 0 holds %d tables)", level0())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l0 := level0(); l0 != 0 {
		t.Fatalf("parked with %d level-0 tables, want 0", l0)
	}
	for _, st := range []*Store{s, nil} {
		if st == nil {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st = openAt(t, dir)
			defer st.Close()
		}
		if u, err := st.Usage(sp); err != nil || u.Count != n {
			t.Fatalf("%+v, %v; want %d messages", u, err, n)
		}
		for _, i := range []uint64{0, n / 2, n - 1} {
			id := protocol.MessageID(binary.BigEndian.AppendUint64(nil, i))
			if e, err := st.Get(id); err != nil || len(e.Raw) != len(raw) {
				t.Fatalf("message %d: %d bytes, %v", i, len(e.Raw), err)
			}
		}
	}
}
