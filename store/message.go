package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// Message is what the store keeps of one message.
type Message struct {
	ID    protocol.ID
	Space protocol.ID
	// Time is the message's created_at (Unix ms): with ID it makes the
	// message's sync key (see protocol.SyncKey) and retention reads it.
	Time int64
	// Expires is when the message's TTL ends (Unix ms), 0 for never. From
	// then on Get, Read and Wire no longer return it, and Sweep removes it.
	Expires int64
	Prev    []protocol.ID // causal parents (for heads); may be empty
	// ReplyTo are the messages this one replies to (refs.messages), indexed
	// so that replies can be listed.
	ReplyTo []protocol.ID
	Raw     []byte // the wire encoding, opaque to the store
	// From names the message's sender (its author's peer ID, as text),
	// opaque to the store: it is what Usage counts per sender and what
	// PutWithin's sender quota bounds. Empty is a sender like any other.
	From string
}

// SyncKey returns m's position in sync order.
func (m *Message) SyncKey() protocol.SyncKey { return protocol.SyncKey{Time: m.Time, ID: m.ID} }

// expired reports whether m's TTL has ended at now (Unix ms).
func (m *Message) expired(now int64) bool { return m.Expires != 0 && m.Expires <= now }

// Entry is a stored message at a position in its space's order.
type Entry struct {
	Message
	Cursor Cursor // position; reading "after" it continues with the next message
}

// maxPutAttempts bounds retries of a Put that lost a conflict to a
// concurrent Put of a related message (its parent, child or itself).
const maxPutAttempts = 16

// errRetry means a Put lost a conflict and should be tried again.
var errRetry = errors.New("store: retry")

// Put stores m durably (on disk before it returns) and appends it to its
// space's order. A message already stored (same ID) is not stored again: Put
// returns the stored Entry, added=false and no error. The Entry of a
// message it adds shares m's slices (Raw, Prev, ReplyTo), which the store
// does not keep. Concurrent Puts share
// fsyncs (group commit, see syncer.go). It is PutWithin with no quota.
func (s *Store) Put(ctx context.Context, m Message) (e Entry, added bool, err error) {
	return s.PutWithin(ctx, m, Quota{})
}

// PutWithin is Put, except that a new message that would take its space,
// or its sender (m.From) in that space, over q is not stored: it returns an
// error wrapping ErrQuota. The check and the counters it reads are exact
// (Puts in flight included), so concurrent Puts cannot overshoot a quota.
// Concurrent PutWithins share one transaction as well as one sync (see
// commitq.go); a message already stored is synced too (it may have come
// from the network a moment ago, not yet on disk).
func (s *Store) PutWithin(ctx context.Context, m Message, q Quota) (e Entry, added bool, err error) {
	return s.putDurable(ctx, m, q, nil)
}

// PutWithinThen is PutWithin that also calls committed once m is
// committed, visible to reads (stored by this Put or found stored), and
// before it is on disk: a send publishes its message then, before the
// sync it waits for, instead of after it. committed is not called if the
// Put fails before its commit; it is called before PutWithinThen returns,
// possibly from another goroutine (the commit's leader), before the sync
// of the Puts committed with it: it must be quick. When the sync then
// fails, PutWithinThen returns its error although committed was called.
func (s *Store) PutWithinThen(ctx context.Context, m Message, q Quota, committed func()) (e Entry, added bool, err error) {
	return s.putDurable(ctx, m, q, committed)
}

// PutRelayed is PutWithin for a message from the network, which peers can
// send again: it returns once m is stored and visible, without waiting for
// the disk, which it reaches within Options.SyncInterval (or with the next
// durable write). A crash of the process loses nothing (Badger's logs are
// written when it returns), a crash of the machine may lose it.
func (s *Store) PutRelayed(ctx context.Context, m Message, q Quota) (e Entry, added bool, err error) {
	e, added, err = s.put(ctx, m, q)
	if added {
		s.syncer.later()
	}
	return e, added, err
}

