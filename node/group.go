package node

import (
	"context"
	"errors"
	"sync"

	"github.com/weftmesh/weft/protocol"
)

// Group commit of received messages. A message from the network can be
// fetched again from peers, so it is stored without waiting for the disk
// (see relayed); what it still cost, one Badger transaction each (reads of
// its parents and heads, a commit through Badger's write goroutine, a
// wake-up of every follower of its space), was the largest share of a
// received message's CPU after its signature check. So the messages gossip
// and sync hand over one at a time wait in a queue, and are stored a group
// at a time in one transaction (store.PutBatch through DeliverBatch), their
// space's followers woken once per group. (Gossip now hands over what it
// brought meanwhile as one batch, DeliverGossip, which is such a group
// already; the queue serves the callers of Deliver.)
//
// There is no timer: the first caller to find no group being stored stores
// the queue at once, itself included (a lone message waits for nothing);
// those arriving meanwhile queue up, and when the group is stored the
// first of them is handed the next group. The queue is thus drained by one
// goroutine at a time, a caller's own, so it needs no goroutine of its own
// to start and stop, and cannot be left with messages no one stores.

// maxGroup bounds the messages stored in one group.
const maxGroup = 256

// errNotCommitted is a queued message's error when commit did not return
// one error per message.
var errNotCommitted = errors.New("group commit: no result for the message")

// groupCommit is the queue of received messages waiting to be stored. The
// zero value is ready; it is safe for concurrent use.
type groupCommit struct {
	mu    sync.Mutex
	queue []*queued
	busy  bool // a group is being stored; if not, queue is empty
}

// queued is one message waiting in a groupCommit.
type queued struct {
	m   *protocol.Message
	err error
	// done is sent true once m is stored (err set), or false when its
	// caller is to store the next group, which starts with m.
	done chan bool
}

// commitFunc stores a group of messages, returning an error for each.
type commitFunc func(ctx context.Context, ms []*protocol.Message) []error

// put stores m in the next group (see groupCommit) and returns commit's
// error for it. A caller storing a group does so under
// context.WithoutCancel(ctx), since the group holds other callers'
// messages; a caller waiting for its group waits for it to be stored
// whatever its ctx, which takes one commit.
func (g *groupCommit) put(ctx context.Context, m *protocol.Message, commit commitFunc) error {
	q := &queued{m: m, done: make(chan bool, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, q)
	if g.busy {
		g.mu.Unlock()
		if <-q.done {
			return q.err
		}
		g.mu.Lock() // handed the next group: q is its first
	}
	g.busy = true
	n := min(len(g.queue), maxGroup)
	group := g.queue[:n:n]
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil // let the backing array go
	}
	g.mu.Unlock()

	ms := make([]*protocol.Message, len(group))
	for i, x := range group {
		ms[i] = x.m
	}
	errs := commit(context.WithoutCancel(ctx), ms)
	for i, x := range group {
		x.err = errNotCommitted
		if len(errs) == len(group) {
			x.err = errs[i]
		}
		if x != q {
			x.done <- true
		}
	}

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- false // the next group is its caller's to store
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return q.err
}
