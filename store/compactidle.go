package store

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe" // go:linkname, and Badger's levels controller (levelsOf)

	badger "github.com/dgraph-io/badger/v4"
)

// Badger's compactors poll on a 50 ms ticker each, whether or not there is
// anything to compact: two of them woke an idle daemon 40 times a second,
// three quarters of its idle CPU. Badger has no option for the period,
// and pausing its compactors is not exported, so the store reaches the two
// methods Badger itself uses to pause them (around Flatten and DropPrefix,
// which the store never calls) and parks the compactors while the store is
// quiet: no write for compactIdleAfter and no level that needs compaction.
// Every write transaction of the store calls wake first, which starts them
// again before it writes (Badger's own MaxVersion cannot tell: it reads the
// memtable's version without a lock). A test (TestCompactorsParkWhenIdle)
// breaks if a Badger upgrade changes what these do.
//
//go:linkname badgerStopCompactions github.com/dgraph-io/badger/v4.(*DB).stopCompactions
func badgerStopCompactions(db *badger.DB)

//go:linkname badgerStartCompactions github.com/dgraph-io/badger/v4.(*DB).startCompactions
func badgerStartCompactions(db *badger.DB)

const (
	// compactCheck is how often the store looks for writes.
	compactCheck = time.Second
	// compactIdleAfter is how long without a write parks the compactors.
	compactIdleAfter = 5 * time.Second
)

// Level 0 when the store goes quiet. Badger flushes each full memtable
// as a level-0 table and compacts level 0 only once it holds
// NumLevelZeroTables (20, see badgerOptions), all of them at once. A
// read of a key and a page's iterator go through every level-0 table,
// so a store that stops writing with 19 of them reads at up to twice
// the cost of one that stopped with none (weft bench, 2026-11-27: a
// page at 1,000,000 at p50 0.75-0.81 ms once quiet against 0.57-0.68; a
// member serving a catch-up at 40-41 us of CPU per message against
// 25-27), and keeps that cost until it writes again, since the gate
// parks the compactors. So before it parks them it compacts level 0
// into the level below once, if level 0 holds settleTables or more:
// the work Badger would do at the next burst anyway, done while the
// store has nothing else to do. Badger compacts level 0 alone only
// when it scores 1 (Flatten rewrites every level), so the store calls
// the method Badger's compactors and Flatten call, doCompact, with an
// L0 priority as Flatten makes one. TestSettleLevelZero breaks if a
// Badger upgrade changes it.
const (
	settleTables    = 4
	settleCompactor = 176 // the compactor ID Badger logs (its own are 0 and 1; Flatten's 175)
)

//go:linkname badgerDoCompact github.com/dgraph-io/badger/v4.(*levelsController).doCompact
func badgerDoCompact(lc unsafe.Pointer, id int, p badgerPriority) error

// badgerPriority and badgerTargets are Badger's compactionPriority and
// targets (v4.9.6, levels.go), field for field, for badgerDoCompact.
// Zero targets make doCompact compute them; a zero adjusted score lets
// it compact level 0 to the base level whatever its score.
type badgerPriority struct {
	level        int
	score        float64
	adjusted     float64
	dropPrefixes [][]byte
	t            badgerTargets
}

type badgerTargets struct {
	baseLevel int
	targetSz  []int64
	fileSz    []int64
}

// settleL0 is the priority Flatten gives level 0 (any score above 1),
// every field spelled out as Badger declares it.
var settleL0 = badgerPriority{level: 0, score: 1.71, adjusted: 0, dropPrefixes: nil, t: badgerTargets{baseLevel: 0, targetSz: nil, fileSz: nil}}

// levelsOf returns db's levels controller (its unexported field lc), or
// nil if Badger no longer has one there.
func levelsOf(db *badger.DB) unsafe.Pointer {
	f := reflect.ValueOf(db).Elem().FieldByName("lc")
	if !f.IsValid() || f.Kind() != reflect.Pointer {
		return nil
	}
	return f.UnsafePointer()
}

// compactGate parks Badger's compactors while the store is idle.
type compactGate struct {
	db     *badger.DB
	writes atomic.Uint64 // write transactions begun
	parked atomic.Bool   // the compactors do not run

	mu      sync.Mutex // held to start or stop the compactors
	seen    uint64     // writes at the last check
	quiet   time.Time  // since when writes has not moved
	settled bool       // level 0 compacted since the last write (see settleTables)
	parks   int        // times the compactors were parked (tests)
	settles int        // times level 0 was compacted on going quiet (tests)
}

// wake counts a write and starts the compactors if they are parked. A nil
// gate (the store still opening) does nothing.
func (g *compactGate) wake() {
	if g == nil {
		return
	}
	g.writes.Add(1)
	if g.parked.Load() {
		g.start()
	}
}

// start starts the compactors unless they run.
func (g *compactGate) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.parked.Load() {
		badgerStartCompactions(g.db)
		g.parked.Store(false)
	}
}

// check parks the compactors if the store has been quiet long enough, as
// of now.
func (g *compactGate) check(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.writes.Load(); w != g.seen {
		g.seen, g.quiet, g.settled = w, now, false
		return
	}
	if g.parked.Load() || now.Sub(g.quiet) < compactIdleAfter {
		return
	}
	levels := g.db.Levels()
	for _, l := range levels {
		if l.Score >= 1 {
			return // the compactors have work: let them finish it
		}
	}
	if !g.settled && len(levels) > 0 && levels[0].NumTables >= settleTables {
		// Once per quiet spell, whether it compacts or not (another
		// compaction may hold the tables, or Badger may have changed:
		// then the store only parks, as before). Not under a lock a
		// write waits for: wake takes mu only to start parked
		// compactors, and these run. A write meanwhile is stored as
		// Badger stores writes during any compaction.
		g.settled = true
		if lc := levelsOf(g.db); lc != nil && badgerDoCompact(lc, settleCompactor, settleL0) == nil {
			g.settles++
		}
		return // parked at a later check, once the levels below have settled too
	}
	// A write that begins now and sees parked still false writes with the
	// compactors stopped until the next write: harmless, as the levels
	// need nothing, and a flush of the memtable it fills is a write of
	// its own only to Badger.
	badgerStopCompactions(g.db)
	g.parked.Store(true)
	g.parks++
}

// run checks every interval until ctx ends, then leaves the compactors
// running, as Badger's Close expects them.
func (g *compactGate) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	defer g.start()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.check(time.Now())
		}
	}
}
