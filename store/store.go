// Package store is Badger-backed storage of weft's message graph, spaces and peers.
//
// Messages are kept by ID with their space, causal parents and wire bytes;
// each space has an order index giving every message a sequence number in
// the order it became visible, which is what cursors point into. A reader
// that reads "after" a cursor never misses a message that becomes visible
// later. See keys.go for the key layout.
//
// For sync, each space's messages are also kept in sync order (created_at,
// then ID; see protocol.SyncKey), on disk and, once a space is first
// synced or counted, in an in-memory index answering Summary, Keys and
// Split over key ranges without touching the disk.
//
// A message with a TTL is hidden by Get, Read and Wire once it expires and
// deleted by the next sweep, which also deletes what exceeds a space's
// Retention. Sweeps run in the background (Options.SweepInterval) or on
// demand (Sweep).
//
// A Store is safe for concurrent use. Methods called after Close return
// ErrClosed.
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
	"golang.org/x/time/rate"
)

var (
	// ErrNotFound reports a message, space or peer that is not stored.
	ErrNotFound = errors.New("store: not found")
	// ErrBadCursor reports cursor text that ParseCursor cannot read.
	ErrBadCursor = errors.New("store: bad cursor")
	// ErrClosed reports use of a Store after Close.
	ErrClosed = errors.New("store: closed")
)

// Store keeps weft's messages, spaces and peers in Badger.
type Store struct {
	db     *badger.DB
	logger *slog.Logger
	// compact parks Badger's compactors while the store is idle
	// (compactidle.go).
	compact *compactGate

	// closeMu is held shared by every operation and exclusively by Close,
	// so Close waits for operations in flight and none starts after it.
	closeMu sync.RWMutex
	closed  bool

	// commitMu orders seq allocation with Badger's commit timestamps (see Put).
	commitMu sync.Mutex
	seqs     map[protocol.ID]uint64 // last seq allocated per space; guarded by commitMu

	// mutateMu orders Puts and deletes: Puts hold it shared from before
	// their transaction reads until their in-memory updates (heads, range
	// indexes) are done, deletes hold it exclusively from before their
	// writes until their updates are done (their reads come before,
	// checked by conflict detection: see deleteOnce). So no delete commits
	// between a Put's reads and its commit (a sweep, however often it
	// runs, never makes a Put conflict), a delete that sees a message also
	// sees its Put's updates applied and never has its own overwritten by
	// them. Heads does not take it (it would wait behind the slowest Put
	// whenever a sweep waits for it): see deleting.
	mutateMu sync.RWMutex
	// putsBegun counts the Put transactions begun (putOnce, batchOnce):
	// a sweep yields to them (see deletePaced).
	putsBegun   atomic.Uint64
	sweepPauses atomic.Int64 // pauses made by deletePaced (tests)

	// headsMu guards heads: each space's heads, cached in memory once read
	// (scanning head keys walks every deleted head still in the LSM tree).
	// Each head maps to when it became one, in headTick's order (0: a
	// head read from disk, or one again after its child was deleted), so
	// that a send can name the newest (HeadsNewestFirst).
	headsMu  sync.Mutex
	heads    map[protocol.ID]map[protocol.ID]uint64
	headTick uint64 // the last tick given; guarded by headsMu
	// deleting holds the messages a delete is committing, from before its
	// commit until its heads update (applyDeletion) or its failure; Heads
	// leaves them out, so it never names a message whose delete has
	// committed. Guarded by headsMu.
	deleting map[protocol.ID]struct{}
	// pending holds the messages being put whose commit may be visible
	// and whose heads update has not run yet (see pendingHead); guarded
	// by pendingMu, which is taken after headsMu when both are held.
	pendingMu sync.Mutex
	pending   map[protocol.ID]*pendingHead
	// afterCommit, when set (tests), runs after a Put's commit and
	// before its heads update.
	afterCommit func(m *Message)
	// afterRead, when set (tests), runs in each attempt of a Put once
	// its transaction has read what its writes depend on, before it
	// writes them.
	afterRead func(m *Message)
	// afterDelete, when set (tests), runs after a delete's commit and
	// before its in-memory updates.
	afterDelete func(deleted []Message)
	// afterDeleteRead, when set (tests), runs in each attempt of a
	// delete that reads without mutateMu, once it has read and written
	// its transaction and before it takes mutateMu to commit it.
	afterDeleteRead func(ids []protocol.ID)

	// indexMu guards indexes: each space's range index, built on first use.
	indexMu sync.Mutex
	indexes map[protocol.ID]*rangeIndex
	// maxHotBlocks bounds how many blocks of a space's range index keep
	// their keys in memory (see keyList).
	maxHotBlocks int
	// indexReads and indexReadBurst budget a range index's block reads
	// for queries (see rangeIndex.reads and Options.IndexReads).
	indexReads     rate.Limit
	indexReadBurst int

	spaces spaceCache // joined spaces' records (see Space)

	sentSeq atomic.Uint64 // the last sent-log seq allocated (see sent.go)

	usage *usageBook // what each space and sender holds (see usage.go)

	ids *idFilters // which IDs may have a record or a reference key (idfilter.go)

	syncer  *syncer     // group sync (see syncer.go); nil in memory
	commits commitQueue // group commit of durable Puts (see commitq.go)

	now       func() time.Time
	retention Retention            // default for spaces without their own
	exempt    map[protocol.ID]bool // spaces the default's MaxCount skips
	sweepMu   sync.Mutex           // one Sweep at a time

	changeMu sync.Mutex
	changes  map[protocol.ID]chan struct{} // nil after Close

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Open opens (creating if needed) the store described by opts.
func Open(opts Options) (*Store, error) {
	if !opts.InMemory && opts.Dir == "" {
		return nil, errors.New("store: open: Dir is empty and InMemory is false")
	}
	if err := opts.Retention.validate(); err != nil {
		return nil, fmt.Errorf("store: open: default %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db, err := badger.Open(badgerOptions(opts, logger))
	if err != nil {
		return nil, fmt.Errorf("store: open badger: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		db:             db,
		logger:         logger,
		seqs:           make(map[protocol.ID]uint64),
		heads:          make(map[protocol.ID]map[protocol.ID]uint64),
		deleting:       make(map[protocol.ID]struct{}),
		pending:        make(map[protocol.ID]*pendingHead),
		indexes:        make(map[protocol.ID]*rangeIndex),
		maxHotBlocks:   cmp.Or(opts.IndexBlocks, DefaultIndexBlocks),
		indexReads:     rate.Limit(cmp.Or(opts.IndexReads, DefaultIndexReads)),
		indexReadBurst: 2 * cmp.Or(opts.IndexReads, DefaultIndexReads),
		now:            opts.Now,
		retention:      opts.Retention,
		exempt:         make(map[protocol.ID]bool),
		changes:        make(map[protocol.ID]chan struct{}),
		usage:          newUsageBook(),
		ids:            newIDFilters(),
		cancel:         cancel,
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, id := range opts.CountExempt {
		s.exempt[id] = true
	}
	if !opts.InMemory {
		s.syncer = newSyncer(opts.Dir, s.commits.ahead)
	}
	if err := s.migrateUsage(); err != nil {
		cancel()
		_ = db.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if err := s.loadSentSeq(); err != nil {
		cancel()
		_ = db.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if s.syncer != nil {
		syncEvery := opts.SyncInterval
		if syncEvery <= 0 {
			syncEvery = DefaultSyncInterval
		}
		s.wg.Go(func() { s.syncer.runPeriodic(ctx, syncEvery, logger) })
	}
	interval := opts.GCInterval
	if interval == 0 {
		interval = DefaultGCInterval
	}
	if interval > 0 && !opts.InMemory {
		s.every(ctx, interval, s.runGC)
	}
	sweep := opts.SweepInterval
	if sweep == 0 {
		sweep = DefaultSweepInterval
	}
	if sweep > 0 {
		s.every(ctx, sweep, s.runSweep)
	}
	s.wg.Go(func() {
		if err := s.ids.scan(ctx, db); err != nil && ctx.Err() == nil {
			logger.Warn("store: id filters stay off: every new message's keys are read", "err", err)
		}
	})
	s.compact = &compactGate{db: db}
	s.wg.Go(func() { s.compact.run(ctx, compactCheck) })
	return s, nil
}

// Close stops value-log GC and sweeps, waits for operations in flight,
// syncs what they wrote, wakes every
// Changed waiter and closes Badger. Calling it again does nothing.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()

	s.cancel()
	s.wg.Wait()

	s.changeMu.Lock()
	for _, ch := range s.changes {
		close(ch)
	}
	s.changes = nil
	s.changeMu.Unlock()

	s.syncer.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close badger: %w", err)
	}
	return nil
}

// enter marks the start of an operation; leave must follow unless it errs.
func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.closeMu.RUnlock() }

// every runs fn in the background every interval until ctx ends; Close
// waits for it.
func (s *Store) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	s.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			fn(ctx)
		}
	})
}

