package store

import (
	"sync"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestRetainedFollowsRecord: two changes of a space's retention at once
// leave the set of retained spaces as the record they committed last
// says (an adversarial review found it updated after each commit in no
// order: the set could say "no retention" while the record had one, and
// every later Put pinned children that retention then deleted). A race:
// it takes a few hundred rounds to show without the order, if it shows.
func TestRetainedFollowsRecord(t *testing.T) {
	clock := int64(1000)
	s := openSweepTest(t, &clock)
	sp := protocol.MessageID([]byte("space"))
	if _, _, err := s.JoinSpace(Space{ID: sp}); err != nil {
		t.Fatal(err)
	}
	keep := Retention{MaxCount: 1}
	for i := range 500 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, r := range []Retention{keep, {}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := s.SetRetention(sp, r); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		own, err := s.ownRetentions()
		if err != nil {
			t.Fatal(err)
		}
		if _, rec := own[sp]; rec != s.retained.has(sp) {
			t.Fatalf("round %d: the record has a retention %v, the set says %v", i, rec, s.retained.has(sp))
		}
	}
	if _, err := s.SetRetention(sp, keep); err != nil {
		t.Fatal(err)
	}
	parent := syncTestMsg(sp, "parent")
	parent.Time = 20
	child := syncTestMsg(sp, "child")
	child.Time = 10
	child.Prev = []protocol.ID{parent.ID}
	for _, m := range []Message{parent, child} {
		if _, _, err := s.PutRelayed(t.Context(), m, Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	if hasKey(t, s, pinKey(parent.ID)) {
		t.Errorf("the child pinned its parent although its space has a retention (record) when it was put")
	}
	if n, err := s.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want the child", n, err)
	}
	checkHeads(t, s, sp, parent.ID)
}
