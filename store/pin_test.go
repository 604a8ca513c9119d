package store

import (
	"errors"
	"fmt"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/weftmesh/weft/protocol"
)

// hasKey reports whether k is stored.
func hasKey(t *testing.T, s *Store, k []byte) bool {
	t.Helper()
	err := s.db.View(func(txn *badger.Txn) error { _, err := get(txn, k); return err })
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestPinKeepsParentThroughExpiry: a parent with a child that expires and
// one that never does (which pins it instead of a c key) stays no head
// once the first expires and is swept; a parent whose only children
// expire is a head again. Both through one Put at a time and a batch.
func TestPinKeepsParentThroughExpiry(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			clock := int64(1000)
			s := openSweepTest(t, &clock)
			sp := protocol.MessageID([]byte("space"))
			msg := func(name string, expires int64, prev ...Message) Message {
				m := syncTestMsg(sp, name)
				m.Expires = expires
				for _, p := range prev {
					m.Prev = append(m.Prev, p.ID)
				}
				return m
			}
			kept := msg("kept", 0)
			lone := msg("lone", 0)
			brief := msg("brief", 2000, kept)
			stays := msg("stays", 0, kept)
			alsoBrief := msg("also brief", 2000, lone)
			put := []Message{kept, lone, brief, stays, alsoBrief}
			if batch {
				if _, err := s.PutBatch(t.Context(), put, Quota{}); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, m := range put {
					if _, _, err := s.PutRelayed(t.Context(), m, Quota{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !hasKey(t, s, pinKey(kept.ID)) || hasKey(t, s, childKey(kept.ID, stays.ID)) {
				t.Error("the child that never expires did not pin its parent instead of a c key")
			}
			if !hasKey(t, s, childKey(kept.ID, brief.ID)) || !hasKey(t, s, childKey(lone.ID, alsoBrief.ID)) || hasKey(t, s, pinKey(lone.ID)) {
				t.Error("an expiring child has no c key, or pinned")
			}
			checkHeads(t, s, sp, brief.ID, stays.ID, alsoBrief.ID)
			clock = 3000
			if n, err := s.Sweep(t.Context()); err != nil || n != 2 {
				t.Fatalf("swept %d, %v; want the 2 expired", n, err)
			}
			checkHeads(t, s, sp, stays.ID, lone.ID)
			checkAllKeys(t, s)
		})
	}
}

// TestRetainedSpacesWriteChildKeys: a child in a space with a retention,
// its own or the store's default, may be deleted: it writes c keys and
// pins nothing; once the space's own retention is taken off (or the space
// left, with no default), children pin again.
func TestRetainedSpacesWriteChildKeys(t *testing.T) {
	own := protocol.MessageID([]byte("own"))
	dflt := protocol.MessageID([]byte("default"))
	s, err := Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.JoinSpace(Space{ID: own, Retention: Retention{MaxCount: 1000}}); err != nil {
		t.Fatal(err)
	}
	pins := func(s *Store, sp protocol.ID, name string) bool {
		t.Helper()
		p := syncTestMsg(sp, name+" parent")
		c := syncTestMsg(sp, name+" child")
		c.Prev = []protocol.ID{p.ID}
		if _, err := s.PutBatch(t.Context(), []Message{p, c}, Quota{}); err != nil {
			t.Fatal(err)
		}
		pinned, child := hasKey(t, s, pinKey(p.ID)), hasKey(t, s, childKey(p.ID, c.ID))
		if pinned == child {
			t.Fatalf("%s: pin %v, c key %v: want one of them", name, pinned, child)
		}
		return pinned
	}
	if pins(s, own, "joined with a retention") {
		t.Error("a child in a space with its own retention pinned")
	}
	if !pins(s, dflt, "no retention") {
		t.Error("a child in a space without retention did not pin")
	}
	if _, err := s.SetRetention(own, Retention{}); err != nil {
		t.Fatal(err)
	}
	if !pins(s, own, "retention taken off") {
		t.Error("a child did not pin once its space's retention was taken off")
	}
	if _, err := s.SetRetention(own, Retention{MaxCount: 5}); err != nil {
		t.Fatal(err)
	}
	if pins(s, own, "retention set again") {
		t.Error("a child pinned once its space had a retention again")
	}
	if err := s.LeaveSpace(own); err != nil {
		t.Fatal(err)
	}
	if !pins(s, own, "left") {
		t.Error("a child of a space left (no default retention) did not pin")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The store's default, and a space's own retention read back at Open.
	dir := t.TempDir()
	s, err = Open(Options{Dir: dir, SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.JoinSpace(Space{ID: own, Retention: Retention{MaxCount: 1000}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(Options{Dir: dir, SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if pins(s, own, "reopened, joined with a retention") {
		t.Error("after a reopen, a child in a space with its own retention pinned")
	}
	s.Close()
	s, err = Open(Options{Dir: t.TempDir(), SweepInterval: -1, GCInterval: -1, Retention: Retention{MaxCount: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pins(s, dflt, "default retention") {
		t.Error("a child in a space under the store's default retention pinned")
	}
}

// TestPinAfterRetentionSetLater: what pin.go says of a space given a
// retention after its messages were stored: a parent whose pinning child
// retention deletes stays no head (it keeps its r and y keys), where it
// would have become a head again. Everything else stays exact.
func TestPinAfterRetentionSetLater(t *testing.T) {
	clock := int64(1000)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	if _, _, err := s.JoinSpace(Space{ID: sp}); err != nil {
		t.Fatal(err)
	}
	parent := syncTestMsg(sp, "parent")
	parent.Time = 20
	child := syncTestMsg(sp, "child") // older by its clock: retention takes it first
	child.Time = 10
	child.Prev = []protocol.ID{parent.ID}
	for _, m := range []Message{parent, child} {
		if _, _, err := s.PutRelayed(t.Context(), m, Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetRetention(sp, Retention{MaxCount: 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want the child", n, err)
	}
	if _, err := s.Get(parent.ID); err != nil {
		t.Fatalf("parent: %v", err)
	}
	heads, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 0 || !hasKey(t, s, pinKey(parent.ID)) || !hasKey(t, s, refKey(parent.ID)) {
		t.Errorf("heads %v, pin %v: want none, the parent still pinned", heads, hasKey(t, s, pinKey(parent.ID)))
	}
	if n, err := s.Count(sp); err != nil || n != 1 {
		t.Errorf("count %d, %v; want 1", n, err)
	}
}
