package store

import (
	"errors"
	"fmt"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
	"golang.org/x/time/rate"

	"github.com/weftmesh/weft/protocol"
)

// rangeIndex is one space's sync keys in memory, for range reconciliation.
//
// It is built lazily from the space's time index (t keys) on first use and
// then kept up to date by Put and deletes after they commit. A Put that
// commits while the index is being built may be applied twice (seen by the
// build's scan and applied after it), so updates are idempotent. The
// index is registered before the build's read transaction starts, and
// updates wait for the build, so none is lost:
//
//   - a Put committed before the build's snapshot is in the scan;
//   - one whose commit callback ran after registration finds the index
//     and applies itself once the build is done;
//   - one whose callback ran before registration committed before the
//     snapshot (a read transaction waits for earlier commits).
//
// Deletes are symmetric. A Put and a delete of the same message apply in
// commit order because deletes hold mutateMu exclusively (see Store).
type rangeIndex struct {
	ready chan struct{} // closed when the build is done
	err   error         // the build's error; set before ready is closed

	mu   sync.Mutex // reads too: they read cold blocks back
	list keyList
	// reads budgets the blocks that queries (Summary, Keys, Split) read
	// back: a sync session is driven by a peer's requests, and one whose
	// ranges end inside cold blocks makes each cost a read of the store
	// (~0.2 ms) instead of a look-up in memory. Updates are not budgeted.
	reads *rate.Limiter
}

// ErrIndexBusy is a query's error when the space's range index has read
// back more blocks than its budget allows for now: try again later.
var ErrIndexBusy = errors.New("store: the space's sync index is busy reading its blocks back; try again later")

// readBudget is the keyList's mayLoad for queries.
func (ix *rangeIndex) readBudget() error {
	if !ix.reads.Allow() {
		return ErrIndexBusy
	}
	return nil
}

// index returns space's range index, building it first if needed. Call
// it between enter and leave.
func (s *Store) index(space protocol.ID) (*rangeIndex, error) {
	s.indexMu.Lock()
	ix, ok := s.indexes[space]
	if ok {
		s.indexMu.Unlock()
		<-ix.ready
		if ix.err != nil {
			return nil, ix.err
		}
		return ix, nil
	}
	ix = &rangeIndex{ready: make(chan struct{}), reads: rate.NewLimiter(s.indexReads, s.indexReadBurst)}
	if s.indexReads < 0 {
		ix.reads.SetLimit(rate.Inf)
	}
	ix.list.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) { return s.timeKeys(space, lo, hi) }
	ix.list.maxHot = s.maxHotBlocks
	s.indexes[space] = ix
	s.indexMu.Unlock()

	ix.err = s.buildIndex(space, &ix.list)
	if ix.err != nil {
		s.indexMu.Lock()
		if s.indexes[space] == ix {
			delete(s.indexes, space) // the next call tries again
		}
		s.indexMu.Unlock()
	}
	close(ix.ready)
	if ix.err != nil {
		return nil, ix.err
	}
	return ix, nil
}

// buildIndex reads space's time index (keys only) into l.
func (s *Store) buildIndex(space protocol.ID, l *keyList) error {
	err := s.scanTimeKeys(space, protocol.MinSyncKey, func(k protocol.SyncKey) (bool, error) {
		_, err := l.insert(k) // in order: an append
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("build range index: %w", err)
	}
	return nil
}

// timeKeys returns the sync keys k of space's time index with
// lo <= k <= hi, in order: a cold block of its range index read back.
func (s *Store) timeKeys(space protocol.ID, lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) {
	var keys []protocol.SyncKey
	err := s.scanTimeKeys(space, lo, func(k protocol.SyncKey) (bool, error) {
		if hi.Less(k) {
			return false, nil
		}
		keys = append(keys, k)
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read range index block: %w", err)
	}
	return keys, nil
}

// scanTimeKeys calls fn with the sync keys of space's time index from lo
// on, in order, in one read transaction, while it returns true.
func (s *Store) scanTimeKeys(space protocol.ID, lo protocol.SyncKey, fn func(protocol.SyncKey) (bool, error)) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = timePrefix(space)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(timeKey(space, lo)); it.ValidForPrefix(opts.Prefix); it.Next() {
			k, ok := timeKeySync(it.Item().Key())
			if !ok {
				return fmt.Errorf("bad time key %x", it.Item().Key())
			}
			if more, err := fn(k); err != nil || !more {
				return err
			}
		}
		return nil
	})
}