// runGC runs value-log GC until it finds nothing to rewrite.
func (s *Store) runGC(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if err == nil {
			continue // rewrote a file; there may be more
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
			s.logger.Warn("store: value-log gc", "err", err)
		}
		return
	}
}

// nowMilli returns the store's clock in Unix ms.
func (s *Store) nowMilli() int64 { return s.now().UnixMilli() }

// notify wakes everyone waiting on Changed(space).
func (s *Store) notify(space protocol.ID) {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if ch, ok := s.changes[space]; ok {
		close(ch)
		delete(s.changes, space) // the next Changed makes a fresh one
	}
}

// closedChan is returned by Changed after Close.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Changed returns a channel closed at the next successful Put of a new
// message into space (or at Close). Get it before calling Read so that no
// wake-up is lost: a Put that finishes after Changed closes the channel,
// one that finished before it is visible to Read. Any number of goroutines
// may wait on the same channel.
func (s *Store) Changed(space protocol.ID) <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if s.changes == nil {
		return closedChan
	}
	ch, ok := s.changes[space]
	if !ok {
		ch = make(chan struct{})
		s.changes[space] = ch
	}
	return ch
}

// get reads key in txn, mapping badger.ErrKeyNotFound to ErrNotFound.
func get(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// DiskSize returns the bytes Badger's LSM tree and value log take on
// disk, as Badger last measured them (it does so once a minute).
func (s *Store) DiskSize() (lsm, vlog int64, err error) {
	if err := s.enter(); err != nil {
		return 0, 0, err
	}
	defer s.leave()
	lsm, vlog = s.db.Size()
	return lsm, vlog, nil
}