// put is PutWithin without the wait for the disk.
func (s *Store) put(ctx context.Context, m Message, q Quota) (e Entry, added bool, err error) {
	if err := checkPut(m); err != nil {
		return Entry{}, false, err
	}
	if err := s.enter(); err != nil {
		return Entry{}, false, err
	}
	defer s.leave()
	for range maxPutAttempts {
		if err := ctx.Err(); err != nil {
			return Entry{}, false, fmt.Errorf("store: put %s: %w", m.ID, err)
		}
		e, added, err = s.putOnce(m, q)
		if !errors.Is(err, errRetry) {
			return e, added, err
		}
	}
	return Entry{}, false, fmt.Errorf("store: put %s: gave up after %d conflicts", m.ID, maxPutAttempts)
}

// putOnce makes one attempt at Put.
//
// Ordering: the space's order must equal visibility order, or a follower
// reading after cursor X could miss a message that becomes visible later
// with a lower seq. Badger assigns commit timestamps in the order
// transactions reach commit, and a new read transaction waits until every
// earlier commit is applied, so readers see a prefix of commit order. Here
// seq allocation and CommitWith (which assigns the commit timestamp before
// returning) happen under commitMu, making seq order = commit order, while
// the wait for the commit (and, in PutWithin, the disk) happens outside it
// so that concurrent Puts share one write and one fsync.
// The transaction is started (NewTransaction may wait for commits in
// flight) and read outside commitMu, and under mutateMu, which deletes
// take exclusively: what it read is not deleted before it commits.
//
// Heads: m is a head unless a stored message names it (r key); m's stored
// parents stop being heads. A concurrent parent/child pair is caught by
// conflict detection: the child reads m|parent, the parent reads r|parent,
// and each writes what the other read. A concurrent Put of the same ID
// conflicts on m|id. Conflicts are retried; the retry sees the winner.
func (s *Store) putOnce(m Message, q Quota) (Entry, bool, error) {
	s.compact.wake()
	// Held from before the transaction reads until the in-memory state is
	// updated (see Store.mutateMu): no delete commits between the reads
	// and the commit, so a sweep never makes the Put conflict, and no
	// delete of m applies its own update first.
	s.putsBegun.Add(1)
	s.mutateMu.RLock()
	defer s.mutateMu.RUnlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()

	// Each read only if the ID filters say maybe (idfilter.go).
	var skip skipped
	if s.ids.mayBeStored(m.ID) {
		e, err := readEntry(txn, m.ID)
		switch {
		case err == nil:
			return e, false, nil
		case !errors.Is(err, ErrNotFound):
			return Entry{}, false, fmt.Errorf("store: put %s: check existing: %w", m.ID, err)
		}
	} else {
		skip |= skippedRecord
	}
	referenced := false
	if s.ids.mayBeNamed(m.ID) {
		_, err := get(txn, refKey(m.ID))
		referenced = err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Entry{}, false, fmt.Errorf("store: put %s: check children: %w", m.ID, err)
		}
	} else {
		skip |= skippedRef
	}
	if !referenced {
		if err := txn.Set(headKey(m.Space, m.ID), nil); err != nil {
			return Entry{}, false, fmt.Errorf("store: put %s: set head: %w", m.ID, err)
		}
	}
	var unheaded []headRef // stored parents that stop being heads
	heads := s.cachedHeads(m.Space, m.Prev)
	for i, p := range m.Prev {
		if p == m.ID || p.IsZero() || containsID(m.Prev[:i], p) {
			continue
		}
		if heads[i] {
			// A head of m's space in the cache: stored there, its Put
			// done, so no concurrent Put of it to conflict with (see
			// cachedHeads).
			if err := s.unheadParent(txn, m.Space, p, m.ID); err != nil {
				return Entry{}, false, fmt.Errorf("store: put %s: link parent %s: %w", m.ID, p, err)
			}
			unheaded = append(unheaded, headRef{m.Space, p})
			continue
		}
		space, err := s.linkParent(txn, p, m.ID)
		if err != nil {
			return Entry{}, false, fmt.Errorf("store: put %s: link parent %s: %w", m.ID, p, err)
		}
		if !space.IsZero() {
			unheaded = append(unheaded, headRef{space, p})
		}
	}

	for _, to := range m.ReplyTo {
		if err := txn.Set(replyKey(to, m.ID), nil); err != nil {
			return Entry{}, false, fmt.Errorf("store: put %s: index reply to %s: %w", m.ID, to, err)
		}
	}
	if err := txn.Set(timeKey(m.Space, m.SyncKey()), nil); err != nil {
		return Entry{}, false, fmt.Errorf("store: put %s: set time: %w", m.ID, err)
	}
	if m.Expires != 0 {
		if err := txn.Set(expiryKey(m.Expires, m.ID), nil); err != nil {
			return Entry{}, false, fmt.Errorf("store: put %s: set expiry: %w", m.ID, err)
		}
	}

	if s.afterRead != nil {
		s.afterRead(&m)
	}

	s.commitMu.Lock()
	if skip != 0 && s.ids.changed(m.ID, skip) {
		// A writer of a key this attempt did not read has committed or
		// is committing (idfilter.go): again, reading it.
		s.commitMu.Unlock()
		return Entry{}, false, errRetry
	}
	seq, err := s.nextSeqLocked(m.Space)
	if err != nil {
		s.commitMu.Unlock()
		return Entry{}, false, fmt.Errorf("store: put %s: %w", m.ID, err)
	}
	if err := setRecord(txn, m, seq); err != nil {
		s.commitMu.Unlock()
		return Entry{}, false, fmt.Errorf("store: put %s: %w", m.ID, err)
	}
	if err := txn.Set(orderKey(m.Space, seq), m.ID[:]); err != nil {
		s.commitMu.Unlock()
		return Entry{}, false, fmt.Errorf("store: put %s: set order: %w", m.ID, err)
	}
	// Last: the usage counters (see usage.go) include this Put from here
	// until it is settled or undone.
	c, err := s.chargeLocked(txn, m, q)
	if err != nil {
		s.commitMu.Unlock()
		return Entry{}, false, fmt.Errorf("store: put %s: %w", m.ID, err)
	}
	s.ids.wrote(&m)
	s.beginHeads(m.ID)
	done := make(chan error, 1)
	txn.CommitWith(func(err error) { done <- err })
	s.commitMu.Unlock()

	if err := <-done; err != nil {
		s.undo(c)
		s.cancelHeads(m.ID)
		if errors.Is(err, badger.ErrConflict) {
			return Entry{}, false, errRetry // seq is skipped; gaps are fine
		}
		return Entry{}, false, fmt.Errorf("store: put %s: commit: %w", m.ID, err)
	}
	s.settle(c)
	if s.afterCommit != nil {
		s.afterCommit(&m)
	}
	s.updateHeads(m, !referenced, unheaded)
	s.updateIndex(m.Space, true, m.SyncKey())
	s.notify(m.Space)
	return Entry{Message: returned(m), Cursor: Cursor(seq)}, true, nil
}

