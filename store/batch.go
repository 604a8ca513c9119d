package store

import (
	"context"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// PutResult is what PutBatch did with one message.
type PutResult struct {
	// Entry is the message as stored: m itself (sharing its slices) when
	// Added, the stored one when it was there already.
	Entry Entry
	Added bool
	// Err is why the message was not stored: an invalid message, or one
	// over its quota (wrapping ErrQuota). The others are stored all the
	// same.
	Err error
}

// Batch bounds: one transaction holds at most this many messages, or
// this many raw bytes (and at least one message), well inside Badger's
// transaction limits (15% of a memtable); a batch Badger still finds too
// big is split in two.
const (
	batchMessages = 256
	batchBytes    = 256 * kib
)

// PutBatch stores ms as PutRelayed stores each one (same quota q, same
// heads, order and indexes; a message already stored, or twice in ms, is
// not added again), in as few transactions as Badger allows: it returns
// once they are visible, without waiting for the disk (see PutRelayed).
// Parents before children within ms saves work, but any order gives the
// same heads. results[i] is about ms[i]; the error is the store's failure
// (ms may then be partly stored, as with a failed Put of each).
func (s *Store) PutBatch(ctx context.Context, ms []Message, q Quota) ([]PutResult, error) {
	results := make([]PutResult, len(ms))
	var valid []int
	for i := range ms {
		m := &ms[i]
		switch {
		case m.ID.IsZero() || m.Space.IsZero():
			results[i].Err = errors.New("store: put: zero message or space id")
		case len(m.Raw) > MaxRawSize:
			results[i].Err = fmt.Errorf("store: put %s: %d raw bytes exceed %d", m.ID, len(m.Raw), MaxRawSize)
		default:
			valid = append(valid, i)
		}
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	for len(valid) > 0 {
		n, size := 0, 0
		for n < len(valid) && n < batchMessages && (n == 0 || size+len(ms[valid[n]].Raw) <= batchBytes) {
			size += len(ms[valid[n]].Raw)
			n++
		}
		if err := s.putChunk(ctx, ms, valid[:n], q, results); err != nil {
			return nil, err
		}
		valid = valid[n:]
	}
	s.syncer.later()
	return results, nil
}

// putChunk stores ms[idx…] in one transaction, retrying on conflicts and
// splitting it if Badger finds it too big.
func (s *Store) putChunk(ctx context.Context, ms []Message, idx []int, q Quota, results []PutResult) error {
	for range maxPutAttempts {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("store: put batch: %w", err)
		}
		err := s.batchOnce(ms, idx, q, results)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errRetry):
			continue
		case errors.Is(err, badger.ErrTxnTooBig) && len(idx) > 1:
			half := len(idx) / 2
			if err := s.putChunk(ctx, ms, idx[:half], q, results); err != nil {
				return err
			}
			return s.putChunk(ctx, ms, idx[half:], q, results)
		default:
			return fmt.Errorf("store: put batch: %w", err)
		}
	}
	return fmt.Errorf("store: put batch: gave up after %d conflicts", maxPutAttempts)
}

// batchPlan is what batchOnce read of one new message before writing.
type batchPlan struct {
	i          int  // index in ms
	referenced bool // a stored message names it in its Prev
	skipped    skipped
	parents    []batchParent
}

type batchParent struct {
	id    protocol.ID
	space protocol.ID // the stored parent's space; zero if not stored
	// referenced: the stored parent is named by a stored child already,
	// so it is no head: no head key to delete. Its r key is written
	// again all the same, so that a delete that read it conflicts.
	referenced bool
}

// batchAdded is a message batchOnce wrote, for the updates after commit.
type batchAdded struct {
	i        int
	seq      uint64
	head     bool
	unheaded []headRef
}

