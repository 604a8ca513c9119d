package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// sweepBatch is the most messages one delete transaction removes, so that
// a large backlog is deleted in many bounded transactions. A batch that is
// still too big for Badger (messages with many parents or chunks) is split.
// Puts wait for a delete's commit (see deleteOnce): with 64 (~450 keys
// deleted) it took 1.2-1.5 ms (p50) in TestSweepSendLatencyFigures, with
// 256 4.7 ms, for a sweep of 6,200-7,800 messages/s either way (loaded
// machine, without the pauses of deletePaced).
const sweepBatch = 64

// runSweep is one background Sweep.
func (s *Store) runSweep(ctx context.Context) {
	n, err := s.Sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed):
		s.logger.Warn("store: sweep", "err", err, "removed", n)
	case n > 0:
		s.logger.Debug("store: sweep", "removed", n)
	}
}

// Sweep deletes the messages that have expired and those beyond their
// space's retention (see Retention), in batches of bounded size, and
// returns how many it deleted; it trims the sent log too (see Sent),
// which it does not count. It runs in the background every
// Options.SweepInterval; calling it directly is safe at any time (sweeps
// run one at a time). It stops early, with ctx's error, when ctx ends.
func (s *Store) Sweep(ctx context.Context) (removed int, err error) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	now := s.nowMilli()
	removed, err = s.sweepExpired(ctx, now)
	if err != nil {
		return removed, fmt.Errorf("store: sweep expired: %w", err)
	}
	n, err := s.sweepRetention(ctx, now)
	removed += n
	if err != nil {
		return removed, fmt.Errorf("store: sweep retention: %w", err)
	}
	if err := s.trimSent(ctx, now); err != nil {
		return removed, fmt.Errorf("store: sweep sent log: %w", err)
	}
	return removed, nil
}

// sweepExpired deletes the messages whose Expires is at most now.
func (s *Store) sweepExpired(ctx context.Context, now int64) (int, error) {
	removed := 0
	from := []byte{prefixExpiry}
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		ids, next, err := s.expiredIDs(from, now)
		if err != nil || len(ids) == 0 {
			return removed, err
		}
		n, err := s.deletePaced(ctx, ids)
		removed += n
		if err != nil || next == nil {
			return removed, err
		}
		from = next
	}
}