// headRef names a message in a space.
type headRef struct{ space, id protocol.ID }

// pendingHead is a message being put (pending), from just before its
// commit until its heads update.
type pendingHead struct {
	puts  int  // Puts of it in flight (Puts of one ID may race)
	named bool // a child's heads update unheaded it meanwhile
}

// The cached heads follow commits without reading the disk again. A
// message is a head unless a child names it. A child that named it before
// its transaction read is seen there (the r key); one whose transaction
// read it as not stored and committed concurrently conflicts with it
// (see putOnce); one whose transaction read it as stored unheads it in
// its own heads update, which may run before the message's. So each Put
// registers its messages (beginHeads) before its commit can be seen, a
// heads update marks the registered messages it unheads, and a message's
// own update (endHeadsLocked) makes it a head only if none marked it.

// beginHeads registers ids as pending, before their commit.
// It takes only pendingMu: it runs under commitMu, and headsMu may be
// held for a while by a first Heads of a space, which reads its heads from
// disk; commits of every space would wait for that.
func (s *Store) beginHeads(ids ...protocol.ID) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	for _, id := range ids {
		p := s.pending[id]
		if p == nil {
			p = &pendingHead{}
			s.pending[id] = p
		}
		p.puts++
	}
}

// cancelHeads ends the registration of ids, whose commit failed.
func (s *Store) cancelHeads(ids ...protocol.ID) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	for _, id := range ids {
		s.endHeadsLocked(id)
	}
}

// endHeadsLocked ends one registration of id and reports whether a
// child's heads update unheaded it since it began. headsMu is held.
func (s *Store) endHeadsLocked(id protocol.ID) (named bool) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	p := s.pending[id]
	if p == nil {
		return false
	}
	if p.puts--; p.puts <= 0 {
		delete(s.pending, id)
	}
	return p.named
}