// batchOnce makes one attempt at storing ms[idx…] in one transaction, as
// putOnce does for one message (see its comment on ordering and heads),
// in two steps. First, outside commitMu, it reads what each message's
// keys depend on: whether it is stored, named by a stored child, and which
// of its parents are stored and already named by a stored child. Then,
// under commitMu, it charges each one to the quota and writes the keys of
// those within it, taking account of the other messages of the batch: one
// that another written with it names is no head, in either order, and a
// stored parent is unheaded once. A stored parent that a stored child
// names already gets the new c key and its r key again, once (it is no
// head: no tombstone).
func (s *Store) batchOnce(ms []Message, idx []int, q Quota, results []PutResult) error {
	s.compact.wake()
	// From before the reads, as in putOnce: no delete commits between
	// them and the commit.
	s.putsBegun.Add(1)
	s.mutateMu.RLock()
	defer s.mutateMu.RUnlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()

	first := make(map[protocol.ID]int, len(idx)) // each ID's first index in ms
	var dups []int
	plans := make([]batchPlan, 0, len(idx))
	planned := make(map[protocol.ID]bool, len(idx)) // new messages read so far
	// Parents not new in the batch, as read for their first child in it:
	// siblings (messages sent at once name the same heads) read them once.
	parents := make(map[protocol.ID]batchParent)
	var view *badger.Txn
	for _, i := range idx {
		m := &ms[i]
		results[i] = PutResult{}
		if _, ok := first[m.ID]; ok {
			dups = append(dups, i)
			continue
		}
		first[m.ID] = i
		p := batchPlan{i: i}
		// Each read only if the ID filters say maybe (idfilter.go).
		if s.ids.mayBeStored(m.ID) {
			e, err := readEntry(txn, m.ID)
			switch {
			case err == nil:
				results[i].Entry = e
				continue
			case !errors.Is(err, ErrNotFound):
				return fmt.Errorf("check existing %s: %w", m.ID, err)
			}
		} else {
			p.skipped |= skippedRecord
		}
		if s.ids.mayBeNamed(m.ID) {
			_, err := get(txn, refKey(m.ID))
			p.referenced = err == nil
			if err != nil && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("check children of %s: %w", m.ID, err)
			}
		} else {
			p.skipped |= skippedRef
		}
		heads := s.cachedHeads(m.Space, m.Prev)
		for j, parent := range m.Prev {
			if parent == m.ID || parent.IsZero() || containsID(m.Prev[:j], parent) {
				continue
			}
			bp := batchParent{id: parent}
			if planned[parent] {
				// New in this batch, before m: not stored (it was read
				// so), and written (or refused) before m in the second step.
				p.parents = append(p.parents, bp)
				continue
			}
			if known, ok := parents[parent]; ok {
				// Read for a sibling of m in this batch: what the batch
				// writes of it depends on that read, not on m's (see
				// linked in writeBatched), and it is in txn's reads.
				p.parents = append(p.parents, known)
				continue
			}
			if heads[j] {
				// A head of m's space in the cache, as in putOnce: stored
				// there, its Put done (no concurrent Put of it to conflict
				// with), no delete of it before txn commits (mutateMu), and
				// named by no child whose heads update ran. A child
				// committed whose update has not run yet makes the batch
				// write its head tombstone and r key again: the same keys,
				// as putOnce always writes them.
				bp.space = m.Space
				p.parents = append(p.parents, bp)
				parents[parent] = bp
				continue
			}
			val, err := get(txn, messageKey(parent))
			switch {
			case err == nil:
				if bp.space, err = recordSpace(val); err != nil {
					return fmt.Errorf("parent %s of %s: %w", parent, m.ID, err)
				}
				// Whether a stored child names it: no delete of that
				// child commits before this transaction (mutateMu).
				// Read outside txn's conflict set: only children write
				// it while mutateMu is held shared.
				if view == nil {
					view = s.db.NewTransaction(false)
					defer view.Discard()
				}
				_, err = get(view, refKey(parent))
				bp.referenced = err == nil
				if err != nil && !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("children of parent %s of %s: %w", parent, m.ID, err)
				}
			case !errors.Is(err, ErrNotFound):
				return fmt.Errorf("parent %s of %s: %w", parent, m.ID, err)
			}
			p.parents = append(p.parents, bp)
			parents[parent] = bp
		}
		plans = append(plans, p)
		planned[m.ID] = true
	}

	if s.afterRead != nil && len(plans) > 0 {
		s.afterRead(&ms[plans[0].i])
	}
	s.commitMu.Lock()
	var (
		charges []charge
		added   []batchAdded
		kept    = make([]batchPlan, 0, len(plans)) // within the quota: written
		named   = make(map[protocol.ID]bool)       // new in the batch, named by a message written with it
		linked  = make(map[protocol.ID]bool)       // stored parents whose r key is written in txn
	)
	fail := func(err error) error {
		s.commitMu.Unlock()
		for _, c := range charges {
			s.undo(c)
		}
		return err
	}
	for _, p := range plans {
		if p.skipped != 0 && s.ids.changed(ms[p.i].ID, p.skipped) {
			// A writer of a key this attempt did not read has committed
			// or is committing (idfilter.go): again, reading it.
			s.commitMu.Unlock()
			return errRetry
		}
	}
	for _, p := range plans {
		m := ms[p.i]
		c, err := s.chargeBookLocked(m, q)
		if errors.Is(err, ErrQuota) {
			results[p.i].Err = fmt.Errorf("store: put %s: %w", m.ID, err)
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("put %s: %w", m.ID, err))
		}
		charges = append(charges, c)
		kept = append(kept, p)
	}
	// The counters the batch charged, once each, with its totals.
	if err := s.writeUsageLocked(txn, charges); err != nil {
		return fail(fmt.Errorf("put batch: usage: %w", err))
	}
	// A message of the batch that another one written with it names, in
	// either order, is never a head: its head key is neither set nor
	// deleted (a set and a delete in one transaction still write a
	// tombstone, which every compaction then carries).
	for _, p := range kept {
		for _, bp := range p.parents {
			if planned[bp.id] {
				named[bp.id] = true
			}
		}
	}
	for _, p := range kept {
		m := ms[p.i]
		a, err := s.writeBatched(txn, m, p, named, linked)
		if err != nil {
			return fail(fmt.Errorf("put %s: %w", m.ID, err))
		}
		a.i = p.i
		added = append(added, a)
		s.ids.wrote(&ms[p.i])
	}
	if len(added) == 0 {
		s.commitMu.Unlock()
		s.fillDups(ms, dups, first, results)
		return nil
	}
	pending := make([]protocol.ID, len(added))
	for k, a := range added {
		pending[k] = ms[a.i].ID
	}
	s.beginHeads(pending...)
	done := make(chan error, 1)
	txn.CommitWith(func(err error) { done <- err })
	s.commitMu.Unlock()

	if err := <-done; err != nil {
		for _, c := range charges {
			s.undo(c)
		}
		s.cancelHeads(pending...)
		if errors.Is(err, badger.ErrConflict) {
			return errRetry
		}
		return fmt.Errorf("commit: %w", err)
	}
	for _, c := range charges {
		s.settle(c)
	}
	if s.afterCommit != nil {
		for _, a := range added {
			s.afterCommit(&ms[a.i])
		}
	}
	s.updateHeadsBatch(ms, added)
	keys := make(map[protocol.ID][]protocol.SyncKey)
	for _, a := range added {
		m := &ms[a.i]
		keys[m.Space] = append(keys[m.Space], m.SyncKey())
		results[a.i] = PutResult{Entry: Entry{Message: *m, Cursor: Cursor(a.seq)}, Added: true}
	}
	for space, ks := range keys {
		s.updateIndex(space, true, ks...)
		s.notify(space)
	}
	s.fillDups(ms, dups, first, results)
	return nil
}

