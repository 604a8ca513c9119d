package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// commitQueue is the group commit of durable Puts (PutWithin): concurrent
// Puts share one Badger transaction as well as one sync. A Put joins the
// queue; if no Put leads, it leads at once (a lone writer waits for no
// timer and no other goroutine). The leader takes every Put queued by
// then, itself included, and writes them in one transaction (PutBatch, or
// put for a lone one), then hands the lead to the first Put queued
// meanwhile, so that the next transaction is written while this one's
// sync runs, and waits for the sync (syncer.wait) before answering each
// Put of its batch. The Puts queued during one commit are the next batch.
type commitQueue struct {
	mu      sync.Mutex
	leading bool         // a leader is committing; guarded by mu
	queue   []*queuedPut // waiting for the next leader; guarded by mu
	batches atomic.Int64 // batches written (tests)

	// Durable Puts on their way (see Expect and syncer.ahead): announced
	// and not yet queued, and queued and not yet committed.
	expected    atomic.Int64
	uncommitted atomic.Int64
}

// ahead is the number of durable Puts on their way to a commit: a sync
// about to start waits a little for them (syncer.wait).
func (c *commitQueue) ahead() int64 { return c.expected.Load() + c.uncommitted.Load() }

// DurableAhead is the number of durable Puts on their way: announced
// (Expect) and not yet made, or queued and not yet committed. It is 0
// whenever no send is under way; one that stayed above would hold every
// sync back by up to its bound.
func (s *Store) DurableAhead() int64 { return s.commits.ahead() }

// Expect announces a durable Put (PutWithin) about to come, such as a send
// being signed: a sync about to start for other Puts waits briefly for it
// to commit (up to syncer's maxDefer), so that one sync covers both. The
// returned arrived is called once, when the Put is about to be made or
// will not be (calling it again does nothing); a Put that does not come
// only delays the others' sync by up to maxDefer.
func (s *Store) Expect() (arrived func()) {
	c := &s.commits
	c.expected.Add(1)
	done := false
	return func() {
		if !done {
			done = true
			c.expected.Add(-1)
		}
	}
}

// queuedPut is one Put in the commit queue.
type queuedPut struct {
	ctx  context.Context
	m    Message
	q    Quota
	wake chan bool // true: lead; false: the answer below is in
	// committed, if not nil, is called once the Put is committed (or
	// found stored) and before its sync: see PutWithinThen.
	committed func()

	e     Entry
	added bool
	err   error
}

// checkPut reports whether m can be stored at all.
func checkPut(m Message) error {
	if m.ID.IsZero() || m.Space.IsZero() {
		return errors.New("store: put: zero message or space id")
	}
	if len(m.Raw) > MaxRawSize {
		return fmt.Errorf("store: put %s: %d raw bytes exceed %d", m.ID, len(m.Raw), MaxRawSize)
	}
	return nil
}

// putDurable is PutWithin through the commit queue.
func (s *Store) putDurable(ctx context.Context, m Message, q Quota, committed func()) (Entry, bool, error) {
	if err := checkPut(m); err != nil {
		return Entry{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, false, fmt.Errorf("store: put %s: %w", m.ID, err)
	}
	p := &queuedPut{ctx: ctx, m: m, q: q, wake: make(chan bool, 1), committed: committed}
	c := &s.commits
	c.uncommitted.Add(1)
	c.mu.Lock()
	c.queue = append(c.queue, p)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if !lead && !<-p.wake {
		return p.e, p.added, p.err // a leader answered
	}
	s.lead()
	return p.e, p.added, p.err
}

// lead writes the queued Puts in one transaction, passes the lead on,
// waits for the sync and answers each Put of the batch but the caller's
// own (its answer is in its queuedPut when lead returns).
func (s *Store) lead() {
	c := &s.commits
	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()

	s.commitBatch(batch)
	c.batches.Add(1)
	c.uncommitted.Add(-int64(len(batch)))

	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].wake <- true
	} else {
		c.leading = false
	}
	c.mu.Unlock()

	// Also for a message stored already: it may have come from the
	// network a moment ago, not yet on disk.
	sync := false
	for _, p := range batch {
		sync = sync || p.err == nil
		if p.err == nil && p.committed != nil {
			p.committed()
		}
	}
	if sync {
		if err := s.syncer.wait(); err != nil {
			for _, p := range batch {
				if p.err == nil {
					p.e, p.added, p.err = Entry{}, false, fmt.Errorf("store: put %s: %w", p.m.ID, err)
				}
			}
		}
	}
	for _, p := range batch[1:] {
		p.wake <- false
	}
	// batch[0] is the leader: the first queued when the lead was taken
	// or handed on.
}

// commitBatch writes the Puts of batch, setting each one's answer: one
// transaction for all those with the same quota (usually all of them).
// A Put whose ctx ended while it was queued is not stored.
func (s *Store) commitBatch(batch []*queuedPut) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = fmt.Errorf("store: put %s: %w", p.m.ID, err)
			continue
		}
		live = append(live, p)
	}
	if len(live) == 1 {
		p := live[0]
		p.e, p.added, p.err = s.put(p.ctx, p.m, p.q)
		return
	}
	for len(live) > 0 {
		q := live[0].q
		var same, rest []*queuedPut
		for _, p := range live {
			if p.q == q {
				same = append(same, p)
			} else {
				rest = append(rest, p)
			}
		}
		s.commitSame(same, q)
		live = rest
	}
}

// commitSame writes Puts with the same quota in one PutBatch.
func (s *Store) commitSame(ps []*queuedPut, q Quota) {
	ms := make([]Message, len(ps))
	for i, p := range ps {
		ms[i] = p.m
	}
	// The leader's ctx must not fail the others' Puts: each one's was
	// checked when the batch was taken.
	results, err := s.PutBatch(context.WithoutCancel(ps[0].ctx), ms, q)
	for i, p := range ps {
		switch {
		case err != nil:
			p.err = fmt.Errorf("store: put %s: %w", p.m.ID, err)
		case results[i].Err != nil:
			p.err = results[i].Err
		default:
			p.e, p.added = results[i].Entry, results[i].Added
			if p.added {
				p.e.Message = returned(p.e.Message) // shares p.m's slices, as put's answer does
			}
		}
	}
}