// unheadLocked applies a committed child's unheaded parents to the cached
// heads and marks those pending. headsMu is held.
func (s *Store) unheadLocked(unheaded []headRef) {
	s.pendingMu.Lock()
	for _, r := range unheaded {
		if p := s.pending[r.id]; p != nil {
			p.named = true
		}
	}
	s.pendingMu.Unlock()
	for _, r := range unheaded {
		if hs, ok := s.heads[r.space]; ok {
			delete(hs, r.id)
		}
	}
}

// updateHeads applies a committed Put to the cached heads of the spaces
// already cached (the others are read from disk when first asked for):
// its unheaded parents stop being heads, and m becomes one if it was
// (head) when its transaction read and no child unheaded it since.
func (s *Store) updateHeads(m Message, head bool, unheaded []headRef) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	s.unheadLocked(unheaded)
	if s.endHeadsLocked(m.ID) || !head {
		return
	}
	if hs, ok := s.heads[m.Space]; ok {
		s.headTick++
		hs[m.ID] = s.headTick
	}
}

// cachedHeads reports which of ids are heads of space in the cached
// heads (false for all when they are not cached). A send's parents are
// its space's heads, so a Put of it needs no read of them: a cached head
// is stored in that space and its Put is done (its heads update ran).
// The Put holds mutateMu, so no delete of it (sweep) commits before the
// Put does.
func (s *Store) cachedHeads(space protocol.ID, ids []protocol.ID) []bool {
	if len(ids) == 0 {
		return nil
	}
	out := make([]bool, len(ids))
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	if hs, ok := s.heads[space]; ok {
		for i, id := range ids {
			_, out[i] = hs[id]
		}
	}
	return out
}

// linkParent records in txn that child names parent in its Prev. If parent
// is stored, it stops being a head, and its space is returned.
func (s *Store) linkParent(txn *badger.Txn, parent, child protocol.ID) (protocol.ID, error) {
	var space protocol.ID
	val, err := get(txn, messageKey(parent))
	switch {
	case err == nil:
		space, err = recordSpace(val)
		if err != nil {
			return space, err
		}
		return space, s.unheadParent(txn, space, parent, child)
	case !errors.Is(err, ErrNotFound):
		return space, err
	}
	if err := txn.Set(childKey(parent, child), nil); err != nil {
		return space, err
	}
	return space, txn.Set(refKey(parent), nil)
}

// unheadParent records in txn that child names parent, a stored message
// of space: it stops being a head.
func (s *Store) unheadParent(txn *badger.Txn, space, parent, child protocol.ID) error {
	if err := txn.Delete(headKey(space, parent)); err != nil {
		return err
	}
	if err := txn.Set(childKey(parent, child), nil); err != nil {
		return err
	}
	return txn.Set(refKey(parent), nil)
}

// nextSeqLocked allocates the next seq of space. commitMu must be held.
func (s *Store) nextSeqLocked(space protocol.ID) (uint64, error) {
	last, ok := s.seqs[space]
	if !ok {
		// First Put into space since Open: no seq of space has been allocated
		// in this process, so the last one on disk is stable.
		var err error
		last, err = s.lastSeq(space)
		if err != nil {
			return 0, fmt.Errorf("load seq: %w", err)
		}
	}
	s.seqs[space] = last + 1
	return last + 1, nil
}

// lastSeq returns the highest seq allocated in space and still recorded:
// the last in its order index or, if higher, the last deleted one.
func (s *Store) lastSeq(space protocol.ID) (uint64, error) {
	var seq uint64
	err := s.db.View(func(txn *badger.Txn) error {
		seq = lastOrderSeq(txn, space)
		mark, err := readSeqMark(txn, space)
		seq = max(seq, mark)
		return err
	})
	return seq, err
}

// lastOrderSeq returns the highest seq in space's order index, or 0.
func lastOrderSeq(txn *badger.Txn, space protocol.ID) uint64 {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Reverse = true
	opts.Prefix = orderPrefix(space)
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(orderKey(space, ^uint64(0)))
	if !it.ValidForPrefix(opts.Prefix) {
		return 0
	}
	seq, _ := orderKeySeq(it.Item().Key())
	return seq
}