// writeBatched writes m's keys into txn under commitMu, as putOnce does,
// given what was read of it (p), the new messages of the batch that one
// written with them names (named: no heads) and the stored parents already
// unheaded and referenced in txn (linked).
func (s *Store) writeBatched(txn *badger.Txn, m Message, p batchPlan, named, linked map[protocol.ID]bool) (batchAdded, error) {
	a := batchAdded{head: !p.referenced && !named[m.ID]}
	if a.head {
		if err := txn.Set(headKey(m.Space, m.ID), nil); err != nil {
			return a, fmt.Errorf("set head: %w", err)
		}
	}
	for _, bp := range p.parents {
		switch {
		case linked[bp.id]:
			// Its r key written in txn already: nothing but the c key.
		case bp.referenced:
			// Stored, no head, its r key there: written again, once per
			// batch, as every Put of a child writes it: a delete that
			// read the parent as left without children reads the r key
			// and so conflicts with the new child (see deleteOnce).
			if err := txn.Set(refKey(bp.id), nil); err != nil {
				return a, fmt.Errorf("link parent %s: %w", bp.id, err)
			}
			linked[bp.id] = true
		case !bp.space.IsZero():
			// Stored and a head until now.
			if err := txn.Delete(headKey(bp.space, bp.id)); err != nil {
				return a, fmt.Errorf("unhead parent %s: %w", bp.id, err)
			}
			a.unheaded = append(a.unheaded, headRef{bp.space, bp.id})
			linked[bp.id] = true
			fallthrough
		default:
			// Or not stored: new in the batch (never a head, see named),
			// or not held; once it is, the r key says it is no head.
			if err := txn.Set(refKey(bp.id), nil); err != nil {
				return a, fmt.Errorf("link parent %s: %w", bp.id, err)
			}
		}
		if err := txn.Set(childKey(bp.id, m.ID), nil); err != nil {
			return a, fmt.Errorf("link parent %s: %w", bp.id, err)
		}
	}
	for _, to := range m.ReplyTo {
		if err := txn.Set(replyKey(to, m.ID), nil); err != nil {
			return a, fmt.Errorf("index reply to %s: %w", to, err)
		}
	}
	if err := txn.Set(timeKey(m.Space, m.SyncKey()), nil); err != nil {
		return a, fmt.Errorf("set time: %w", err)
	}
	if m.Expires != 0 {
		if err := txn.Set(expiryKey(m.Expires, m.ID), nil); err != nil {
			return a, fmt.Errorf("set expiry: %w", err)
		}
	}
	seq, err := s.nextSeqLocked(m.Space)
	if err != nil {
		return a, err
	}
	a.seq = seq
	if err := setRecord(txn, m, seq); err != nil {
		return a, err
	}
	if err := txn.Set(orderKey(m.Space, seq), m.ID[:]); err != nil {
		return a, fmt.Errorf("set order: %w", err)
	}
	return a, nil
}

