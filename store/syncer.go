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
)

// Durability: Badger runs without SyncWrites, so a commit is in its
// memtable's write-ahead log and its value log (both memory-mapped files)
// when it returns, which a crash of the process (kill -9) does not lose,
// but not yet on disk, which a crash of the machine can. A write that must
// survive that (a local send, an outbox entry, a space record) waits for
// the group syncer: one goroutine syncing for every writer waiting at the
// time, so concurrent durable writes share one sync. Messages from the
// network (PutRelayed, PutBatch) do not wait; they can be fetched again
// from peers, and the syncer also syncs within SyncInterval of any such
// write.
//
// A sync fdatasyncs the files Badger writes to: the newest memtable WAL
// (.mem) and value log (.vlog), by number (Badger numbers both kinds of
// file increasingly and writes only to the newest one), and, once each,
// the older ones, rotated out (full) and possibly holding commits no sync
// covered yet: without SyncWrites Badger fsyncs neither on rotation. A
// flushed memtable's WAL is deleted after its table is written and
// synced, so a file gone by then needs nothing. This is what Badger's
// DB.Sync does for the newest files (v4.9.6: msync of each whole mapping,
// which Linux turns into an fdatasync of the file's range; pages written
// through a mapping are dirty in the page cache from their write fault
// on, and fdatasync writes them), with less work: a durable Put took
// 190–250 µs of CPU with DB.Sync here, 180–210 µs with this, mostly
// because a value log nothing was written to (messages under 1 KiB stay
// out of it) still costs an fdatasync ~20 µs and a device flush. So the
// newest value log is synced only when it may have changed since its
// last sync (see vlogDue).

// DefaultSyncInterval is how soon a write that did not wait for a sync
// (a message from the network) reaches disk, when Options.SyncInterval
// is 0.
const DefaultSyncInterval = 200 * time.Millisecond

// syncer is the group commit of a store on disk. A writer that needs a
// sync runs it itself if none is running (no handoff to another goroutine
// for a lone writer), else waits for the next one, which one of the
// writers waiting by then runs for all of them.
type syncer struct {
	dir       string
	dirty     atomic.Bool   // a write not yet synced that nobody waits for
	kick      chan struct{} // dirty became true: arm runPeriodic's timer (buffer 1)
	wakes     atomic.Int64  // runPeriodic's timer firings (tests)
	syncs     atomic.Int64  // syncs made (tests)
	vlogSkips atomic.Int64  // syncs that skipped the unchanged value log (tests)
	mu        sync.Mutex
	cond      *sync.Cond    // signalled when a sync ends; on mu
	run       bool          // a sync is running; guarded by mu
	begun     uint64        // syncs begun; guarded by mu
	ended     uint64        // syncs ended (they end in order); guarded by mu
	failed    uint64        // the last sync that failed (0: none); guarded by mu
	err       error         // its error; guarded by mu
	ahead     func() int64  // durable writes on their way to a commit (commitQueue.ahead); nil: none
	maxDefer  time.Duration // maxDefer; tests change it before use
	// A deferred sync (deferLocked). The timer is left to fire after
	// close: a waiter deferring then still wakes.
	deferEnd time.Time    // when the deferred next sync starts anyway (zero: none); guarded by mu
	deferT   *time.Timer  // wakes the waiters at deferEnd; guarded by mu
	deferred atomic.Int64 // syncs that waited for writes on their way (tests)
	// Used by the running sync only (and close):
	mem        activeFile      // the newest WAL
	vlog       activeFile      // the newest value log
	rotated    []string        // the older WAL and value log files, at the last listing
	rotate     map[string]bool // rotated files fsync'd, by name
	dirF       *os.File        // the directory, open for fstat
	listedOnce bool
	mtime      time.Time // the directory's, at the last listing
	listed     time.Time // when that listing started
	vlogSynced bool      // vlog synced since it became the newest
	vlogMtime  time.Time // its time, read before that sync
	vlogStart  time.Time // when that sync started
}

// maxDefer bounds how long a sync waits for the durable writes on their
// way (syncer.ahead) before it starts without them.
const maxDefer = time.Millisecond

// newSyncer returns the syncer of the store in dir; ahead (nil: none)
// counts the durable writes on their way to a commit.
func newSyncer(dir string, ahead func() int64) *syncer {
	y := &syncer{dir: dir, ahead: ahead, maxDefer: maxDefer, rotate: make(map[string]bool), kick: make(chan struct{}, 1)}
	y.cond = sync.NewCond(&y.mu)
	return y
}