// readSeqMark returns the highest seq of a deleted message of space, or 0.
func readSeqMark(txn *badger.Txn, space protocol.ID) (uint64, error) {
	val, err := get(txn, seqMarkKey(space))
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(val) != seqSize:
		return 0, fmt.Errorf("seq mark of %s has %d bytes", space, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// Has reports whether message id is stored, expired or not: a message
// stays known (for dedupe) until Sweep removes it.
func (s *Store) Has(id protocol.ID) (bool, error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	defer s.leave()
	if !s.ids.mayBeStored(id) {
		return false, nil
	}
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(messageKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: has %s: %w", id, err)
	}
	return found, nil
}

// Get returns the stored message id, or ErrNotFound if it is not stored
// or has expired.
func (s *Store) Get(id protocol.ID) (Entry, error) {
	if err := s.enter(); err != nil {
		return Entry{}, err
	}
	defer s.leave()
	var e Entry
	now := s.nowMilli()
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		e, err = readEntry(txn, id)
		if err == nil && e.expired(now) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Entry{}, fmt.Errorf("store: get %s: %w", id, err)
	}
	return e, nil
}

// Wire returns the wire bytes of message id of space, or false if it is
// not stored, has expired, or belongs to another space (sync serves a space
// only what belongs to it).
func (s *Store) Wire(space, id protocol.ID) ([]byte, bool, error) {
	if err := s.enter(); err != nil {
		return nil, false, err
	}
	defer s.leave()
	var raw []byte
	now := s.nowMilli()
	err := s.db.View(func(txn *badger.Txn) error {
		val, err := get(txn, messageKey(id))
		if err != nil || recordExpired(val, now) {
			return err
		}
		if sp, err := recordSpace(val); err != nil || sp != space {
			return err
		}
		e, err := readEntryRecord(txn, id, val)
		raw = e.Raw
		if err == nil && raw == nil {
			raw = []byte{} // stored with no bytes: still found
		}
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("store: wire %s: %w", id, err)
	}
	return raw, raw != nil, nil
}

// Read returns up to limit messages of space stored after cursor, in the
// space's order, and the cursor to pass next time (after itself when there
// is nothing new). Expired messages are skipped, and the returned cursor
// moves past them too, so it may be beyond the last entry returned, even
// when none is. Its cost does not depend on how many messages the space
// holds, only on how many it returns or skips. limit must be positive.
func (s *Store) Read(space protocol.ID, after Cursor, limit int) ([]Entry, Cursor, error) {
	entries, next, _, err := s.ReadWithin(space, after, limit, -1, 0)
	return entries, next, err
}

// Heads returns the messages of space that no stored message names in its
// Prev, sorted by ID bytes. A message whose delete (Sweep) has committed
// is not among them (see Store.deleting): a send naming the heads names no
// message deleted before it asked. One deleted after it asked, before its
// Put, is named all the same (its Prev is signed by then), and is linked
// as a missing parent.
func (s *Store) Heads(space protocol.ID) ([]protocol.ID, error) {
	heads, err := s.headsOf(space)
	if err != nil {
		return nil, err
	}
	ids := make([]protocol.ID, len(heads))
	for i, h := range heads {
		ids[i] = h.id
	}
	slices.SortFunc(ids, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	return ids, nil
}

// HeadsNewestFirst returns Heads in the order this store took them in as
// heads, the newest first (those read from disk at the end, sorted by ID
// bytes): a message just stored, which peers may have missed, or this
// node's own last send.
func (s *Store) HeadsNewestFirst(space protocol.ID) ([]protocol.ID, error) {
	heads, err := s.headsOf(space)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(heads, func(a, b headAt) int {
		if a.tick != b.tick {
			return cmp.Compare(b.tick, a.tick)
		}
		return bytes.Compare(a.id[:], b.id[:])
	})
	ids := make([]protocol.ID, len(heads))
	for i, h := range heads {
		ids[i] = h.id
	}
	return ids, nil
}

// headAt is a head and when it became one (see Store.heads).
type headAt struct {
	id   protocol.ID
	tick uint64
}

// headsOf returns the heads of space (see Heads), in no order.
func (s *Store) headsOf(space protocol.ID) ([]headAt, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	hs, ok := s.heads[space]
	if !ok {
		ids, err := s.readHeads(space)
		if err != nil {
			return nil, err
		}
		hs = make(map[protocol.ID]uint64, len(ids))
		for _, id := range ids {
			hs[id] = 0
		}
		s.heads[space] = hs
	}
	heads := make([]headAt, 0, len(hs))
	for id, tick := range hs {
		if _, gone := s.deleting[id]; !gone {
			heads = append(heads, headAt{id, tick})
		}
	}
	return heads, nil
}

// Replies returns the stored messages that name id in their refs.messages,
// sorted by ID bytes; at most limit of them (limit > 0).
func (s *Store) Replies(id protocol.ID, limit int) ([]protocol.ID, error) {
	if limit <= 0 {
		return nil, errors.New("store: replies: limit must be positive")
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	out, err := s.keyIDs(replyPrefix(id), limit)
	if err != nil {
		return nil, fmt.Errorf("store: replies to %s: %w", id, err)
	}
	return out, nil
}

// readHeads reads a space's heads from disk.
func (s *Store) readHeads(space protocol.ID) ([]protocol.ID, error) {
	heads, err := s.keyIDs(headPrefix(space), -1)
	if err != nil {
		return nil, fmt.Errorf("store: heads %s: %w", space, err)
	}
	return heads, nil
}

// keyIDs lists the IDs that end the keys prefix+ID, in key order; at most
// limit of them when limit > 0.
func (s *Store) keyIDs(prefix []byte, limit int) ([]protocol.ID, error) {
	var ids []protocol.ID
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix) && (limit <= 0 || len(ids) < limit); it.Next() {
			k := it.Item().Key()
			if len(k) != len(prefix)+protocol.IDSize {
				return fmt.Errorf("bad key %x under prefix %x", k, prefix)
			}
			ids = append(ids, protocol.ID(k[len(prefix):]))
		}
		return nil
	})
	return ids, err
}

// readEntry reads message id (record and raw bytes) in txn.
func readEntry(txn *badger.Txn, id protocol.ID) (Entry, error) {
	val, err := get(txn, messageKey(id))
	if err != nil {
		return Entry{}, err
	}
	return readEntryRecord(txn, id, val)
}

// readEntryRecord decodes message id's record val and reads its raw bytes
// in txn (unless the record holds them). val must stay unchanged while
// the entry is used (its Raw may share it).
func readEntryRecord(txn *badger.Txn, id protocol.ID, val []byte) (Entry, error) {
	e, n, err := decodeRecord(id, val)
	if err != nil {
		return Entry{}, err
	}
	if e.Raw, err = readChunks(txn, id, n, e.Raw); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// setRecord writes message m's record, seq its sequence number, into txn,
// with its raw bytes: in the record itself when both fit under Badger's
// value threshold (so they stay in the LSM tree, as a small record does,
// and a read of the message is one read), else under its data keys.
func setRecord(txn *badger.Txn, m Message, seq uint64) error {
	inline := inlineRecordSize(m) < valueThreshold
	if err := txn.Set(messageKey(m.ID), encodeRecord(m, seq, inline)); err != nil {
		return fmt.Errorf("set message: %w", err)
	}
	if inline {
		return nil
	}
	for i, chunk := range chunks(m.Raw) {
		if err := txn.Set(dataKey(m.ID, i), chunk); err != nil {
			return fmt.Errorf("set data: %w", err)
		}
	}
	return nil
}

// inlineRecordSize is the length of encodeRecord(m, seq, true).
func inlineRecordSize(m Message) int {
	uv := uvarintLen
	return recordFixedSize + uv(len(m.Prev)) + len(m.Prev)*protocol.IDSize + uv(len(m.ReplyTo)) +
		len(m.ReplyTo)*protocol.IDSize + uv(0) + uv(len(m.Raw)) + uv(len(m.From)) + len(m.From) + len(m.Raw)
}

// uvarintLen is the length of x as binary.AppendUvarint writes it: 7 bits
// a byte.
func uvarintLen(x int) int { return (bits.Len64(uint64(x)|1) + 6) / 7 }

// readChunks reads the n chunks of message id's raw bytes in txn; inline
// (the bytes a record holds, see setRecord) when there are none.
func readChunks(txn *badger.Txn, id protocol.ID, n int, inline []byte) ([]byte, error) {
	if n == 0 {
		return inline, nil
	}
	var raw []byte
	for i := range n {
		chunk, err := get(txn, dataKey(id, i))
		if err != nil {
			// Not ErrNotFound: the record exists.
			return nil, fmt.Errorf("message %s: raw bytes chunk %d: %v", id, i, err)
		}
		if raw == nil {
			raw = chunk
		} else {
			raw = append(raw, chunk...)
		}
	}
	return raw, nil
}

// MaxRawSize is the largest Message.Raw that Put accepts (well above the
// protocol's 1 MiB message limit).
const MaxRawSize = 255 * dataChunkSize

// dataChunkSize is the largest chunk of raw bytes stored under one key:
// below Badger's in-memory value limit of 1 MiB.
const dataChunkSize = 512 * kib

// chunks splits raw into pieces of at most dataChunkSize.
func chunks(raw []byte) [][]byte {
	var out [][]byte
	for len(raw) > 0 {
		n := min(len(raw), dataChunkSize)
		out = append(out, raw[:n])
		raw = raw[n:]
	}
	return out
}

// Message record, version 4: version(1) | seq(8, BE) | space(32) |
// time(8, BE, two's complement) | expires(8, same) | uvarint len(prev) |
// prev(32 each) | uvarint len(reply-to) | reply-to(32 each) | uvarint number
// of raw chunks | uvarint raw size | uvarint len(from) | from | raw. The
// raw bytes are in the record when there are no chunks (and size bytes of
// them: see setRecord), else under the data keys. Reply-to is kept so that
// a delete can clean the reply index; size and from so that it can update
// the usage counters (see usage.go) without reading the raw bytes.
// Version 3 is version 4 without raw bytes in the record (every record
// with raw bytes had chunks) and is still read, as version 2 (no size, no
// from) is, which is rewritten as version 4 when a store is opened (see
// migrateUsage); version 1 (before time, expiry and reply-to) is not read.
// A weft from before version 4 opens a store this version wrote but
// refuses its version 4 records by name: no downgrade.
const (
	recordVersion   = 4
	recordVersionV3 = 3
	recordVersionV2 = 2
)

// valueThreshold is Badger's value threshold (see badgerOptions): values
// under it stay in the LSM tree, larger ones go to the value log.
const valueThreshold = 1 * kib

const (
	recordHeader    = 1 + seqSize + protocol.IDSize
	recordFixedSize = recordHeader + 2*timeSize
)

// encodeRecord encodes m's record, seq its sequence number: with its raw
// bytes if inline, else with the number of chunks they take under the
// data keys.
func encodeRecord(m Message, seq uint64, inline bool) []byte {
	n := recordFixedSize + 5*binary.MaxVarintLen64 + (len(m.Prev)+len(m.ReplyTo))*protocol.IDSize + len(m.From)
	if inline {
		n += len(m.Raw)
	}
	b := make([]byte, 0, n)
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, m.Space[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Time))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Expires))
	b = appendIDs(b, m.Prev)
	b = appendIDs(b, m.ReplyTo)
	nchunks := 0
	if !inline {
		nchunks = len(chunks(m.Raw))
	}
	b = binary.AppendUvarint(b, uint64(nchunks))
	b = binary.AppendUvarint(b, uint64(len(m.Raw)))
	b = binary.AppendUvarint(b, uint64(len(m.From)))
	b = append(b, m.From...)
	if inline {
		b = append(b, m.Raw...)
	}
	return b
}

