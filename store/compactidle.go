package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname

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

// compactGate parks Badger's compactors while the store is idle.
type compactGate struct {
	db     *badger.DB
	writes atomic.Uint64 // write transactions begun
	parked atomic.Bool   // the compactors do not run

	mu    sync.Mutex // held to start or stop the compactors
	seen  uint64     // writes at the last check
	quiet time.Time  // since when writes has not moved
	parks int        // times the compactors were parked (tests)
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
		g.seen, g.quiet = w, now
		return
	}
	if g.parked.Load() || now.Sub(g.quiet) < compactIdleAfter {
		return
	}
	for _, l := range g.db.Levels() {
		if l.Score >= 1 {
			return // the compactors have work: let them finish it
		}
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
