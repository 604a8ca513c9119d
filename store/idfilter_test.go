package store

import (
	"crypto/rand"
	"fmt"
	"hash/maphash"
	"sync"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

func randomIDs(n int) []protocol.ID {
	ids := make([]protocol.ID, n)
	for i := range ids {
		rand.Read(ids[i][:])
	}
	return ids
}

// TestIDFilterNeverSaysNo: IDs added from several goroutines at once,
// past the first segment into the second, are all maybe; of IDs never
// added, few are.
func TestIDFilterNeverSaysNo(t *testing.T) {
	var f idFilter
	f.init(maphash.MakeSeed(), 1)
	ids := randomIDs(300_000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(ids); i += 4 {
				f.add(ids[i])
			}
		})
	}
	wg.Wait()
	if n := len(*f.segs.Load()); n != 2 {
		t.Errorf("%d segments for %d IDs, want 2", n, len(ids))
	}
	for i, id := range ids {
		if !f.mayHave(id) {
			t.Fatalf("ID %d of %d added, and the filter says no", i, len(ids))
		}
	}
	fresh := randomIDs(100_000)
	maybe := 0
	for _, id := range fresh {
		if f.mayHave(id) {
			maybe++
		}
	}
	t.Logf("%d of %d IDs never added say maybe", maybe, len(fresh))
	if maybe > len(fresh)*3/100 {
		t.Errorf("%d of %d IDs never added say maybe: over 3%%", maybe, len(fresh))
	}
}

// TestIDFilterFull: a filter that would outgrow its bytes stops growing
// and says maybe for every ID from then on.
func TestIDFilterFull(t *testing.T) {
	var f idFilter
	f.init(maphash.MakeSeed(), 1)
	f.max = 8 * len((*f.segs.Load())[0].words) // the first segment only
	ids := randomIDs(int((*f.segs.Load())[0].cap) * 9 / 10)
	for _, id := range ids {
		f.add(id)
	}
	if f.full.Load() {
		t.Fatal("full before its first segment is")
	}
	// Past the segment's IDs (a few said maybe already and were not
	// counted: some more than the rest of its count).
	fresh := randomIDs(len(ids) / 5)
	for _, id := range fresh {
		f.add(id)
	}
	if !f.full.Load() {
		t.Fatal("not full past its bytes")
	}
	for i, id := range append(ids, fresh...) {
		if !f.mayHave(id) {
			t.Fatalf("ID %d says no in a full filter", i)
		}
	}
}

func waitFiltersReady(t *testing.T, s *Store) {
	t.Helper()
	waitFor(t, s.ids.ready.Load)
}