func appendIDs(b []byte, ids []protocol.ID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}

var errBadRecord = errors.New("bad message record")

// checkRecordHeader checks an encoded record's version and fixed part.
func checkRecordHeader(b []byte) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%w: empty", errBadRecord)
	case b[0] != recordVersion && b[0] != recordVersionV3 && b[0] != recordVersionV2:
		return fmt.Errorf("%w: version %d, want %d to %d (stores from before version 2 cannot be read)",
			errBadRecord, b[0], recordVersionV2, recordVersion)
	case len(b) < recordFixedSize:
		return fmt.Errorf("%w: %d bytes", errBadRecord, len(b))
	}
	return nil
}

// recordSpace returns the space of an encoded record.
func recordSpace(b []byte) (protocol.ID, error) {
	if err := checkRecordHeader(b); err != nil {
		return protocol.ID{}, err
	}
	return protocol.ID(b[1+seqSize : recordHeader]), nil
}

// recordExpired reports whether an encoded record's message has expired
// at now; a bad record is reported as not expired (its decoding fails).
func recordExpired(b []byte, now int64) bool {
	if checkRecordHeader(b) != nil {
		return false
	}
	m := Message{Expires: int64(binary.BigEndian.Uint64(b[recordHeader+timeSize:]))}
	return m.expired(now)
}

