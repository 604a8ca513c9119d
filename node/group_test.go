package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

// recorder is a commitFunc that records its groups, answers each message
// with an error naming it, and (when gate is set) holds its first group
// until gate is closed.
type recorder struct {
	gate    chan struct{}
	entered chan struct{} // closed when the first group is being stored
	mu      sync.Mutex
	groups  [][]protocol.ID
	short   bool // answer one error too few
}

func (r *recorder) commit(ctx context.Context, ms []*protocol.Message) []error {
	r.mu.Lock()
	first := len(r.groups) == 0
	ids := make([]protocol.ID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	r.groups = append(r.groups, ids)
	r.mu.Unlock()
	if first && r.gate != nil {
		close(r.entered)
		<-r.gate
	}
	errs := make([]error, len(ms))
	for i, m := range ms {
		errs[i] = errors.New(m.ID.String())
	}
	if r.short {
		errs = errs[1:]
	}
	return errs
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []int
	for _, g := range r.groups {
		s = append(s, len(g))
	}
	return s
}

func queuedLen(g *groupCommit) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit: a lone message is stored at once, in a group of its
// own; messages that arrive while a group is being stored wait and are
// stored together, in groups of at most maxGroup, each caller getting
// its own message's result; nothing is stored twice or left behind.
func TestGroupCommit(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	msgs := make([]*protocol.Message, maxGroup+11)
	for i := range msgs {
		msgs[i] = recentMsg(t, key, fmt.Sprint("m", i))
	}
	var g groupCommit
	r := &recorder{gate: make(chan struct{}), entered: make(chan struct{})}

	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = g.put(t.Context(), msgs[0], r.commit) })
	<-r.entered // the lone message is being stored, with no wait for others
	for i := 1; i < len(msgs); i++ {
		wg.Go(func() { errs[i] = g.put(t.Context(), msgs[i], r.commit) })
	}
	waitFor(t, "the others to queue", func() bool { return queuedLen(&g) == len(msgs)-1 })
	close(r.gate)
	wg.Wait()

	if got, want := fmt.Sprint(r.sizes()), fmt.Sprint([]int{1, maxGroup, 10}); got != want {
		t.Errorf("groups of %s, want %s", got, want)
	}
	seen := make(map[protocol.ID]int)
	for _, grp := range r.groups {
		for _, id := range grp {
			seen[id]++
		}
	}
	for i, m := range msgs {
		if seen[m.ID] != 1 {
			t.Errorf("message %d stored %d times", i, seen[m.ID])
		}
		if errs[i] == nil || errs[i].Error() != m.ID.String() {
			t.Errorf("message %d: result %v, want its own", i, errs[i])
		}
	}
	if g.busy || len(g.queue) != 0 {
		t.Errorf("left busy=%v with %d queued", g.busy, len(g.queue))
	}

	// Idle again: the next message is stored at once, alone.
	if err := g.put(t.Context(), msgs[0], r.commit); err == nil || err.Error() != msgs[0].ID.String() {
		t.Errorf("lone message after the groups: %v", err)
	}
	if s := r.sizes(); s[len(s)-1] != 1 {
		t.Errorf("groups %v, want the last of 1", s)
	}
}

// TestGroupCommitNoResult: a commit that does not answer for every message
// fails them all rather than report them stored.
func TestGroupCommitNoResult(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	var g groupCommit
	r := &recorder{short: true}
	if err := g.put(t.Context(), recentMsg(t, key, "x"), r.commit); !errors.Is(err, errNotCommitted) {
		t.Errorf("result %v, want %v", err, errNotCommitted)
	}
}

// TestGroupCommitCancelled: a caller whose ctx ends while it stores a
// group still stores the others' messages (they are not failed for it).
func TestGroupCommitCancelled(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	var g groupCommit
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var got error
	err := g.put(ctx, recentMsg(t, key, "x"), func(ctx context.Context, ms []*protocol.Message) []error {
		got = ctx.Err()
		return make([]error, len(ms))
	})
	if err != nil || got != nil {
		t.Errorf("put under a cancelled ctx: %v, commit's ctx %v; want both nil", err, got)
	}
}
