package store

import (
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
