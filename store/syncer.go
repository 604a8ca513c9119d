package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Durability: Badger runs without SyncWrites, so a commit is in its
// memtable's write-ahead log and its value log (both memory-mapped files)
// when it returns, which a crash of the process (kill -9) does not lose,
// but not yet on disk, which a crash of the machine can. A write that must
// survive that (a local send, an outbox entry, a space record) waits for
// the group syncer: one goroutine calling db.Sync for every writer waiting
// at the time, so concurrent durable writes share one sync. Messages from
// the network (PutRelayed, PutBatch) do not wait; they can be fetched
// again from peers, and the syncer also syncs within SyncInterval of any
// such write.
//
// What db.Sync covers (Badger v4.9.6, DB.Sync): the active memtable's WAL
// and the value log file being written (the highest file id). It does not
// cover a WAL whose memtable was rotated out (full) and is not yet flushed
// to a level-0 table, nor a value log file that was rotated (full): without
// SyncWrites Badger fsyncs neither on rotation. A commit may land in one
// of those just before the rotation, so after db.Sync the syncer also
// fsyncs, once each, the WAL and value log files that are not the newest
// of their kind (see syncRotated). A flushed memtable's WAL is deleted
// after its table is written and synced, so a file gone by then needs
// nothing.

// DefaultSyncInterval is how soon a write that did not wait for a sync
// (a message from the network) reaches disk, when Options.SyncInterval
// is 0.
const DefaultSyncInterval = 200 * time.Millisecond

// syncer is the group commit of a store on disk. A writer that needs a
// sync runs it itself if none is running (no handoff to another goroutine
// for a lone writer), else waits for the next one, which one of the
// writers waiting by then runs for all of them.
type syncer struct {
	db     *badger.DB
	dir    string
	dirty  atomic.Bool  // a write not yet synced that nobody waits for
	syncs  atomic.Int64 // db.Sync calls made (tests)
	mu     sync.Mutex
	cond   *sync.Cond // signalled when a sync ends; on mu
	run    bool       // a sync is running; guarded by mu
	begun  uint64     // syncs begun; guarded by mu
	ended  uint64     // syncs ended (they end in order); guarded by mu
	failed uint64     // the last sync that failed (0: none); guarded by mu
	err    error      // its error; guarded by mu
	// Used by the running sync only:
	rotate map[string]bool // rotated files fsync'd, by name
	mtime  time.Time       // the directory's, at the last complete listing
	listed time.Time       // when that listing started
}

func newSyncer(db *badger.DB, dir string) *syncer {
	y := &syncer{db: db, dir: dir, rotate: make(map[string]bool)}
	y.cond = sync.NewCond(&y.mu)
	return y
}

// wait returns once every write committed before it was called is on
// disk, or the sync's error. It does not take a ctx: a sync is short, and
// a caller that went away would leave its write committed and not synced.
func (y *syncer) wait() error {
	if y == nil {
		return nil // in memory
	}
	y.mu.Lock()
	defer y.mu.Unlock()
	need := y.begun + 1 // a sync begun from now on
	for y.ended < need {
		if !y.run {
			y.syncLocked()
			continue
		}
		y.cond.Wait()
	}
	if y.failed >= need {
		return y.err
	}
	return nil
}

// syncLocked runs one sync with mu released meanwhile. mu is held, and
// no sync is running.
func (y *syncer) syncLocked() {
	y.run = true
	y.begun++
	n := y.begun
	y.mu.Unlock()
	// Cleared before the sync: a write after this is covered by the next.
	y.dirty.Store(false)
	err := y.sync()
	if err != nil {
		y.dirty.Store(true) // try again next time
	}
	y.mu.Lock()
	y.run = false
	y.ended = n
	if err != nil {
		y.failed, y.err = n, err
	}
	y.cond.Broadcast()
}

// later records a write that is to reach disk by the next sync (at most
// an interval away, see runPeriodic).
func (y *syncer) later() {
	if y != nil {
		y.dirty.Store(true)
	}
}

// runPeriodic syncs every interval if a write is waiting for no one,
// until ctx ends; then once more.
func (y *syncer) runPeriodic(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := y.wait(); err != nil {
				logger.Warn("store: sync", "err", err)
			}
			return
		case <-t.C:
		}
		if !y.dirty.Load() {
			continue
		}
		if err := y.wait(); err != nil {
			logger.Warn("store: sync", "err", err)
		}
	}
}

// sync makes every write committed before it durable: db.Sync, then the
// rotated WAL and value log files it does not cover.
func (y *syncer) sync() error {
	y.syncs.Add(1)
	if err := y.db.Sync(); err != nil {
		return fmt.Errorf("sync badger: %w", err)
	}
	return y.syncRotated()
}

// syncRotated fsyncs, once each, the memtable WAL (.mem) and value log
// (.vlog) files that are not the newest of their kind: rotated out,
// possibly holding commits no fsync covered yet. Badger numbers both kinds
// of file increasingly, and writes only to the newest one, which db.Sync
// has just synced.
func (y *syncer) syncRotated() error {
	// Listing the directory costs more than the rest of a sync's work
	// (tens of µs): skip it while the directory is unchanged since a
	// listing made well after its last change. File times are coarse (a
	// clock tick): a change just after a listing may bear the same time
	// as one just before it, but not one dirSlack before it.
	fi, err := os.Stat(y.dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", y.dir, err)
	}
	mtime, listing := fi.ModTime(), time.Now()
	if mtime.Equal(y.mtime) && y.listed.Sub(mtime) > dirSlack {
		return nil
	}
	entries, err := os.ReadDir(y.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", y.dir, err)
	}
	newest := map[string]int{}
	type file struct {
		name, ext string
		n         int
	}
	var files []file
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != ".mem" && ext != ".vlog" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(name, ext))
		if err != nil {
			continue
		}
		files = append(files, file{name, ext, n})
		if cur, ok := newest[ext]; !ok || n > cur {
			newest[ext] = n
		}
	}
	present := make(map[string]bool, len(files))
	var errs []error
	for _, f := range files {
		present[f.name] = true
		if f.n == newest[f.ext] {
			continue
		}
		if y.rotate[f.name] {
			continue
		}
		if err := fsyncFile(filepath.Join(y.dir, f.name)); err != nil {
			errs = append(errs, err)
			continue
		}
		y.rotate[f.name] = true
	}
	for name := range y.rotate {
		if !present[name] {
			delete(y.rotate, name)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	y.mtime, y.listed = mtime, listing
	return nil
}

// dirSlack bounds the granularity of file times (a clock tick, at most
// 10 ms on Linux), with room to spare.
const dirSlack = 100 * time.Millisecond

// fsyncFile fsyncs the file at path; one deleted meanwhile (a flushed
// memtable's WAL, a value log file GC removed) needs nothing.
func fsyncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