// expiredIDs returns up to sweepBatch messages from expiry key from on
// that expire at or before now, and the key to continue from (nil at the
// end).
func (s *Store) expiredIDs(from []byte, now int64) ([]protocol.ID, []byte, error) {
	if err := s.enter(); err != nil {
		return nil, nil, err
	}
	defer s.leave()
	var (
		ids  []protocol.ID
		next []byte
	)
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{prefixExpiry}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(from); it.ValidForPrefix(opts.Prefix); it.Next() {
			k := it.Item().Key()
			expires, id, ok := expiryKeyParts(k)
			if !ok {
				return fmt.Errorf("bad expiry key %x", k)
			}
			if expires > now {
				return nil
			}
			if len(ids) == sweepBatch {
				next = it.Item().KeyCopy(nil)
				return nil
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, next, err
}

// sweepRetention deletes, space by space, the messages beyond retention.
func (s *Store) sweepRetention(ctx context.Context, now int64) (int, error) {
	own, err := s.ownRetentions()
	if err != nil {
		return 0, err
	}
	var spaces []protocol.ID
	if s.retention.IsZero() {
		for id := range own {
			spaces = append(spaces, id)
		}
	} else if spaces, err = s.messageSpaces(); err != nil {
		return 0, err
	}
	removed := 0
	for _, space := range spaces {
		r, ok := own[space]
		if !ok {
			r = s.defaultRetention(space)
		}
		n, err := s.applyRetention(ctx, space, r, now)
		removed += n
		if err != nil {
			return removed, fmt.Errorf("space %s: %w", space, err)
		}
	}
	return removed, nil
}

// applyRetention deletes space's messages beyond r.
func (s *Store) applyRetention(ctx context.Context, space protocol.ID, r Retention, now int64) (int, error) {
	removed := 0
	// deleteKeys deletes up to limit keys from *from on below hi and moves
	// *from past them (so a key that will not go cannot stall the sweep).
	deleteKeys := func(from *protocol.SyncKey, hi protocol.SyncKey, limit int) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		keys, err := s.Keys(space, *from, hi, limit)
		if err != nil || len(keys) == 0 {
			return 0, err
		}
		*from = successor(keys[len(keys)-1])
		ids := make([]protocol.ID, len(keys))
		for i, k := range keys {
			ids[i] = k.ID
		}
		n, err := s.deletePaced(ctx, ids)
		removed += n
		return len(keys), err
	}
	if r.MaxAge > 0 {
		from, cutoff := protocol.MinSyncKey, protocol.SyncKey{Time: ageCutoff(now, r.MaxAge)}
		for {
			n, err := deleteKeys(&from, cutoff, sweepBatch)
			if err != nil {
				return removed, err
			}
			if n < sweepBatch {
				break
			}
		}
	}
	if r.MaxCount > 0 {
		// At most the excess found now: a space that takes messages in
		// faster than the sweep deletes them would otherwise keep this
		// loop, and sweepMu, for as long as they come; the next sweep
		// deletes what came meanwhile.
		count, err := s.Count(space)
		if err != nil || count <= r.MaxCount {
			return removed, err
		}
		from, excess := protocol.MinSyncKey, count-r.MaxCount
		for excess > 0 {
			n, err := deleteKeys(&from, protocol.MaxSyncKey, min(excess, sweepBatch))
			if err != nil || n == 0 {
				return removed, err
			}
			excess -= n
		}
	}
	return removed, nil
}

// ageCutoff returns the lowest created_at kept at now under maxAge > 0.
func ageCutoff(now int64, maxAge time.Duration) int64 {
	if cut := now - maxAge.Milliseconds(); cut <= now {
		return cut
	}
	return math.MinInt64 // overflowed
}

// successor returns the smallest sync key above k (k itself at the top).
func successor(k protocol.SyncKey) protocol.SyncKey {
	for i := len(k.ID) - 1; i >= 0; i-- {
		k.ID[i]++
		if k.ID[i] != 0 {
			return k
		}
	}
	if k.Time == math.MaxInt64 {
		return protocol.MaxSyncKey
	}
	return protocol.SyncKey{Time: k.Time + 1}
}

// ownRetentions returns the non-zero retentions of the joined spaces.
func (s *Store) ownRetentions() (map[protocol.ID]Retention, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	own := make(map[protocol.ID]Retention)
	err := scanJSON(s.db, prefixSpace, func(sp Space) {
		if !sp.Retention.IsZero() {
			own[sp.ID] = sp.Retention
		}
	})
	return own, err
}

// messageSpaces lists the spaces that hold messages (in the time index).
func (s *Store) messageSpaces() ([]protocol.ID, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var spaces []protocol.ID
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{prefixTime}
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Rewind()
		for it.ValidForPrefix(opts.Prefix) {
			k := it.Item().Key()
			if len(k) != timeKeySize {
				return fmt.Errorf("bad time key %x", k)
			}
			space := protocol.ID(k[1 : 1+protocol.IDSize])
			spaces = append(spaces, space)
			// Past every key of space: they are all timeKeySize long.
			it.Seek(append(timePrefix(space), bytes.Repeat([]byte{0xff}, timeKeySize)...))
		}
		return nil
	})
	return spaces, err
}

// spaceRetention returns the retention that applies to space.
func (s *Store) spaceRetention(space protocol.ID) (Retention, error) {
	var sp Space
	err := s.db.View(func(txn *badger.Txn) error {
		val, err := get(txn, spaceKey(space))
		if err != nil {
			return err
		}
		return json.Unmarshal(val, &sp)
	})
	switch {
	case errors.Is(err, ErrNotFound), err == nil && sp.Retention.IsZero():
		return s.defaultRetention(space), nil
	case err != nil:
		return Retention{}, err
	}
	return sp.Retention, nil
}

// defaultRetention is the retention of a space without its own: the
// store's, without MaxCount for the spaces exempt from it.
func (s *Store) defaultRetention(space protocol.ID) Retention {
	r := s.retention
	if s.exempt[space] {
		r.MaxCount = 0
	}
	return r
}

