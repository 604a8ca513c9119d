package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/weftmesh/weft/protocol"
)

// Options configures Open.
type Options struct {
	// Dir is the data directory for Badger; ignored when InMemory.
	Dir string
	// InMemory keeps everything in memory (tests, ephemeral nodes).
	InMemory bool
	// Logger receives the store's and Badger's warnings and errors
	// (Badger's info and debug output is dropped). nil discards.
	Logger *slog.Logger
	// GCInterval is the value-log GC period: 0 means DefaultGCInterval,
	// negative turns GC off. GC never runs for in-memory stores.
	GCInterval time.Duration
	// Now is the clock for expiry (Get, Read and Wire hide messages whose
	// Expires has passed) and retention. nil means time.Now.
	Now func() time.Time
	// SweepInterval is how often expired messages and those beyond their
	// space's retention are deleted (see Store.Sweep): 0 means
	// DefaultSweepInterval, negative turns the background sweep off.
	SweepInterval time.Duration
	// Retention is the retention of spaces whose own Retention is zero
	// (including spaces not joined). The zero value keeps everything.
	Retention Retention
	// CountExempt lists spaces that Retention's MaxCount does not apply
	// to (its MaxAge does): a node's inbox, which its DM policy bounds per
	// sender instead, so that a flood from one sender cannot evict
	// another's messages.
	CountExempt []protocol.ID
	// SyncInterval bounds how long a message from the network (PutRelayed,
	// PutBatch) may stay committed and not yet on disk: 0 means
	// DefaultSyncInterval. Durable writes do not wait for it (see
	// syncer.go).
	SyncInterval time.Duration
	// IndexBlocks bounds how many blocks (512 sync keys each, ~20 KB) of
	// a space's range index stay in memory; the others keep only their
	// count and sum and are read back from the store when a sync needs
	// their keys. 0 means DefaultIndexBlocks.
	IndexBlocks int
	// IndexReads budgets how many cold blocks of a space's range index
	// queries (a sync session's Summary, Keys and Split, driven by a
	// peer) may read back per second, after a burst of twice as many:
	// past it they fail with ErrIndexBusy. Updates are not budgeted.
	// 0 means DefaultIndexReads; negative, no budget.
	IndexReads int
}

// DefaultIndexReads is the budget used when Options.IndexReads is 0: ~0.1
// s of CPU a second at most. A late joiner fetching a large space from
// this node needs a few per exchange of ~2,000 messages.
const DefaultIndexReads = 500

// DefaultIndexBlocks is the bound used when Options.IndexBlocks is 0:
// ~5 MB of a space's keys, all of them in a space of up to ~130,000
// messages.
const DefaultIndexBlocks = 256

// DefaultSweepInterval is the sweep period used when Options.SweepInterval is 0.
const DefaultSweepInterval = 30 * time.Second

// DefaultGCInterval is the value-log GC period used when Options.GCInterval is 0.
const DefaultGCInterval = 5 * time.Minute

// gcDiscardRatio is the fraction of a value-log file that must be garbage
// before GC rewrites it.
const gcDiscardRatio = 0.5

const (
	kib = 1 << 10
	mib = 1 << 20
)

// BadgerOptions returns the options a store in dir opens Badger with
// (badgerOptions, with its warnings dropped), for measuring Badger alone
// as weft runs it: weft bench's floors store and read messages with
// them, with none of the store's own keys, reads or syncing.
func BadgerOptions(dir string) badger.Options {
	return badgerOptions(Options{Dir: dir}, slog.New(slog.DiscardHandler))
}

