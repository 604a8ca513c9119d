package store

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// ReadWithin is Read that also stops before the entry that would take
// the entries' weight past maxBytes, always returning at least one
// entry when there is one; an entry weighs the length of its raw bytes
// plus overhead. cut reports that it stopped there, before the limit
// and with more stored after next (next is then past the last entry
// returned and the expired ones that followed it, not past the entry
// that did not fit). A negative maxBytes bounds nothing. It reads the raw
// bytes of no entry it does not return, so one read holds about
// maxBytes, whatever the messages weigh.
func (s *Store) ReadWithin(space protocol.ID, after Cursor, limit, maxBytes, overhead int) (entries []Entry, next Cursor, cut bool, err error) {
	entries, next, cut, _, err = s.readWithin(space, after, 0, limit, maxBytes, overhead)
	return entries, next, cut, err
}

// Tail is where a follower of a space has read to: the cursor and, when
// the read that got there returned every entry it saw after it, that
// read's snapshot (Badger's read timestamp). Whatever the next read finds
// after the cursor was then committed later, so it skips the tables all
// written before (IteratorOptions.SinceTs): an event stream's read of the
// few messages a commit added built and sought an iterator over every
// table of the LSM tree, more than reading the messages themselves. The
// zero Tail and Tail{After: c} are reads from the start and from c.
type Tail struct {
	After Cursor
	since uint64 // the snapshot of a read that returned all it saw after After; 0: none
	// of is the store (this open of it) whose snapshot since is: Badger's
	// timestamps start again at Open from what is left on disk, which may
	// be lower when the last commits before Close only deleted keys (a
	// compaction on Close drops their tombstones). Found by review.
	of *Store
}

// ReadTail is ReadWithin from t for a follower, which reads again from
// the Tail returned each time (see Tail).
func (s *Store) ReadTail(space protocol.ID, t Tail, limit, maxBytes, overhead int) (entries []Entry, next Tail, cut bool, err error) {
	since := t.since
	if t.of != s {
		since = 0
	}
	entries, after, cut, readTs, err := s.readWithin(space, t.After, since, limit, maxBytes, overhead)
	next = Tail{After: after, of: s}
	if err == nil && !cut && len(entries) < limit {
		next.since = readTs // it returned all it saw after t.After
	}
	return entries, next, cut, err
}

// readWithin is ReadWithin of the order entries committed after the
// snapshot since (0: all), and the snapshot it read.
func (s *Store) readWithin(space protocol.ID, after Cursor, since uint64, limit, maxBytes, overhead int) (entries []Entry, next Cursor, cut bool, readTs uint64, err error) {
	if limit <= 0 {
		return nil, after, false, 0, fmt.Errorf("store: read %s: limit %d is not positive", space, limit)
	}
	if err := s.enter(); err != nil {
		return nil, after, false, 0, err
	}
	defer s.leave()
	if after == Cursor(^uint64(0)) {
		return nil, after, false, 0, nil
	}
	next = after
	now := s.nowMilli()
	weight := 0
	err = s.db.View(func(txn *badger.Txn) error {
		readTs = txn.ReadTs()
		opts := badger.DefaultIteratorOptions
		opts.SinceTs = since
		opts.PrefetchValues = false // values are 32-byte ids, read inline
		opts.Prefix = orderPrefix(space)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(orderKey(space, uint64(after)+1)); it.ValidForPrefix(opts.Prefix) && len(entries) < limit; it.Next() {
			item := it.Item()
			seq, ok := orderKeySeq(item.Key())
			if !ok {
				return fmt.Errorf("bad order key %x", item.Key())
			}
			var id protocol.ID
			if err := item.Value(func(v []byte) error {
				if len(v) != protocol.IDSize {
					return fmt.Errorf("order entry %d: id has %d bytes", seq, len(v))
				}
				copy(id[:], v)
				return nil
			}); err != nil {
				return err
			}
			val, err := get(txn, messageKey(id))
			if err != nil {
				return fmt.Errorf("order entry %d: message %s: %w", seq, id, err)
			}
			if recordExpired(val, now) {
				next = Cursor(seq)
				continue // not reading its raw bytes (unless its record holds them)
			}
			e, chunks, size, err := decodeRecordSize(id, val)
			if err != nil {
				return fmt.Errorf("order entry %d: %w", seq, err)
			}
			if size >= 0 && maxBytes >= 0 && len(entries) > 0 && int64(weight)+size+int64(overhead) > int64(maxBytes) {
				cut = true // known from the record: its data keys stay unread
				return nil
			}
			if e.Raw, err = readChunks(txn, id, chunks, e.Raw); err != nil {
				return fmt.Errorf("order entry %d: %w", seq, err)
			}
			if w := len(e.Raw) + overhead; maxBytes >= 0 && len(entries) > 0 && weight+w > maxBytes {
				cut = true // a record of version 2, with no size
				return nil
			}
			weight += len(e.Raw) + overhead
			next = Cursor(seq)
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return nil, after, false, 0, fmt.Errorf("store: read %s: %w", space, err)
	}
	return entries, next, cut, readTs, nil
}