// updateIndex applies committed inserts (add) or deletes (!add) of keys
// to space's range index, if it has been built or is being built.
func (s *Store) updateIndex(space protocol.ID, add bool, keys ...protocol.SyncKey) {
	s.indexMu.Lock()
	ix := s.indexes[space]
	s.indexMu.Unlock()
	if ix == nil {
		return
	}
	<-ix.ready
	if ix.err != nil {
		return // dropped; the next use builds a new one
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, k := range keys {
		var err error
		if add {
			_, err = ix.list.insert(k)
		} else {
			_, err = ix.list.remove(k)
		}
		if err != nil {
			// A block could not be read back (the store is closing, or
			// failing): the index no longer knows its keys. Drop it; the
			// next use builds a new one from the store.
			s.indexMu.Lock()
			if s.indexes[space] == ix {
				delete(s.indexes, space)
			}
			s.indexMu.Unlock()
			s.logger.Warn("range index dropped", "space", space, "err", err)
			return
		}
	}
}

// readIndex runs fn on space's range index under its lock.
func (s *Store) readIndex(space protocol.ID, fn func(l *keyList) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	ix, err := s.index(space)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.list.mayLoad = ix.readBudget
	defer func() { ix.list.mayLoad = nil }()
	return fn(&ix.list)
}

// Summary returns the number of messages of space whose sync keys k have
// lo <= k < hi, and the sum of their IDs (see protocol.Sum). Messages
// expired but not yet swept are counted. Its cost grows with the number
// of messages in space divided by a block size of 512, not with their
// number.
func (s *Store) Summary(space protocol.ID, lo, hi protocol.SyncKey) (count int, sum protocol.Sum, err error) {
	err = s.readIndex(space, func(l *keyList) (err error) { count, sum, err = l.summary(lo, hi); return err })
	if err != nil {
		return 0, protocol.Sum{}, fmt.Errorf("store: summary %s: %w", space, err)
	}
	return count, sum, nil
}

// Keys returns the sync keys k of space's messages with lo <= k < hi, in
// ascending order, at most limit of them (limit > 0).
func (s *Store) Keys(space protocol.ID, lo, hi protocol.SyncKey, limit int) ([]protocol.SyncKey, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("store: keys %s: limit %d is not positive", space, limit)
	}
	var keys []protocol.SyncKey
	err := s.readIndex(space, func(l *keyList) (err error) { keys, err = l.keys(lo, hi, limit); return err })
	if err != nil {
		return nil, fmt.Errorf("store: keys %s: %w", space, err)
	}
	return keys, nil
}

// Split cuts the messages of space in [lo, hi) into at most parts ranges
// of nearly equal size (their counts differ by at most one). It returns
// the boundaries b1 < … < bk, each the key of a stored message, so that
// [lo,b1), [b1,b2), …, [bk,hi) are non-empty and k < parts. A range
// holding fewer than parts messages is cut at every message; one holding
// at most one message is not cut (nil). parts must be positive.
func (s *Store) Split(space protocol.ID, lo, hi protocol.SyncKey, parts int) ([]protocol.SyncKey, error) {
	if parts <= 0 {
		return nil, fmt.Errorf("store: split %s: parts %d is not positive", space, parts)
	}
	var out []protocol.SyncKey
	err := s.readIndex(space, func(l *keyList) (err error) { out, err = l.split(lo, hi, parts); return err })
	if err != nil {
		return nil, fmt.Errorf("store: split %s: %w", space, err)
	}
	return out, nil
}

// Count returns the number of messages of space (expired ones included
// until swept). After the first call per space it costs O(1).
func (s *Store) Count(space protocol.ID) (int, error) {
	var n int
	err := s.readIndex(space, func(l *keyList) error { n = l.n; return nil })
	if err != nil {
		return 0, fmt.Errorf("store: count %s: %w", space, err)
	}
	return n, nil
}
