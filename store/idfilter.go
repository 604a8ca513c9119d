package store

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/weftmesh/weft/protocol"
)

// A Put reads two keys of a new message that are almost never there: its
// record (is it stored already?) and its reference key (does a stored
// message name it?). Each read of an absent key searches both memtables
// and checks the bloom filter of every level-0 table and of each level
// below: ~4–6 µs, ~10 µs of the ~100 µs of CPU a late joiner spends on
// each message it fetches. idFilters answers both questions in memory for
// almost every new message, so that those reads are made only when the
// answer may be yes.
//
// The protocol that keeps it exact (a filter never says no for a key that
// a committed or committing transaction wrote):
//
//   - every transaction that writes a message's record adds its ID to
//     stored, and every one that writes a reference key adds the parent
//     to named, under commitMu and before CommitWith (Badger's commit
//     timestamps are taken in commitMu's order: see putOnce);
//   - at Open, scan adds every record and reference key already there, in
//     the background; until it is done (ready), both filters say maybe;
//   - a Put that skipped a read because a filter said no asks the filter
//     again under commitMu, before it writes: a writer of that key that
//     took commitMu first has added it by then, and the Put starts over
//     (the read made, this time). One that takes commitMu after the Put
//     sees the Put's own additions, or read the key in its transaction
//     and conflicts with the Put's commit, as it does today.
//
// Deletes remove nothing (a bloom filter cannot): a deleted message's ID
// stays a maybe, whose read then finds nothing, as before the filter.

// idFilters are a store's two ID filters; see above.
type idFilters struct {
	stored idFilter // IDs whose record (m key) was written
	named  idFilter // IDs whose reference key (r key) was written
	ready  atomic.Bool
}

func newIDFilters() *idFilters {
	f := &idFilters{}
	seed := maphash.MakeSeed()
	f.stored.init(seed, 1)
	f.named.init(seed, 2)
	return f
}

// mayBeStored reports whether id's record may be stored: false only once
// the scan is done and no writer has added id.
func (f *idFilters) mayBeStored(id protocol.ID) bool {
	return !f.ready.Load() || f.stored.mayHave(id)
}

// mayBeNamed is mayBeStored for id's reference key.
func (f *idFilters) mayBeNamed(id protocol.ID) bool {
	return !f.ready.Load() || f.named.mayHave(id)
}

// wrote adds what a transaction writing m adds: m's ID to stored, its
// parents to named (all of them: a parent added that gets no reference
// key only makes its filter say maybe). Under commitMu, before CommitWith.
func (f *idFilters) wrote(m *Message) {
	f.stored.add(m.ID)
	for _, p := range m.Prev {
		if p != m.ID && !p.IsZero() {
			f.named.add(p)
		}
	}
}

// skipped says which reads of a new message's keys a Put left out on the
// filters' word.
type skipped uint8

const (
	skippedRecord skipped = 1 << iota // its record (m key)
	skippedRef                        // its reference key (r key)
)

// changed reports whether a filter that said no for id's skipped reads
// says maybe now: a writer of one of those keys has added it since.
// Under commitMu.
func (f *idFilters) changed(id protocol.ID, s skipped) bool {
	return s&skippedRecord != 0 && f.stored.mayHave(id) ||
		s&skippedRef != 0 && f.named.mayHave(id)
}

// scan adds every record and reference key in the store to the filters,
// then makes them ready. It stops early, not ready, when ctx ends.
func (f *idFilters) scan(ctx context.Context, db *badger.DB) error {
	for _, t := range []struct {
		prefix byte
		f      *idFilter
	}{{prefixMessage, &f.stored}, {prefixRef, &f.named}} {
		// In short read transactions, each resuming after the last key
		// of the one before: a long one would hold back Badger's
		// cleanup of committed transactions, which every commit's
		// conflict check walks, and of old versions. What is written
		// meanwhile is added by its writer.
		from := []byte{t.prefix}
		for from != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := db.View(func(txn *badger.Txn) error {
				opts := badger.DefaultIteratorOptions
				opts.PrefetchValues = false
				opts.Prefix = []byte{t.prefix}
				it := txn.NewIterator(opts)
				defer it.Close()
				n := 0
				for it.Seek(from); it.Valid(); it.Next() {
					k := it.Item().Key()
					if n++; n > scanChunk {
						from = it.Item().KeyCopy(nil)
						return nil
					}
					if len(k) == 1+protocol.IDSize {
						t.f.add(protocol.ID(k[1:]))
					}
				}
				from = nil
				return nil
			})
			if err != nil {
				return fmt.Errorf("store: scan %c keys for the id filters: %w", t.prefix, err)
			}
		}
	}
	f.ready.Store(true)
	return nil
}