// decodeRecord decodes the record of message id, returning it with the
// number of raw chunks, and Raw the raw bytes if the record holds them
// (sharing b; no chunks then), else nil.
func decodeRecord(id protocol.ID, b []byte) (Entry, int, error) {
	e, n, _, err := decodeRecordSize(id, b)
	return e, n, err
}

// decodeRecordSize is decodeRecord that also returns the size of the raw
// bytes: -1 for a version 2 record, which does not hold it (nor From).
func decodeRecordSize(id protocol.ID, b []byte) (Entry, int, int64, error) {
	if err := checkRecordHeader(b); err != nil {
		return Entry{}, 0, 0, fmt.Errorf("message %s: %w", id, err)
	}
	bad := func(what string) (Entry, int, int64, error) {
		return Entry{}, 0, 0, fmt.Errorf("message %s: %w: %s", id, errBadRecord, what)
	}
	e := Entry{Message: Message{ID: id}}
	e.Cursor = Cursor(binary.BigEndian.Uint64(b[1:]))
	e.Space = protocol.ID(b[1+seqSize : recordHeader])
	e.Time = int64(binary.BigEndian.Uint64(b[recordHeader:]))
	e.Expires = int64(binary.BigEndian.Uint64(b[recordHeader+timeSize:]))
	version := b[0]
	rest := b[recordFixedSize:]
	var ok bool
	if e.Prev, rest, ok = readIDs(rest); !ok {
		return bad("prev")
	}
	if e.ReplyTo, rest, ok = readIDs(rest); !ok {
		return bad("reply-to")
	}
	chunks, w := binary.Uvarint(rest)
	if w <= 0 || chunks > 255 {
		return bad("chunk count")
	}
	rest = rest[w:]
	if version == recordVersionV2 {
		if len(rest) != 0 {
			return bad("chunk count")
		}
		return e, int(chunks), -1, nil
	}
	size, w := binary.Uvarint(rest)
	inline := version == recordVersion && chunks == 0
	if w <= 0 || !inline && (size > chunks*dataChunkSize || (chunks > 0 && size <= (chunks-1)*dataChunkSize)) {
		return bad("size")
	}
	rest = rest[w:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return bad("from")
	}
	rest = rest[w:]
	if n > 0 {
		e.From = string(rest[:n])
	}
	rest = rest[n:]
	switch {
	case !inline && len(rest) != 0:
		return bad("from")
	case inline && uint64(len(rest)) != size:
		return bad("size")
	case inline && size > 0:
		e.Raw = rest
	}
	return e, int(chunks), int64(size), nil
}

