package mesh

import (
	"context"
	"math"
	"slices"
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

// maxLateAuthors and maxLateStrangers bound the known authors and the
// others that lateness keeps apart; past either, a new one takes the
// place of one noted before: the known author whose lateness has decayed
// the most, the stranger noted least lately.
const (
	maxLateAuthors   = 256
	maxLateStrangers = 64
)

// lateness is how late gossip has brought messages lately: for each
// author, the largest delay from one of its messages' created_at to its
// delivery here, decaying by half every latenessHalfLife; and, of those,
// a lower median (see valueLocked). A missing parent was created before
// its child, so gossip brings it (when it does) no later than that delay
// after the child: a gap waits that long, twice over, before it is
// repaired. With a fixed wait (gapDelay), a loaded space, where gossip
// took longer than that, repaired gap after gap that gossip was about to
// fill: ~1,200 sync sessions in 10 s in a 10-daemon space at 500 msg/s,
// each costing the busy daemons more. (Measured on this node's clock
// alone, from gossip accepting a message to storing it, it missed the
// time messages wait at their sender and relays, and the sync storm came
// back: 100–2,564 sessions per 10 s run of weft bench's broadcast, where
// created_at's delay had 0–6.)
//
// created_at is its author's say. Taken as it was, as one largest delay
// over every message, one author publishing back-dated messages made every
// gap wait maxGapDelay, and every message sync fetched look like one
// gossip was about to bring (see fresh). Kept per author, an author moves
// only its own lateness, and a lower median moves only when at least half
// of the authors are late: one author cannot, whatever the others do. A
// peer ID costs nothing, so the authors the Gate does not know (knowing
// one takes its messages being stored for a while: the node's probation)
// count as one author, with the lower median of theirs: a flock of fresh
// peer IDs moves that one vote, which the known authors outvote. Only the
// authors heard from within lateActive vote (see lateActive). While no
// author of a space is known, a flock of strangers outnumbering the honest
// ones can still raise it, up to maxGapDelay. A sender whose clock is
// ahead only lowers its own lateness (a delay below zero counts as none).
// Safe for concurrent use; the zero value is ready.
type lateness struct {
	mu        sync.Mutex
	known     map[peer.ID]lateAuthor
	strangers map[peer.ID]lateAuthor
	// value is the lateness at valueAt, while no note changed it.
	value   time.Duration
	valueAt time.Time
	stale   bool // value must be computed again
}

// lateAuthor is one author's largest delay, noted at at, and when one of
// its messages was last noted.
type lateAuthor struct {
	max      time.Duration
	at, seen time.Time
}

// valueAt is a's lateness at now.
func (a lateAuthor) valueAt(now time.Time) time.Duration {
	age := now.Sub(a.at)
	if age <= 0 || a.max <= 0 {
		return a.max
	}
	return time.Duration(float64(a.max) * math.Exp2(-age.Seconds()/latenessHalfLife.Seconds()))
}

// lateActive is how lately an author must have been heard from to count:
// authors of a space long quiet would otherwise vote, each with a lateness
// decayed to nothing, for gaps to be repaired at once while the authors
// posting now are late.
const lateActive = 30 * time.Second

// lateValueFor is how long a computed lateness serves: it decays by less
// than 1 % in that time.
const lateValueFor = 100 * time.Millisecond

// valueLocked is the lateness at now: the lower median of the known
// authors' and of one more, the lower median of the strangers', over the
// authors heard from within lateActive.
func (l *lateness) valueLocked(now time.Time) time.Duration {
	if !l.stale && now.Sub(l.valueAt) < lateValueFor && !now.Before(l.valueAt) {
		return l.value
	}
	vs := make([]time.Duration, 0, len(l.known)+1)
	for _, a := range l.strangers {
		if now.Sub(a.seen) <= lateActive {
			vs = append(vs, a.valueAt(now))
		}
	}
	if len(vs) > 0 {
		vs = []time.Duration{lowerMedian(vs)}
	}
	for _, a := range l.known {
		if now.Sub(a.seen) <= lateActive {
			vs = append(vs, a.valueAt(now))
		}
	}
	l.value, l.valueAt, l.stale = lowerMedian(vs), now, false
	return l.value
}

// lowerMedian is the middle value of vs, the lower of the two middle ones
// if their number is even, 0 if there is none. It sorts vs.
func lowerMedian(vs []time.Duration) time.Duration {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	return vs[(len(vs)-1)/2]
}

// note records a message of author (known to the Gate or not) created at
// created, delivered at now.
func (l *lateness) note(author peer.ID, known bool, created, now time.Time) {
	d := min(max(now.Sub(created), 0), maxGapDelay)
	l.mu.Lock()
	defer l.mu.Unlock()
	by, limit := &l.known, maxLateAuthors
	if !known {
		by, limit = &l.strangers, maxLateStrangers
	}
	if *by == nil {
		*by = make(map[peer.ID]lateAuthor)
	}
	a, ok := (*by)[author]
	if !ok && len(*by) >= limit {
		delete(*by, evictee(*by, known, now))
	}
	a.seen = now
	if d > a.valueAt(now) {
		a.max, a.at = d, now
		l.stale = true
	}
	(*by)[author] = a
}

// evictee is the author of by to forget for a new one: the known author
// whose lateness has decayed the most, the stranger heard from least
// lately (a flock of fresh peer IDs replaces its own first).
func evictee(by map[peer.ID]lateAuthor, known bool, now time.Time) peer.ID {
	var drop peer.ID
	least := time.Duration(math.MaxInt64)
	oldest := now
	for p, a := range by {
		if known {
			if v := a.valueAt(now); v < least {
				drop, least = p, v
			}
		} else if !a.seen.After(oldest) {
			drop, oldest = p, a.seen
		}
	}
	return drop
}

// fresh reports whether a message created at created may still be on its
// way by gossip at now: it is less than the lateness remembered old (or
// as much in the future: a clock ahead). While gossip is prompt, nothing
// is.
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