// wait returns once every write committed before it was called is on
// disk, or the sync's error. It does not take a ctx: a sync is short, and
// a caller that went away would leave its write committed and not synced.
//
// A sync about to start while durable writes are on their way (ahead:
// sends being signed, Puts queued for the next commit) waits for them, up
// to maxDefer: the one of them that commits last and finds none on the
// way runs the sync for all. Concurrent senders then share one sync
// rather than each of a few; a lone writer finds none on the way and
// waits for nothing.
func (y *syncer) wait() error {
	if y == nil {
		return nil // in memory
	}
	y.mu.Lock()
	defer y.mu.Unlock()
	need := y.begun + 1 // a sync begun from now on
	for y.ended < need {
		if y.run {
			y.cond.Wait()
			continue
		}
		if y.deferLocked() {
			y.cond.Wait()
			continue
		}
		y.syncLocked()
	}
	if y.failed >= need {
		return y.err
	}
	return nil
}

// deferLocked reports whether the next sync is to wait for writes on
// their way, arming a timer that wakes the waiters when that wait ends.
// mu is held, and no sync is running.
func (y *syncer) deferLocked() bool {
	if y.ahead == nil || y.ahead() <= 0 {
		return false
	}
	now := time.Now()
	if y.deferEnd.IsZero() {
		y.deferEnd = now.Add(y.maxDefer)
		y.deferred.Add(1)
		if y.deferT == nil {
			y.deferT = time.AfterFunc(y.maxDefer, y.wake)
		} else {
			y.deferT.Reset(y.maxDefer)
		}
	}
	return now.Before(y.deferEnd)
}

// wake wakes the waiters (the deferred sync's time is up).
func (y *syncer) wake() {
	y.mu.Lock()
	y.cond.Broadcast()
	y.mu.Unlock()
}

// syncLocked runs one sync with mu released meanwhile. mu is held, and
// no sync is running.
func (y *syncer) syncLocked() {
	if !y.deferEnd.IsZero() {
		y.deferEnd = time.Time{}
		y.deferT.Stop()
	}
	y.run = true
	y.begun++
	n := y.begun
	y.mu.Unlock()
	// Cleared before the sync: a write after this is covered by the next.
	y.dirty.Store(false)
	err := y.sync()
	if err != nil {
		y.markDirty() // try again next time
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
		y.markDirty()
	}
}

// markDirty sets dirty and, when it was clear, arms runPeriodic's timer:
// every time dirty becomes true a kick is sent, or one is waiting already.
func (y *syncer) markDirty() {
	if y.dirty.CompareAndSwap(false, true) {
		select {
		case y.kick <- struct{}{}:
		default: // one is waiting: its timer fires within interval of now
		}
	}
}

// runPeriodic syncs within interval of a write that is waiting for no one,
// until ctx ends; then once more. It wakes only when there is such a
// write: an idle store (or one whose every write waits for its own sync)
// costs no timer at all.
func (y *syncer) runPeriodic(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	syncNow := func() {
		if err := y.wait(); err != nil {
			logger.Warn("store: sync", "err", err)
		}
	}
	defer syncNow()
	t := time.NewTimer(interval)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-y.kick:
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		y.wakes.Add(1)
		if y.dirty.Load() { // else a durable write's sync took it
			syncNow()
		}
	}
}

// sync makes every write committed before it durable: fdatasync of the
// newest WAL, of the newest value log if it changed, and of the rotated
// files not synced yet.
func (y *syncer) sync() error {
	y.syncs.Add(1)
	if err := y.list(); err != nil {
		return err
	}
	var errs []error
	// The value log, when it changed (a message over 1 KiB was written),
	// is synced at the same time as the WAL, not after it: a large send
	// then waits for one device flush, not two in a row.
	due, err := y.vlogDue()
	if err != nil {
		errs = append(errs, err)
	}
	var vlogErr error
	var vlogDone chan struct{}
	if due != nil {
		vlogDone = make(chan struct{})
		go func() {
			defer close(vlogDone)
			vlogErr = y.vlog.sync()
		}()
	}
	if err := y.mem.sync(); err != nil {
		errs = append(errs, err)
	}
	if due != nil {
		<-vlogDone
		if vlogErr != nil {
			y.vlogSynced = false
			errs = append(errs, vlogErr)
		} else {
			y.vlogSynced, y.vlogMtime, y.vlogStart = true, due.mtime, due.start
		}
	}
	for _, name := range y.rotated {
		if y.rotate[name] {
			continue
		}
		if err := fsyncFile(filepath.Join(y.dir, name)); err != nil {
			errs = append(errs, err)
			continue
		}
		y.rotate[name] = true
	}
	return errors.Join(errs...)
}