// readIDs reads a uvarint count and that many IDs from b; nil for none.
func readIDs(b []byte) ([]protocol.ID, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w)/protocol.IDSize {
		return nil, b, false
	}
	b = b[w:]
	if n == 0 {
		return nil, b, true
	}
	ids := make([]protocol.ID, n)
	for i := range ids {
		ids[i] = protocol.ID(b[:protocol.IDSize])
		b = b[protocol.IDSize:]
	}
	return ids, b, true
}

// returned is m as the store returns it (empty Prev and ReplyTo are nil,
// as when read back), sharing m's slices: a Put's answer, which no copy
// is needed for (a send answers with its cursor only).
func returned(m Message) Message {
	if len(m.Prev) == 0 {
		m.Prev = nil
	}
	if len(m.ReplyTo) == 0 {
		m.ReplyTo = nil
	}
	return m
}

func containsID(ids []protocol.ID, id protocol.ID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// End returns the cursor after the last message stored in space so far:
// reading after it returns only messages stored later. It is the zero
// Cursor (the start) when space has never held a message.
func (s *Store) End(space protocol.ID) (Cursor, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	seq, err := s.lastSeq(space)
	if err != nil {
		return 0, fmt.Errorf("store: end of %s: %w", space, err)
	}
	return Cursor(seq), nil
}