// fillDups gives each later copy of a message in the batch the first
// copy's entry, not added.
func (s *Store) fillDups(ms []Message, dups []int, first map[protocol.ID]int, results []PutResult) {
	for _, i := range dups {
		f := results[first[ms[i].ID]]
		results[i] = PutResult{Entry: f.Entry, Err: f.Err}
	}
}

// updateHeadsBatch is updateHeads for the messages of a committed batch:
// the parents they name stop being heads, and each one that was a head
// when the batch read becomes one unless a child unheaded it since (see
// beginHeads), in spaces whose heads are cached.
func (s *Store) updateHeadsBatch(ms []Message, added []batchAdded) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	for _, a := range added {
		s.unheadLocked(a.unheaded)
	}
	for _, a := range added {
		m := &ms[a.i]
		if s.endHeadsLocked(m.ID) || !a.head {
			continue
		}
		if hs, ok := s.heads[m.Space]; ok {
			s.headTick++
			hs[m.ID] = s.headTick
		}
	}
}

// Wires returns the wire bytes of the messages ids of space, as Wire does
// for each one, in one read transaction (a sync session sends thousands at
// once): wires[i] is ids[i]'s, nil when it is not held (never, expired, or
// of another space). It stops after the message that brings the bytes read
// to limit or more, so wires may be shorter than ids; it reads at least
// one.
func (s *Store) Wires(space protocol.ID, ids []protocol.ID, limit int) ([][]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	wires := make([][]byte, 0, min(len(ids), 1024))
	now := s.nowMilli()
	err := s.db.View(func(txn *badger.Txn) error {
		read := 0
		for _, id := range ids {
			if read >= limit && len(wires) > 0 {
				return nil
			}
			raw, err := wireIn(txn, space, id, now)
			if err != nil {
				return fmt.Errorf("wire %s: %w", id, err)
			}
			wires = append(wires, raw)
			read += len(raw)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return wires, nil
}

// wireIn is Wire's read of one message in txn: nil (and no error) when
// it is not held, expired or of another space.
func wireIn(txn *badger.Txn, space, id protocol.ID, now int64) ([]byte, error) {
	val, err := get(txn, messageKey(id))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case recordExpired(val, now):
		return nil, nil
	}
	if sp, err := recordSpace(val); err != nil || sp != space {
		return nil, err
	}
	e, err := readEntryRecord(txn, id, val)
	if err != nil {
		return nil, err
	}
	if e.Raw == nil {
		return []byte{}, nil // stored with no bytes: still found
	}
	return e.Raw, nil
}