// scanChunk is how many keys one read transaction of scan reads (a
// variable for tests).
var scanChunk = 16384

// idFilter is a set of IDs that may say maybe for an ID it was not given
// (about 1% of them per segment) but never no for one it was: a blocked
// bloom filter (each ID sets filterProbes bits of one 512-bit block, one
// cache line), in segments of growing size, so that it needs no size up
// front. Adds and reads take no lock; growing takes mu.
type idFilter struct {
	seed maphash.Seed
	salt byte
	segs atomic.Pointer[[]*filterSegment]
	full atomic.Bool // past max bytes: says maybe for every ID
	max  int         // filterMaxBytes but in tests
	mu   sync.Mutex  // growing
}

// Filter sizes: a segment has at least filterBits bits per ID it is made
// for (a power of two of blocks, and as many IDs as that holds); the
// first holds at least filterFirst IDs, each next one filterGrowth times
// as many; past filterMaxBytes of segments the filter stops growing and
// says maybe for every ID (the store then reads every key, as it did
// without it): past about 8.9 million IDs, 10.6 MiB.
const (
	filterBits     = 10
	filterProbes   = 7
	filterFirst    = 1 << 16
	filterGrowth   = 4
	filterMaxBytes = 16 * mib
	blockWords     = 512 / 64
)

type filterSegment struct {
	words []atomic.Uint64
	mask  uint64 // blocks − 1 (a power of two)
	cap   int64  // IDs it is made for
	n     atomic.Int64
}

// newFilterSegment returns a segment for at least ids IDs.
func newFilterSegment(ids int64) *filterSegment {
	blocks := int64(1)
	for blocks*512 < ids*filterBits {
		blocks <<= 1
	}
	return &filterSegment{
		words: make([]atomic.Uint64, blocks*blockWords),
		mask:  uint64(blocks - 1),
		cap:   blocks * 512 / filterBits,
	}
}

func (f *idFilter) init(seed maphash.Seed, salt byte) {
	f.seed, f.salt, f.max = seed, salt, filterMaxBytes
	segs := []*filterSegment{newFilterSegment(filterFirst)}
	f.segs.Store(&segs)
}

// hash returns the block hash and the bit hash of id.
func (f *idFilter) hash(id protocol.ID) (uint64, uint64) {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteByte(f.salt)
	h.Write(id[:])
	a := h.Sum64()
	h.WriteByte(f.salt)
	return a, h.Sum64()
}

// bit returns the word and the bit of probe i of bits in a block.
func bit(bits uint64, i int) (int, uint64) {
	b := bits >> (9 * i) & 511
	return int(b / 64), 1 << (b % 64)
}

func (f *idFilter) add(id protocol.ID) {
	if f.full.Load() {
		return
	}
	block, bits := f.hash(id)
	if f.has(block, bits) {
		// Maybe already (added before: a parent named again, a retry):
		// it stays so; counting it again would only fill the segment.
		return
	}
	segs := *f.segs.Load()
	s := segs[len(segs)-1]
	if s.n.Add(1) > s.cap {
		if s = f.grow(s); s == nil {
			return
		}
	}
	w := s.words[(block&s.mask)*blockWords:][:blockWords]
	for i := range filterProbes {
		j, m := bit(bits, i)
		if w[j].Load()&m == 0 {
			w[j].Or(m)
		}
	}
}

// grow returns the segment to add to once last is full: a new one, or
// one another add made meanwhile; nil once the filter is full.
func (f *idFilter) grow(last *filterSegment) *filterSegment {
	f.mu.Lock()
	defer f.mu.Unlock()
	segs := *f.segs.Load()
	if cur := segs[len(segs)-1]; cur != last {
		return cur
	}
	size := 0
	for _, s := range segs {
		size += 8 * len(s.words)
	}
	next := newFilterSegment(last.cap * filterGrowth)
	if size+8*len(next.words) > f.max {
		f.full.Store(true)
		return nil
	}
	grown := append(segs[:len(segs):len(segs)], next)
	f.segs.Store(&grown)
	return next
}

// mayHave reports whether id may have been added: false means it never was.
func (f *idFilter) mayHave(id protocol.ID) bool {
	if f.full.Load() {
		return true
	}
	return f.has(f.hash(id))
}

// has is mayHave of an ID's hashes, whether full or not.
func (f *idFilter) has(block, bits uint64) bool {
	for _, s := range *f.segs.Load() {
		w := s.words[(block&s.mask)*blockWords:][:blockWords]
		in := true
		for i := range filterProbes {
			j, m := bit(bits, i)
			if w[j].Load()&m == 0 {
				in = false
				break
			}
		}
		if in {
			return true
		}
	}
	return false
}
