package store

import (
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestBatchesShareReferencedParent: two relayed batches, each with
// a new child of a stored parent that a stored child names already. The
// second commits between the first's reads and its commit: the first must
// not conflict (and run again): both only write the parent's r key.
func TestBatchesShareReferencedParent(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	parent := syncTestMsg(sp, "parent")
	old := syncTestMsg(sp, "old")
	old.Prev = []protocol.ID{parent.ID}
	if _, err := s.PutBatch(t.Context(), []Message{parent, old}, Quota{}); err != nil {
		t.Fatal(err)
	}
	c1 := syncTestMsg(sp, "c1")
	c1.Prev = []protocol.ID{parent.ID}
	c2 := syncTestMsg(sp, "c2")
	c2.Prev = []protocol.ID{parent.ID}
	reads := 0
	s.afterRead = func(m *Message) {
		if m.ID != c1.ID {
			return
		}
		reads++
		if reads > 1 {
			return
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.PutBatch(t.Context(), []Message{c2}, Quota{})
			done <- err
		}()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if _, err := s.PutBatch(t.Context(), []Message{c1}, Quota{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the first batch read %d times", reads)
	if reads != 1 {
		t.Errorf("the first batch read %d times: it conflicted with the second", reads)
	}
}