// badgerOptions returns Badger's options for weft: a small sidecar next to
// an agent, not a database server. Memory stays in the tens of MiB, writes
// are not synced by Badger (the store's group syncer does that, see
// syncer.go), and messages larger than 1 KiB go to the value log so the LSM tree holds
// mostly keys and small index values.
func badgerOptions(opts Options, logger *slog.Logger) badger.Options {
	dir := opts.Dir
	threshold := int64(valueThreshold)
	memtable := int64(4 * mib)
	if opts.InMemory {
		dir = "" // badger refuses a directory in memory mode
		// In memory there is no value log and a value may not exceed the
		// threshold: raise it to Badger's maximum, the protocol's 1 MiB limit.
		threshold = 1 * mib
		// A value must fit a write batch, 15% of a memtable.
		memtable = 8 * mib
	}
	o := badger.DefaultOptions(dir).
		WithInMemory(opts.InMemory).
		WithSyncWrites(false).     // the syncer (syncer.go) makes writes durable
		WithDetectConflicts(true). // duplicate Puts and head races are found by conflicts
		// Memory: Badger builds each new table whole in memory (twice
		// its target size up front), several at once per compaction, and
		// keeps up to 8 of those buffers pooled. With the default table
		// size multiplier the deep levels' tables grow to tens of MiB and
		// at a million messages those builders held ~150 MB; with a
		// multiplier of 1 every table is BaseTableSize and the L0 tables
		// (a flushed memtable) MemTableSize. Up to 8 + (its key-range
		// splits, ≤ 5) builders of one compaction wait to be written at
		// once, two compactions run: with 2 MiB tables a heap profile at
		// ~500,000 messages caught 96 MB of builder buffers and 24 MB of
		// their indexes. 1 MiB tables halve that, for twice the files
		// (~2,200 open tables at a million messages).
		WithMemTableSize(memtable).
		WithNumMemtables(2).
		// Level 0 is compacted once it holds 10 flushed memtables, not
		// 3: the keys are hashes, so each L0 compaction merges with all
		// of the base level, and each move down with a tenth of the
		// next; the more L0 tables one compaction takes, the fewer times
		// the levels below are rewritten. A store taking in 100,000
		// messages (a late joiner: PutBatchIntake) spent 57 µs of CPU per
		// message with 3, 43 with 10 (40 with 16), and stalled its writes
		// less. Reads merge up to 9 more L0 tables, each found by its
		// key range and bloom filter; the tables are mapped files, not
		// heap. A middle value was measured again (weft bench
		// --scenarios catchup,memory, interleaved, loaded machine): with
		// 5 the late joiner took 31.9-36.3 s and 171-197 us of CPU per
		// message, with 10 21.3-22.8 s and 150-160 us. A page pays
		// for the L0 tables once (one order-index iterator per page,
		// see ReadWithin); its point reads check their bloom filters.
		// 20 (writes stall at 40) against 10 (stall at 20), weft bench
		// --scenarios catchup, two interleaved pairs, load 3: the
		// joiner of 100,000 messages took 10.4 s at 123-124 us of CPU
		// per message against 12.0-12.1 s at 146-148. With 10 the
		// catch-up ran at ~10,000 messages a second until the first L0
		// compactions began (about 77,000 in), then at ~3,500: each
		// rewrites the base level and msyncs its tables, and the
		// joiner's writes waited on them (CPU a third idle, I/O wait).
		// The page at 1,000,000 read at once after its fill (while
		// Badger still compacts) and once quiet: see README.
		WithNumLevelZeroTables(20).
		WithNumLevelZeroTablesStall(40).
		WithBaseTableSize(1 * mib).
		WithBaseLevelSize(8 * mib).
		// The block cache stays (tried without: with no compression
		// Badger reads blocks in place from the mapped tables, and a
		// page cost 20-25% less CPU in BenchmarkRead10At100k, but weft
		// bench --scenarios page at a million messages did not show
		// it: two runs on a quiet machine gave p50 0.88-1.38 ms against
		// 0.49-0.53 ms for one run with the cache (under load, one run
		// each, 0.59 against 1.75 ms at the start); those reads come
		// right after the fill, while it is still being compacted.
		WithBlockCacheSize(16 * mib).
		WithIndexCacheSize(8 * mib).
		// Messages are small JSON; compressing their blocks costs CPU on
		// every compaction and read for little disk.
		WithCompression(options.None).
		WithValueLogFileSize(64 * mib).
		// Tried at 256 B (a message's wire bytes, its d chunks, in the
		// value log; its record still inline), weft bench, interleaved,
		// load 5-14: a late joiner of 100,000 messages spent 123-133 us
		// of CPU per message against 142-143 (flushes and compactions
		// copy less), but a durable send then writes the value log too,
		// and the syncer fdatasyncs it with the WAL (also tried at once,
		// in parallel): 1 client made 546-943 sends/s at 490-697 us of
		// daemon CPU per send, against 1,230-1,429 at 391-508.
		WithValueThreshold(threshold).
		// Bloom filters of 0.1% false positives, not Badger's 1%: a read
		// of a key that is not there (a new message's m and r keys, two
		// per message a Put reads; BenchmarkHasAbsent) checks the filter
		// of every level-0 table (up to 20, above) and of each level
		// below, so at 1% about one read in five searched a table for
		// nothing. ~14 bits a key instead of ~10, kept with the tables'
		// indexes in the index cache (8 MiB, above). With level 0 at 10
		// tables no end-to-end gain was measured; at 20, weft bench
		// --scenarios catchup, three interleaved pairs: see README.
		WithBloomFalsePositive(0.001).
		WithNumCompactors(2).
		WithCompactL0OnClose(true).
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{logger}).
		WithLoggingLevel(badger.WARNING)
	o.TableSizeMultiplier = 1
	return o
}

// badgerLogger adapts Badger's printf-style logger to slog, keeping only
// warnings and errors.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, args ...any) { b.log(slog.LevelError, f, args) }
func (b badgerLogger) Warningf(f string, args ...any) {
	level := slog.LevelWarn
	if strings.Contains(f, "might be too small") || strings.HasPrefix(f, "Cache life expectancy") {
		// Badger's advice on its cache sizes, every minute under load:
		// the small caches are deliberate (see badgerOptions).
		level = slog.LevelDebug
	}
	b.log(level, f, args)
}
func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

func (b badgerLogger) log(level slog.Level, f string, args []any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(f, args...)), "component", "badger")
}
