package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestHeadsChildUpdatedFirst holds a parent's Put between its commit and
// its heads update while a child that read it as stored is put: the
// child's heads update runs first, and the parent's must not make it a
// head again. The cached heads must equal those on disk. Each way of
// putting (one Put, a batch) is tried for the parent and the child.
func TestHeadsChildUpdatedFirst(t *testing.T) {
	put := func(t *testing.T, s *Store, m Message, batch bool) {
		t.Helper()
		if batch {
			res, err := s.PutBatch(t.Context(), []Message{m}, Quota{})
			if err == nil {
				err = res[0].Err
			}
			if err != nil {
				t.Error(err)
			}
			return
		}
		if _, _, err := s.PutRelayed(t.Context(), m, Quota{}); err != nil { // a durable Put would wait for the held one (commitq.go)
			t.Error(err)
		}
	}
	for _, tc := range []struct {
		name                    string
		parentBatch, childBatch bool
	}{
		{"put/put", false, false},
		{"put/batch", false, true},
		{"batch/put", true, false},
		{"batch/batch", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sp := protocol.MessageID([]byte("space"))
			root := syncTestMsg(sp, "root")
			parent := syncTestMsg(sp, "parent")
			parent.Prev = []protocol.ID{root.ID}
			child := syncTestMsg(sp, "child")
			child.Prev = []protocol.ID{parent.ID}
			put(t, s, root, false)
			if h, err := s.Heads(sp); err != nil || !slices.Equal(h, []protocol.ID{root.ID}) {
				t.Fatalf("heads %v, %v; want the root", h, err) // cached from here on
			}

			committed, release := make(chan struct{}), make(chan struct{})
			s.afterCommit = func(m *Message) {
				if m.ID == parent.ID {
					close(committed)
					<-release
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				put(t, s, parent, tc.parentBatch)
			}()
			select {
			case <-committed:
			case <-time.After(10 * time.Second):
				t.Fatal("the parent's Put did not commit")
			}
			put(t, s, child, tc.childBatch) // reads the parent as stored
			close(release)
			<-done

			got, err := s.Heads(sp)
			if err != nil {
				t.Fatal(err)
			}
			disk, err := s.readHeads(sp)
			if err != nil {
				t.Fatal(err)
			}
			if want := []protocol.ID{child.ID}; !slices.Equal(got, want) || !slices.Equal(disk, want) {
				t.Errorf("heads %v (on disk %v), want the child %v", got, disk, want)
			}
			s.headsMu.Lock()
			left := len(s.pending)
			s.headsMu.Unlock()
			if left != 0 {
				t.Errorf("%d Puts still pending", left)
			}
		})
	}
}

// TestSendsLinkCachedHeads puts messages as sends do, each naming its
// space's cached heads, some two at once (a fork, then a join): a parent
// known from the cache is linked without being read, and the heads on
// disk, after a reopen, must be those the cache held.
func TestSendsLinkCachedHeads(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sp := protocol.MessageID([]byte("space"))
	send := func(name string, prev []protocol.ID) {
		t.Helper()
		m := syncTestMsg(sp, name)
		m.Prev = prev
		if _, added, err := s.Put(t.Context(), m); err != nil || !added {
			t.Fatalf("put %s: added %v, %v", name, added, err)
		}
	}
	heads := func() []protocol.ID {
		t.Helper()
		h, err := s.Heads(sp)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	send("root", nil)
	for i := range 5 {
		h := heads()
		send(fmt.Sprintf("a%d", i), h)
		send(fmt.Sprintf("b%d", i), h) // a fork: both name the same heads
	}
	send("join", heads())
	cached := heads()
	if want := []protocol.ID{protocol.MessageID([]byte("join"))}; !slices.Equal(cached, want) {
		t.Fatalf("cached heads %v, want the join %v", cached, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir, SyncInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := heads(); !slices.Equal(got, cached) {
		t.Errorf("heads on disk %v, cached before %v", got, cached)
	}
	kids, err := s.keyIDs(idKey(prefixChild, protocol.MessageID([]byte("a4"))), -1)
	if err != nil || len(kids) != 1 || kids[0] != protocol.MessageID([]byte("join")) {
		t.Errorf("children of a4: %v, %v; want the join", kids, err)
	}
}

// TestHeadsNewestFirst: the heads in the order the store took them in,
// the newest first, whichever way they were put; read from disk after a
// reopen they have no order but their IDs'.
func TestHeadsNewestFirst(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sp := protocol.MessageID([]byte("space"))
	msg := func(name string) Message {
		return Message{ID: protocol.MessageID([]byte(name)), Space: sp, Raw: []byte(name)}
	}
	if _, err := s.Heads(sp); err != nil { // cache the (empty) heads
		t.Fatal(err)
	}
	var want []protocol.ID
	for i, name := range []string{"a", "b", "c", "d"} {
		m := msg(name)
		if i%2 == 0 {
			_, _, err = s.Put(t.Context(), m)
		} else {
			_, err = s.PutBatch(t.Context(), []Message{m}, Quota{})
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append([]protocol.ID{m.ID}, want...)
	}
	got, err := s.HeadsNewestFirst(sp)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("newest first: %v (%v), want %v", got, err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	byID, err := s.Heads(sp)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.HeadsNewestFirst(sp); err != nil || !slices.Equal(got, byID) {
		t.Fatalf("after a reopen: %v (%v), want %v", got, err, byID)
	}
}
