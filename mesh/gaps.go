package mesh

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Gap repair. A gossiped message whose parent this node lacks reveals a
// gap, but usually not a real one: gossip brings a busy space's messages
// out of order (and the receive workers store them concurrently), so the
// parent arrives milliseconds later, or has arrived and waits in a queue
// for the store. Starting a sync at once for each such message made a
// sync storm at 500 msg/s: ~150 sessions per daemon in 20 s, colliding
// with each other ("peer busy"); waiting a fixed gapDelay still made
// ~1,200 sessions in 10 s in a 10-daemon space at 100 msg/s once the
// daemons were loaded enough for a message to wait longer than that in
// their queues, and each session that fetched something spread to three
// more members. So a gap waits gapDelay for its parents; a parent that
// gossip has accepted and not yet stored (see inflight) is waited for
// again; of those still missing, one check repairs from one peer, the
// relay of the first (Trigger runs one session per peer and space at a
// time), and leaves those relayed by other peers for the next check, in
// case that session does not bring them.

// gapDelay is how long a gap waits at least for gossip to bring the
// missing parents; it waits longer while gossip is slower (see lateness).
const gapDelay = 300 * time.Millisecond

// maxGapDelay bounds how long a gap waits for gossip, however late gossip
// has been (or has seemed: see lateness).
const maxGapDelay = 5 * time.Second

// latenessHalfLife is how fast the lateness remembered halves.
const latenessHalfLife = 10 * time.Second

// lateness is how late gossip has brought messages lately, measured on
// this node's own clock: the largest time a member's message waited here
// between gossip accepting it (the validator) and the Sink finishing with
// it, decaying by half every latenessHalfLife. A gap waits twice that
// (see delay) before it is repaired: with a fixed wait (gapDelay), a
// loaded space, where messages took longer than that, repaired gap after
// gap that gossip was about to fill (~1,200 sync sessions in 10 s in a
// 10-daemon space at 500 msg/s, each costing the busy daemons more). A
// missing parent that is in this node's queue is waited for anyway (see
// inflight); the wait covers the parent still queued at the other members
// on its way here, and the members of a space on one machine, or of one
// size, are about as loaded as this one.
//
// It was measured from each message's created_at, which its author
// chooses: one stranger publishing back-dated messages made every gap wait
// maxGapDelay and every message fetched by sync look like one gossip was
// about to bring (see fresh). What no peer can set is used instead: how
// long this node's queue holds messages, and only for the authors the Gate
// knows, whose messages have workers of their own (see receiveLoop): a
// flock of fresh peer IDs shares the strangers' queue and moves nothing.
// Making it longer takes making this node slower, within the rate limits,
// which is what it is to measure. Safe for concurrent use; the zero value
// is ready.
type lateness struct {
	mu  sync.Mutex
	max time.Duration
	at  time.Time // when max was noted
}

// valueLocked is the remembered lateness at now.
func (l *lateness) valueLocked(now time.Time) time.Duration {
	age := now.Sub(l.at)
	if age <= 0 || l.max <= 0 {
		return l.max
	}
	return time.Duration(float64(l.max) * math.Exp2(-age.Seconds()/latenessHalfLife.Seconds()))
}

// note records a message that waited d here, noted at now.
func (l *lateness) note(d time.Duration, now time.Time) {
	d = min(d, maxGapDelay)
	l.mu.Lock()
	defer l.mu.Unlock()
	if d > l.valueLocked(now) {
		l.max, l.at = d, now
	}
}

// fresh reports whether a message created at created may still be on its
// way by gossip at now: it is less than the lateness remembered old (or
// as much in the future: a clock ahead). While gossip is prompt, nothing
// is. created is the author's say, but it only decides whether a message
// sync brought counts as one gossip missed (see syncSink): back-dating a
// message makes it count as missed, as it should be.
func (l *lateness) fresh(created, now time.Time) bool {
	l.mu.Lock()
	w := l.valueLocked(now)
	l.mu.Unlock()
	age := now.Sub(created)
	return age < w && age > -w
}

// delay is how long a gap noted at now waits for gossip.
func (l *lateness) delay(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(max(gapDelay, 2*l.valueLocked(now)), maxGapDelay)
}

// maxGapParents bounds the missing parents a space's pending gap records
// (any one still missing is enough to repair).
const maxGapParents = 64

// gaps is a space's pending gap: parents found missing since it was armed,
// each with the peer that relayed its child.
type gaps struct {
	mu      sync.Mutex
	armed   bool
	missing []gapParent
}

type gapParent struct {
	id   protocol.ID
	from peer.ID
}

// repairGap notes msg's missing parents, if any, and arms the space's gap
// check (see checkGap). It runs on the space's receive workers, so s.wg
// is in use and may grow.
func (m *Mesh) repairGap(ctx context.Context, s *space, msg *protocol.Message, from peer.ID) {
	if m.sync == nil {
		return
	}
	var missing []protocol.ID
	for _, p := range msg.Prev {
		if m.stored.has(p) {
			continue // one of the last stored: no lookup
		}
		if s.flight.has(p) {
			missing = append(missing, p) // on its way: noted, not looked up
			continue
		}
		if has, err := m.history.Has(p); err == nil && !has {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	if !s.gaps.note(missing, from) {
		return // armed already: its check will see these too
	}
	s.wg.Go(func() { m.checkGap(ctx, s) })
}

// checkGap waits for gossip (see lateness), then repairs the space's gap from one peer (see
// gapCheck), and again while parents are left to wait for or to ask
// other peers for.
func (m *Mesh) checkGap(ctx context.Context, s *space) {
	t := time.NewTimer(m.late.delay(m.now()))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		p, again := s.gaps.check(m.history.Has, s.flight.has)
		if p != "" {
			m.gapRepairs.Add(1)
			m.sync.Trigger(p, s.id)
		}
		if !again {
			return
		}
		t.Reset(m.late.delay(m.now()))
	}
}

// note records missing parents relayed by from and reports whether the
// gap check must be armed (it was not).
func (g *gaps) note(missing []protocol.ID, from peer.ID) (arm bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range missing {
		if len(g.missing) < maxGapParents {
			g.missing = append(g.missing, gapParent{p, from})
		}
	}
	arm = !g.armed
	g.armed = true
	return arm
}

// check sorts the parents noted: those stored since are dropped; those
// still on their way (coming) are kept, to wait for once more; of those
// neither stored nor coming, the first one's relay is the peer to repair
// from, the others it relayed are dropped (its session will fetch them if
// it has them), and those other peers relayed are kept for the next check.
// again reports that something is kept: the check stays armed. Parents
// noted meanwhile join the next check.
func (g *gaps) check(has func(protocol.ID) (bool, error), coming func(protocol.ID) bool) (repair peer.ID, again bool) {
	g.mu.Lock()
	pending := g.missing
	g.missing = nil
	g.mu.Unlock()

	var keep []gapParent
	for _, p := range pending {
		if ok, err := has(p.id); err != nil || ok {
			continue
		}
		switch {
		case coming(p.id):
			keep = append(keep, p)
		case repair == "":
			repair = p.from
		case p.from != repair:
			keep = append(keep, p)
		}
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	g.missing = append(keep, g.missing...)
	if len(g.missing) > maxGapParents {
		g.missing = g.missing[:maxGapParents]
	}
	g.armed = len(g.missing) > 0
	return repair, g.armed
}
