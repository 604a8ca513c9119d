package store

import (
	"errors"
	"sync"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/weftmesh/weft/protocol"
)

// Child keys and pins.
//
// A delete must know whether each stored parent of what it deletes keeps a
// child (if not, the parent is a head again). The children index (c
// parent child, one key per parent of every message) answered that, and
// was the largest share of a new message's keys: messages sent by several
// agents at once name several heads (3.4 on average in weft bench's
// catch-up), and every key is written to Badger's log, its memtable, a
// flushed table and each compaction.
//
// Most messages are never deleted: they do not expire and their space has
// no retention. Such a child writes no c key: it pins its parents instead
// (y parent, empty, once per parent and transaction). A pinned parent
// keeps a child for good, so a delete never needs to find that child.
// A child that may be deleted (deletable) writes its c keys as before.
// Deletes read the pin with the parent's r key (readOrphan), in their
// transaction, so a pinning child committed meanwhile makes them conflict
// and read again, as a new c key's r key write does.
//
// What is deletable is decided when the child is stored. A space given a
// retention later (its own, or the store's default when it is opened
// again with one, or no longer exempt from its count) may delete children
// stored as never deleted: their parents stay pinned, so a parent whose
// every child retention deleted stays no head (and its r and y keys stay)
// where it would have become a head again: new messages do not name it.
// Retention deletes the oldest first, so that happens to a parent older
// than its children (by their created_at) only when it is itself among
// the next to go; a parent whose sender's clock was ahead of its
// child's, or one in another space (a child may name one), may stay so
// for good. A Put racing a change of retention decides by what it saw,
// with the same consequence at most.

// deletable reports whether m may be deleted as things stand: it expires,
// or its space has a retention (its own, or the store's default).
func (s *Store) deletable(m *Message) bool {
	return m.Expires != 0 || s.retained.has(m.Space) || !s.defaultRetention(m.Space).IsZero()
}

// retainedSpaces is the set of joined spaces with a retention of their
// own, kept as their records are written.
type retainedSpaces struct {
	mu sync.RWMutex
	m  map[protocol.ID]bool
	// write is held by each change of a space's record that may change
	// its retention (JoinSpace, SetRetention, LeaveSpace), from before its
	// transaction until the set is made again from the record as
	// committed (retainedFromRecord): two changes committed in one order
	// are never recorded in the other, and one whose sync failed after
	// its commit is recorded all the same.
	write sync.Mutex
}

// retainedFromRecord sets whether space id has a retention of its own
// from its record as committed. Under retained.write.
func (s *Store) retainedFromRecord(id protocol.ID) {
	sp, err := s.readSpace(id)
	switch {
	case err == nil:
		s.retained.set(id, !sp.Retention.IsZero())
	case errors.Is(err, ErrNotFound):
		s.retained.set(id, false)
	default:
		// Left as it was: Puts in the space decide by it until its next
		// change (the exception above, at worst).
		s.logger.Warn("store: read a space's retention back", "space", id, "err", err)
	}
}

func (r *retainedSpaces) has(id protocol.ID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[id]
}

// set records whether space id has a retention of its own.
func (r *retainedSpaces) set(id protocol.ID, retained bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !retained {
		delete(r.m, id)
		return
	}
	if r.m == nil {
		r.m = make(map[protocol.ID]bool)
	}
	r.m[id] = true
}

// childLink writes that child names parent: its c key, or if the child
// pins (see deletable), parent's y key, once per transaction (pinned, nil
// for a transaction of one child).
func childLink(txn *badger.Txn, parent, child protocol.ID, pin bool, pinned map[protocol.ID]bool) error {
	if !pin {
		return txn.Set(childKey(parent, child), nil)
	}
	if pinned[parent] {
		return nil
	}
	if pinned != nil {
		pinned[parent] = true
	}
	return txn.Set(pinKey(parent), nil)
}