// Floor returns the lowest sync key that this store keeps for space under
// its retention: messages below it would be deleted by the next Sweep, so
// a sync need not send them. It is the later of {now minus MaxAge} and,
// when the space holds at least MaxCount messages, the key of the oldest
// one kept (a key, not a time: messages created in the same millisecond
// may fall on either side); MinSyncKey without retention.
func (s *Store) Floor(space protocol.ID) (protocol.SyncKey, error) {
	if err := s.enter(); err != nil {
		return protocol.SyncKey{}, err
	}
	defer s.leave()
	r, err := s.spaceRetention(space)
	if err != nil {
		return protocol.SyncKey{}, fmt.Errorf("store: floor %s: %w", space, err)
	}
	floor := protocol.MinSyncKey
	if r.MaxAge > 0 {
		floor = protocol.SyncKey{Time: ageCutoff(s.nowMilli(), r.MaxAge)}
	}
	if r.MaxCount > 0 {
		ix, err := s.index(space)
		if err != nil {
			return protocol.SyncKey{}, fmt.Errorf("store: floor %s: %w", space, err)
		}
		ix.mu.Lock()
		if n := ix.list.n; n >= r.MaxCount {
			k, err := ix.list.nth(n - r.MaxCount)
			if err != nil && !errors.Is(err, errPastEnd) { // past the end: no floor by count this time
				ix.mu.Unlock()
				return protocol.SyncKey{}, fmt.Errorf("store: floor %s: %w", space, err)
			}
			if err == nil && floor.Less(k) {
				floor = k
			}
		}
		ix.mu.Unlock()
	}
	return floor, nil
}

// maxSweepPause bounds a sweep's pause after a delete transaction (see
// deletePaced).
const maxSweepPause = 20 * time.Millisecond

// deletePaced is deleteMessages for a sweep: if Puts were made while it
// deleted, it then pauses for as long as the delete took (at most
// maxSweepPause, or until ctx ends), so that a sweep of a large backlog
// takes at most half of the time while messages are being put, leaving
// them the CPU, the disk and Badger's compactions; it runs at full speed
// otherwise. At half speed it still deletes several thousand messages a
// second (see sweepBatch).
func (s *Store) deletePaced(ctx context.Context, ids []protocol.ID) (int, error) {
	puts := s.putsBegun.Load()
	start := time.Now()
	n, err := s.deleteMessages(ids)
	if err != nil || s.putsBegun.Load() == puts {
		return n, err
	}
	s.sweepPauses.Add(1)
	pause := time.NewTimer(min(time.Since(start), maxSweepPause))
	defer pause.Stop()
	select {
	case <-ctx.Done():
	case <-pause.C:
	}
	return n, nil
}

// deletion is what a committed delete transaction removed.
type deletion struct {
	deleted  []Message // without Raw
	restored []headRef // parents that became heads again
	usage    usageAfter
}

// optimisticDeletes is how many attempts of a delete transaction read
// without mutateMu (see deleteOnce) before one reads holding it.
const optimisticDeletes = 3

// deleteMessages deletes the messages ids (those not stored are skipped)
// and returns how many it deleted.
func (s *Store) deleteMessages(ids []protocol.ID) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	return s.deleteBatch(ids)
}

// deleteBatch deletes ids, splitting the batch if Badger finds it too
// big. Its first attempts read without mutateMu, which a Put committing
// meanwhile may make conflict; the last ones read holding it, which no Put
// can, so that a sweep cannot be starved.
func (s *Store) deleteBatch(ids []protocol.ID) (int, error) {
	for attempt := range maxPutAttempts {
		n, err := s.deleteOnce(ids, attempt >= optimisticDeletes)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, badger.ErrTxnTooBig) && len(ids) > 1:
			half := len(ids) / 2
			n, err := s.deleteBatch(ids[:half])
			if err != nil {
				return n, err
			}
			m, err := s.deleteBatch(ids[half:])
			return n + m, err
		case !errors.Is(err, errRetry):
			return 0, fmt.Errorf("delete: %w", err)
		}
	}
	return 0, fmt.Errorf("delete: gave up after %d conflicts", maxPutAttempts)
}

// deletePlan is what a delete transaction read: what it deletes and
// writes.
type deletePlan struct {
	d       deletion // deleted, restored
	dels    [][]byte // keys to delete
	orphans []protocol.ID
	marks   map[protocol.ID]uint64 // highest deleted seq per space, above its mark
	delta   usageDelta
}