// vlogSync is a due sync of the value log: the file's time read just
// before it, and when it was read.
type vlogSync struct {
	mtime, start time.Time
}

// vlogDue reports whether the newest value log needs a sync: nil unless
// something was written to it since its last sync. A write through its
// mapping to a page a sync cleaned (or a new one) faults and sets the
// file's time (a clock tick's resolution) before it writes. So if the time
// is the one read just before the last sync, and that sync started
// dirSlack after it, no page was written since: a write after that start
// would have set a later time, and one before it was covered (by
// induction, the first sync of a file is never skipped). The caller syncs
// y.vlog and then records the sync (vlogSynced, vlogMtime, vlogStart).
func (y *syncer) vlogDue() (*vlogSync, error) {
	f, err := y.vlog.open()
	if f == nil || err != nil {
		return nil, err // none, or gone: nothing to sync
	}
	fi, err := f.Stat() // fstat: no path to walk
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", y.vlog.path, err)
	}
	mtime, start := fi.ModTime(), time.Now()
	if y.vlogSynced && mtime.Equal(y.vlogMtime) && y.vlogStart.Sub(mtime) > dirSlack {
		y.vlogSkips.Add(1)
		return nil, nil
	}
	return &vlogSync{mtime: mtime, start: start}, nil
}

// list finds the newest WAL and value log and the rotated files, listing
// the directory again only if it may have changed since the last listing.
// Listing costs more than the rest of a sync's work (tens of µs). File
// times are coarse (a clock tick): a change just after a listing may bear
// the same time as one just before it, but not one dirSlack before it. A
// new file is created before a commit can land in it, so a sync started
// after that commit sees the directory changed.
func (y *syncer) list() error {
	if y.dirF == nil {
		f, err := os.Open(y.dir)
		if err != nil {
			return fmt.Errorf("open %s: %w", y.dir, err)
		}
		y.dirF = f
	}
	fi, err := y.dirF.Stat() // fstat: no path to walk
	if err != nil {
		return fmt.Errorf("stat %s: %w", y.dir, err)
	}
	mtime, listing := fi.ModTime(), time.Now()
	if y.listedOnce && mtime.Equal(y.mtime) && y.listed.Sub(mtime) > dirSlack {
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
	y.rotated = y.rotated[:0]
	var mem, vlog string
	for _, f := range files {
		present[f.name] = true
		switch {
		case f.n != newest[f.ext]:
			y.rotated = append(y.rotated, f.name)
		case f.ext == ".mem":
			mem = f.name
		default:
			vlog = f.name
		}
	}
	for name := range y.rotate {
		if !present[name] {
			delete(y.rotate, name)
		}
	}
	y.mem.use(y.dir, mem)
	if y.vlog.use(y.dir, vlog) {
		y.vlogSynced = false
	}
	y.listedOnce, y.mtime, y.listed = true, mtime, listing
	return nil
}

// close closes the files the syncer holds open.
func (y *syncer) close() {
	if y == nil {
		return
	}
	y.mu.Lock()
	defer y.mu.Unlock()
	y.mem.use("", "")
	y.vlog.use("", "")
	if y.dirF != nil {
		_ = y.dirF.Close()
		y.dirF = nil
	}
}

// activeFile is the newest file of a kind, kept open to be synced.
type activeFile struct {
	name string
	path string
	f    *os.File // nil until first used
}

// use makes name (in dir) the file; "" for none. It reports a change.
func (a *activeFile) use(dir, name string) bool {
	if name == a.name {
		return false
	}
	if a.f != nil {
		_ = a.f.Close()
	}
	*a = activeFile{name: name}
	if name != "" {
		a.path = filepath.Join(dir, name)
	}
	return true
}

// open returns the file, opening it if needed: nil if there is none or
// it is gone.
func (a *activeFile) open() (*os.File, error) {
	if a.name == "" || a.f != nil {
		return a.f, nil
	}
	f, err := os.Open(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	a.f = f
	return f, nil
}

// sync fdatasyncs the file; one gone needs nothing.
func (a *activeFile) sync() error {
	f, err := a.open()
	if f == nil || err != nil {
		return err
	}
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("fdatasync %s: %w", a.path, err)
	}
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