// reopenedWith stores ms in a new store on disk, closes it and returns it
// opened again with its ID filters scanned (closed when t ends).
func reopenedWith(t *testing.T, ms []Message) *Store {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBatch(t.Context(), ms, Quota{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir, SweepInterval: -1, GCInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitFiltersReady(t, s)
	return s
}

// TestIDFiltersScanAtOpen: a store opened again fills its filters from
// what it holds: a message stored there and a parent a stored message
// names are maybe; a Put of the one is no new message and, of the
// other, no head.
func TestIDFiltersScanAtOpen(t *testing.T) {
	sp := protocol.MessageID([]byte("space"))
	parent := syncTestMsg(sp, "parent")
	child := syncTestMsg(sp, "child")
	child.Prev = []protocol.ID{parent.ID}
	other := syncTestMsg(sp, "other")
	s := reopenedWith(t, []Message{child, other})
	for _, m := range []Message{child, other} {
		if !s.ids.mayBeStored(m.ID) {
			t.Errorf("%s is stored, and its filter says no", m.Raw)
		}
	}
	if !s.ids.mayBeNamed(parent.ID) {
		t.Error("parent is named by a stored message, and its filter says no")
	}
	no := 0
	for _, id := range randomIDs(20) {
		if !s.ids.mayBeStored(id) && !s.ids.mayBeNamed(id) {
			no++
		}
	}
	if no < 15 {
		t.Errorf("only %d of 20 IDs never stored or named are no in both filters", no)
	}

	res, err := s.PutBatch(t.Context(), []Message{other, child}, Quota{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Added || r.Err != nil {
			t.Errorf("%s put again: added %v, err %v", r.Entry.Raw, r.Added, r.Err)
		}
	}
	if _, added, err := s.PutRelayed(t.Context(), parent, Quota{}); err != nil || !added {
		t.Fatalf("parent: added %v, err %v", added, err)
	}
	heads, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 2 || !containsID(heads, child.ID) || !containsID(heads, other.ID) {
		t.Errorf("heads %v, want child and other (parent is named by child)", heads)
	}
	if n, err := s.Count(sp); err != nil || n != 3 {
		t.Errorf("count %d (%v), want 3", n, err)
	}
}

// TestIDFiltersRecheck: a Put that skipped its reads on the filters'
// word while another Put wrote what it did not read (the same message, or
// a child naming it) finds out before it writes, and starts again: the
// message is stored once, and no head when a stored child names it. Both
// PutBatch and PutRelayed (one message a transaction), the other Put
// through the other one.
func TestIDFiltersRecheck(t *testing.T) {
	for _, batch := range []bool{true, false} {
		for _, racer := range []string{"same", "child"} {
			name := map[bool]string{true: "batch", false: "one"}[batch] + "/" + racer
			t.Run(name, func(t *testing.T) {
				s, err := Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				waitFiltersReady(t, s)
				sp := protocol.MessageID([]byte("space"))
				m := syncTestMsg(sp, "m")
				child := syncTestMsg(sp, "child")
				child.Prev = []protocol.ID{m.ID}
				race := map[string]Message{"same": m, "child": child}[racer]
				reads := 0
				racing := false // the other Put's own reads of m are not counted
				s.afterRead = func(got *Message) {
					if got.ID != m.ID || racing {
						return
					}
					if reads++; reads > 1 {
						return
					}
					racing = true
					defer func() { racing = false }()
					done := make(chan error, 1)
					go func() { // through the other path
						var err error
						if batch {
							_, _, err = s.PutRelayed(t.Context(), race, Quota{})
						} else {
							_, err = s.PutBatch(t.Context(), []Message{race}, Quota{})
						}
						done <- err
					}()
					if err := <-done; err != nil {
						t.Error(err)
					}
				}
				var added bool
				if batch {
					res, err := s.PutBatch(t.Context(), []Message{m}, Quota{})
					if err != nil {
						t.Fatal(err)
					}
					added = res[0].Added
				} else if _, added, err = s.PutRelayed(t.Context(), m, Quota{}); err != nil {
					t.Fatal(err)
				}
				// Again once the other wrote: a second attempt that reads
				// on past the record (child); one that finds the record
				// stored returns there, before afterRead (same), and the
				// count and keys below tell it did not store m again.
				if want := map[string]int{"same": 1, "child": 2}[racer]; reads != want {
					t.Errorf("the put read %d times, want %d", reads, want)
				}
				if want := racer == "child"; added != want {
					t.Errorf("added %v, want %v", added, want)
				}
				if n, err := s.Count(sp); err != nil || n != len(map[protocol.ID]bool{m.ID: true, race.ID: true}) {
					t.Errorf("count %d (%v)", n, err)
				}
				heads, err := s.Heads(sp)
				if err != nil {
					t.Fatal(err)
				}
				if len(heads) != 1 || heads[0] != race.ID {
					t.Errorf("heads %v, want only %s", heads, race.Raw)
				}
				checkAllKeys(t, s) // one order key each, usage counted once
			})
		}
	}
}

// TestIDFiltersScanResumes: the scan at Open reads in short transactions,
// each resuming where the one before stopped; with transactions of 7 keys
// every stored message and every named parent is in the filters after
// it, and a message put again is not stored twice.
func TestIDFiltersScanResumes(t *testing.T) {
	defer func(n int) { scanChunk = n }(scanChunk)
	scanChunk = 7
	sp := protocol.MessageID([]byte("space"))
	var ms []Message
	for i := range 100 {
		m := syncTestMsg(sp, fmt.Sprint("m", i))
		m.Prev = []protocol.ID{protocol.MessageID([]byte(fmt.Sprint("parent", i)))}
		ms = append(ms, m)
	}
	s := reopenedWith(t, ms)
	for _, m := range ms {
		if !s.ids.mayBeStored(m.ID) || !s.ids.mayBeNamed(m.Prev[0]) {
			t.Fatalf("%s or its parent is not in the filters after the scan", m.Raw)
		}
	}
	res, err := s.PutBatch(t.Context(), ms, Quota{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Added {
			t.Fatalf("%s stored twice", r.Entry.Raw)
		}
	}
	checkAllKeys(t, s)
}