// deleteOnce deletes ids in one transaction: each message's record, raw
// bytes and index keys (order, time, expiry, head, the children index
// under its parents and the reply index). Keys naming the message as a
// parent (c id …, r id) stay, so that if it is stored again it is not
// taken for a head. A parent left without children is no longer
// referenced and, if stored, is a head again. It returns how many it
// deleted.
//
// Locking: mutateMu is held exclusively from before the usage counters
// are written (see writeDeltaLocked) and the transaction commits until the
// in-memory updates (applyDeletion), so no Put is between its reads and
// its commit when the delete commits: a sweep never makes a Put conflict.
// The reads (most of a delete's time: a record, the children of each
// parent) and the other writes (pending in txn, seen by no one) are made
// before, without mutateMu unless lockReads, so that Puts wait for no
// more than a commit of sweepBatch messages.
//
// A Put that commits between those reads and the delete's commit and
// writes a key the delete read makes the delete conflict, and it is tried
// again (errRetry): a Put of a message deleted here, read as not stored (m
// key), of a parent read as not stored (m key), or of a new child of a
// parent read as left without children (the parent's r key, which
// readOrphan reads and every Put of a child writes; Badger does not see a
// new key under a prefix iterated). A new child of a parent that keeps a
// child changes nothing the delete writes. Only deletes remove children;
// sweeps run one at a time, and two deletes conflict on the child keys
// one iterated and the other deletes. With lockReads the reads too are
// made holding mutateMu: no Put commits meanwhile, so none can make the
// delete conflict (see deleteBatch).
func (s *Store) deleteOnce(ids []protocol.ID, lockReads bool) (int, error) {
	s.compact.wake()
	if lockReads {
		s.mutateMu.Lock()
		defer s.mutateMu.Unlock()
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	p, err := s.readDelete(txn, ids)
	if err != nil {
		return 0, err
	}
	if err := writeDelete(txn, p); err != nil {
		return 0, err
	}
	if !lockReads {
		if s.afterDeleteRead != nil {
			s.afterDeleteRead(ids)
		}
		s.mutateMu.Lock()
		defer s.mutateMu.Unlock()
	}
	d, err := s.commitDelete(txn, p)
	if err != nil {
		return 0, err
	}
	if s.afterDelete != nil {
		s.afterDelete(d.deleted)
	}
	s.applyDeletion(d)
	return len(d.deleted), nil
}

// readDelete reads in txn what deleting ids takes, writing nothing: each
// iterator of an update transaction copies and sorts its pending writes,
// none yet here.
func (s *Store) readDelete(txn *badger.Txn, ids []protocol.ID) (deletePlan, error) {
	var (
		p       = deletePlan{marks: make(map[protocol.ID]uint64)}
		parents []protocol.ID
		seen    = make(map[protocol.ID]bool)
		gone    = make(map[protocol.ID]bool)
	)
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		val, err := get(txn, messageKey(id))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return p, fmt.Errorf("message %s: %w", id, err)
		}
		e, nchunks, size, err := decodeRecordSize(id, val)
		if err != nil {
			return p, err
		}
		if size < 0 { // a version 2 record: size and sender are in the raw bytes
			if e.From, size, err = legacyUsage(txn, id, val); err != nil {
				return p, err
			}
		}
		p.delta.add(e.Space, e.From, size)
		keys := [][]byte{
			messageKey(id),
			orderKey(e.Space, uint64(e.Cursor)),
			timeKey(e.Space, e.SyncKey()),
			headKey(e.Space, id),
		}
		for i := range nchunks {
			keys = append(keys, dataKey(id, i))
		}
		if e.Expires != 0 {
			keys = append(keys, expiryKey(e.Expires, id))
		}
		for _, to := range e.ReplyTo {
			keys = append(keys, replyKey(to, id))
		}
		for i, par := range e.Prev {
			if par == id || par.IsZero() || containsID(e.Prev[:i], par) {
				continue
			}
			keys = append(keys, childKey(par, id))
			parents = append(parents, par)
		}
		p.dels = append(p.dels, keys...)
		gone[id] = true
		p.marks[e.Space] = max(p.marks[e.Space], uint64(e.Cursor))
		e.Raw = nil
		p.d.deleted = append(p.d.deleted, e.Message)
	}

	// Which parents keep a child.
	done := make(map[protocol.ID]bool)
	for _, par := range parents {
		if done[par] {
			continue
		}
		done[par] = true
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = idKey(prefixChild, par)
		it := txn.NewIterator(opts)
		kept := false
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			if !gone[protocol.ID(it.Item().Key()[1+protocol.IDSize:])] {
				kept = true
				break
			}
		}
		it.Close()
		if kept {
			continue
		}
		ref, err := readOrphan(txn, par, gone)
		if err != nil {
			return p, fmt.Errorf("parent %s: %w", par, err)
		}
		if ref.referenced {
			p.orphans = append(p.orphans, par)
			if !ref.space.IsZero() {
				p.d.restored = append(p.d.restored, headRef{ref.space, par})
			}
		}
	}

	for space, seq := range p.marks {
		old, err := readSeqMark(txn, space)
		if err != nil {
			return p, err
		}
		if seq <= old {
			delete(p.marks, space)
		}
	}
	return p, nil
}

// writeDelete writes p into txn (it needs no lock: nothing is visible
// before the commit).
func writeDelete(txn *badger.Txn, p deletePlan) error {
	for _, k := range p.dels {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	for _, par := range p.orphans {
		if err := txn.Delete(refKey(par)); err != nil {
			return err
		}
	}
	for _, r := range p.d.restored {
		if err := txn.Set(headKey(r.space, r.id), nil); err != nil {
			return err
		}
	}
	for space, seq := range p.marks {
		if err := txn.Set(seqMarkKey(space), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return err
		}
	}
	return nil
}

// commitDelete writes the usage counters less p's into txn, which holds
// p's writes, and commits it. mutateMu must be held exclusively.
func (s *Store) commitDelete(txn *badger.Txn, p deletePlan) (deletion, error) {
	d := p.d
	var err error
	if d.usage, err = s.writeDeltaLocked(txn, p.delta); err != nil {
		return d, fmt.Errorf("usage: %w", err)
	}

	s.markDeleting(d.deleted, true)
	if err := txn.Commit(); err != nil {
		s.markDeleting(d.deleted, false)
		if errors.Is(err, badger.ErrConflict) {
			return d, errRetry
		}
		return d, fmt.Errorf("commit: %w", err)
	}
	// A delete lost to a crash of the machine is made again by the next
	// sweep: it need not wait for the disk.
	s.syncer.later()
	return d, nil
}

// orphanRef is what readOrphan read of a parent left without children.
type orphanRef struct {
	referenced bool        // its r key is there (to delete)
	space      protocol.ID // its space if it is stored and stays (a head again); zero if not
}

// readOrphan reads parent, left without children by a delete of gone:
// whether its r key is there (the delete drops it) and, if so, whether it
// is stored and not deleted with them (it becomes a head again). Reading
// the r key makes a child Put concurrently (writing it) conflict, and
// reading its record a Put of it.
func readOrphan(txn *badger.Txn, parent protocol.ID, gone map[protocol.ID]bool) (orphanRef, error) {
	var ref orphanRef
	if _, err := get(txn, refKey(parent)); err != nil {
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		return ref, err
	}
	ref.referenced = true
	if gone[parent] {
		return ref, nil
	}
	val, err := get(txn, messageKey(parent))
	if errors.Is(err, ErrNotFound) {
		return ref, nil
	}
	if err != nil {
		return ref, err
	}
	ref.space, err = recordSpace(val)
	return ref, err
}

// markDeleting adds ms to Store.deleting (on) or takes them out.
func (s *Store) markDeleting(ms []Message, on bool) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	for _, m := range ms {
		if on {
			s.deleting[m.ID] = struct{}{}
		} else {
			delete(s.deleting, m.ID)
		}
	}
}

// applyDeletion applies a committed deletion to the cached heads and the
// range indexes. mutateMu must be held exclusively.
func (s *Store) applyDeletion(d deletion) {
	s.applyUsage(d.usage)
	s.headsMu.Lock()
	for _, m := range d.deleted {
		if hs, ok := s.heads[m.Space]; ok {
			delete(hs, m.ID)
		}
		delete(s.deleting, m.ID)
	}
	for _, r := range d.restored {
		if hs, ok := s.heads[r.space]; ok {
			hs[r.id] = 0 // an old message
		}
	}
	s.headsMu.Unlock()

	bySpace := make(map[protocol.ID][]protocol.SyncKey)
	for _, m := range d.deleted {
		bySpace[m.Space] = append(bySpace[m.Space], m.SyncKey())
	}
	for space, keys := range bySpace {
		s.updateIndex(space, false, keys...)
	}
}
