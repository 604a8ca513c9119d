package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// The outbox keeps signed direct messages until they are delivered: a
// daemon enqueues a message, takes what is due, and records each attempt as
// delivered, failed (Retry, with the next time to try) or given up (Kill).
// A message that is given up becomes a dead letter, which its sender can
// read and delete. An ID is in the outbox or among the dead letters, never
// both: Kill moves it in one transaction. Every change is durable
// (fsync'd) before it returns, like Put, and concurrent changes share
// fsyncs. The outbox decides nothing: when to try again and when to give
// up are the caller's.

// Outbox bounds.
const (
	// MaxOutgoingSize is the largest Outgoing.Raw that Enqueue accepts: the
	// wire encoding of a message at the protocol's size limit
	// (protocol.DefaultLimits().MaxSize) with its framing and signature.
	MaxOutgoingSize = protocol.MaxWireSize
	// MaxRecipientSize is the longest Outgoing.To that Enqueue accepts (a
	// peer ID as text is about 52 bytes).
	MaxRecipientSize = 255
	// MaxReasonSize is the most bytes kept of Outgoing.LastError and
	// DeadLetter.Reason; the store cuts longer text at a UTF-8 boundary.
	MaxReasonSize = 1024
	// maxAttempts bounds Outgoing.Attempts.
	maxAttempts = math.MaxInt32
)

// Outgoing is a direct message waiting for delivery.
type Outgoing struct {
	ID  protocol.ID // the message's ID: the outbox's dedupe key
	To  string      // recipient peer ID as text, 1..MaxRecipientSize bytes
	Raw []byte      // the message's wire encoding, 1..MaxOutgoingSize bytes
	// Created is when the message was queued (Unix ms); Enqueue sets 0 to
	// the store's clock.
	Created int64
	// Deadline is when to stop trying (Unix ms): a message not delivered
	// by then is for Kill. 0 is no deadline.
	Deadline int64
	// Attempts is the number of failed attempts so far.
	Attempts int
	// NextTry is the earliest time of the next attempt (Unix ms); Due
	// returns the message from then on. Enqueue sets 0 to Created. The
	// store moves a NextTry past the Deadline back to the Deadline, so that
	// Due returns every message whose deadline has come.
	NextTry int64
	// LastError says why the last attempt failed; at most MaxReasonSize
	// bytes are kept.
	LastError string
}

// DeadLetter is a direct message that was given up (see Kill).
type DeadLetter struct {
	Outgoing
	Reason string // why it was given up; at most MaxReasonSize bytes are kept
	DeadAt int64  // when it was given up (Unix ms)
	// Cursor is the dead letter's position in the list: reading after it
	// continues with the next.
	Cursor Cursor
}

// ErrCorrupt reports a stored record that cannot be decoded. The outbox's
// methods return it as a *CorruptError when they know the entry.
var ErrCorrupt = errors.New("store: corrupt record")

// CorruptError reports an outbox entry or dead letter whose stored record
// or index is corrupt. Delivered removes a corrupt outbox entry and
// DeleteDeadLetter a corrupt dead letter, so one bad entry cannot block
// the rest.
type CorruptError struct {
	ID   protocol.ID
	Dead bool  // a dead letter, not an outbox entry
	Err  error // what is wrong
}

func (e *CorruptError) Error() string {
	what := "outbox entry"
	if e.Dead {
		what = "dead letter"
	}
	return fmt.Sprintf("%s %s: corrupt record: %v", what, e.ID, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func (e *CorruptError) Unwrap() error { return e.Err }

// Enqueue adds o to the outbox, durably, and reports whether it was added:
// a message already in the outbox or among the dead letters (same ID) is
// not added again, and Enqueue returns false and no error. A delivered
// message is no longer known and would be added again.
func (s *Store) Enqueue(o Outgoing) (added bool, err error) {
	if err := checkOutgoing(&o); err != nil {
		return false, fmt.Errorf("store: enqueue %s: %w", o.ID, err)
	}
	if err := s.enter(); err != nil {
		return false, err
	}
	defer s.leave()
	if o.Created == 0 {
		o.Created = s.nowMilli()
	}
	if o.NextTry == 0 {
		o.NextTry = o.Created
	}
	o.NextTry = clampNextTry(o.NextTry, o.Deadline)
	o.LastError = truncateUTF8(o.LastError, MaxReasonSize)
	err = s.updateOutbox(func(txn *badger.Txn) error {
		added = false
		for _, key := range [][]byte{outboxKey(o.ID), deadKey(o.ID)} {
			switch _, err := txn.Get(key); {
			case err == nil:
				return nil // queued or dead already
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
		}
		if err := setOutgoing(txn, &o, len(o.Raw)); err != nil {
			return err
		}
		for i, chunk := range chunks(o.Raw) {
			if err := txn.Set(outboxRawKey(o.ID, i), chunk); err != nil {
				return err
			}
		}
		added = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: enqueue %s: %w", o.ID, err)
	}
	return added, nil
}

// checkOutgoing checks what Enqueue refuses.
func checkOutgoing(o *Outgoing) error {
	switch {
	case o.ID.IsZero():
		return errors.New("zero message id")
	case o.To == "":
		return errors.New("no recipient")
	case len(o.To) > MaxRecipientSize:
		return fmt.Errorf("recipient of %d bytes exceeds %d", len(o.To), MaxRecipientSize)
	case len(o.Raw) == 0:
		return errors.New("no wire bytes")
	case len(o.Raw) > MaxOutgoingSize:
		return fmt.Errorf("%d wire bytes exceed %d", len(o.Raw), MaxOutgoingSize)
	case o.Attempts < 0 || o.Attempts > maxAttempts:
		return fmt.Errorf("attempts %d outside 0..%d", o.Attempts, maxAttempts)
	}
	return nil
}

// clampNextTry returns next, or deadline if that is earlier.
func clampNextTry(next, deadline int64) int64 {
	if deadline != 0 && next > deadline {
		return deadline
	}
	return next
}

// truncateUTF8 returns s cut to at most n bytes, not inside a UTF-8
// sequence.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Pending returns up to limit (> 0) messages in the outbox for recipient
// to, or for every recipient if to is "", in next-try order (NextTry, then
// ID bytes).
func (s *Store) Pending(to string, limit int) ([]Outgoing, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("store: pending: limit %d is not positive", limit)
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if len(to) > MaxRecipientSize {
		return nil, nil // nothing can be queued for it
	}
	prefix := []byte{prefixOutboxDue}
	if to != "" {
		prefix = recipientPrefix(to)
	}
	out, err := s.scanOutbox(prefix, to, math.MaxInt64, limit)
	if err != nil {
		return nil, fmt.Errorf("store: pending: %w", err)
	}
	return out, nil
}

// Due returns up to limit (> 0) messages in the outbox whose NextTry is at
// most now, in next-try order (NextTry, then ID bytes). Its cost does not
// depend on how many messages are not due.
func (s *Store) Due(now int64, limit int) ([]Outgoing, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("store: due: limit %d is not positive", limit)
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	out, err := s.scanOutbox([]byte{prefixOutboxDue}, "", now, limit)
	if err != nil {
		return nil, fmt.Errorf("store: due: %w", err)
	}
	return out, nil
}

// scanOutbox reads up to limit outbox entries from the index under prefix
// (due, or the recipient index of to), in key order, as long as their
// NextTry is at most until.
func (s *Store) scanOutbox(prefix []byte, to string, until int64, limit int) ([]Outgoing, error) {
	var out []Outgoing
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix) && len(out) < limit; it.Next() {
			k := it.Item().Key()
			next, id, ok := nextTryKeyParts(k, len(prefix))
			if !ok {
				return fmt.Errorf("%w: outbox index key %x", ErrCorrupt, k)
			}
			if next > until {
				return nil
			}
			o, n, err := getOutgoing(txn, id)
			if errors.Is(err, ErrNotFound) {
				err = &CorruptError{ID: id, Err: fmt.Errorf("indexed at %d but not stored", next)}
			}
			if err != nil {
				return err
			}
			if o.NextTry != next || (to != "" && o.To != to) {
				return &CorruptError{ID: id, Err: fmt.Errorf(
					"indexed for %q at %d, stored for %q at %d", to, next, o.To, o.NextTry)}
			}
			if o.Raw, err = readOutgoingRaw(txn, id, n, false); err != nil {
				return err
			}
			out = append(out, o)
		}
		return nil
	})
	return out, err
}

// Retry records a failed attempt at delivering message id: its attempt
// count, the earliest next attempt (moved back to the deadline if past it)
// and the error. It returns an error wrapping ErrNotFound if id is not in
// the outbox (delivered or given up meanwhile).
func (s *Store) Retry(id protocol.ID, attempts int, next int64, lastErr string) error {
	if attempts < 0 || attempts > maxAttempts {
		return fmt.Errorf("store: retry %s: attempts %d outside 0..%d", id, attempts, maxAttempts)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	lastErr = truncateUTF8(lastErr, MaxReasonSize)
	err := s.updateOutbox(func(txn *badger.Txn) error {
		o, n, err := getOutgoing(txn, id)
		if err != nil {
			return err
		}
		if err := deleteOutgoingIndex(txn, &o); err != nil {
			return err
		}
		o.Attempts, o.NextTry, o.LastError = attempts, clampNextTry(next, o.Deadline), lastErr
		return setOutgoing(txn, &o, n)
	})
	if err != nil {
		return fmt.Errorf("store: retry %s: %w", id, err)
	}
	return nil
}

// Delivered removes message id from the outbox and adds it to the sent
// log (see Sent), in one transaction. A message not in the outbox
// (delivered already, given up, never queued) is no error. A corrupt entry
// is removed too.
func (s *Store) Delivered(id protocol.ID) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	now := s.nowMilli()
	var seq uint64 // the sent-log entry's, allocated once
	err := s.updateOutbox(func(txn *badger.Txn) error {
		o, n, err := getOutgoing(txn, id)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case errors.Is(err, ErrCorrupt):
			return deleteCorruptOutgoing(txn, id)
		case err != nil:
			return err
		}
		if err := txn.Delete(outboxKey(id)); err != nil {
			return err
		}
		if err := deleteOutgoingIndex(txn, &o); err != nil {
			return err
		}
		if seq == 0 {
			seq = s.sentSeq.Add(1)
		}
		if err := logSent(txn, &o, n, now, seq); err != nil {
			return err
		}
		return deleteOutgoingRaw(txn, id, n)
	})
	if err != nil {
		return fmt.Errorf("store: delivered %s: %w", id, err)
	}
	return nil
}

// Kill gives message id up: it leaves the outbox and becomes the last dead
// letter, with reason and the time at (Unix ms; 0 is the store's clock),
// in one transaction. It returns an error wrapping ErrNotFound if id is
// not in the outbox.
func (s *Store) Kill(id protocol.ID, reason string, at int64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if at == 0 {
		at = s.nowMilli()
	}
	reason = truncateUTF8(reason, MaxReasonSize)
	// Reading and writing the seq key orders Kills: of two concurrent ones
	// the second to commit conflicts and tries again with the next seq, so
	// seq order is commit order and a reader past a cursor misses nothing.
	err := s.updateOutbox(func(txn *badger.Txn) error {
		o, n, err := getOutgoing(txn, id)
		if err != nil {
			return err
		}
		seq, err := readDeadSeqMax(txn)
		if err != nil {
			return err
		}
		seq++
		d := DeadLetter{Outgoing: o, Reason: reason, DeadAt: at, Cursor: Cursor(seq)}
		sets := []struct{ k, v []byte }{
			{deadSeqMaxKey(), binary.BigEndian.AppendUint64(nil, seq)},
			{deadKey(id), encodeDeadLetter(&d, n)},
			{deadOrderKey(seq), id[:]},
		}
		for _, kv := range sets {
			if err := txn.Set(kv.k, kv.v); err != nil {
				return err
			}
		}
		if err := txn.Delete(outboxKey(id)); err != nil {
			return err
		}
		return deleteOutgoingIndex(txn, &o)
	})
	if err != nil {
		return fmt.Errorf("store: kill %s: %w", id, err)
	}
	return nil
}

// readDeadSeqMax returns the last dead-letter seq allocated, or 0.
func readDeadSeqMax(txn *badger.Txn) (uint64, error) {
	val, err := get(txn, deadSeqMaxKey())
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(val) != seqSize:
		return 0, fmt.Errorf("%w: dead-letter seq has %d bytes", ErrCorrupt, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// DeadLetters returns up to limit (> 0) dead letters after cursor, in the
// order they died, and the cursor to pass next time (after itself when
// there is nothing new). Its cost does not depend on how many dead letters
// there are, only on how many it returns.
func (s *Store) DeadLetters(after Cursor, limit int) ([]DeadLetter, Cursor, error) {
	if limit <= 0 {
		return nil, after, fmt.Errorf("store: dead letters: limit %d is not positive", limit)
	}
	if err := s.enter(); err != nil {
		return nil, after, err
	}
	defer s.leave()
	if after == Cursor(^uint64(0)) {
		return nil, after, nil
	}
	var out []DeadLetter
	next := after
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false // values are 32-byte ids, read inline
		opts.Prefix = []byte{prefixDeadOrder}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(deadOrderKey(uint64(after) + 1)); it.ValidForPrefix(opts.Prefix) && len(out) < limit; it.Next() {
			item := it.Item()
			seq, ok := deadOrderKeySeq(item.Key())
			if !ok {
				return fmt.Errorf("%w: dead-letter order key %x", ErrCorrupt, item.Key())
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) != protocol.IDSize {
				return fmt.Errorf("%w: dead letter %d: id has %d bytes", ErrCorrupt, seq, len(v))
			}
			id := protocol.ID(v)
			d, err := getDeadLetter(txn, id)
			if errors.Is(err, ErrNotFound) {
				err = &CorruptError{ID: id, Dead: true, Err: fmt.Errorf("listed at %d but not stored", seq)}
			}
			if err != nil {
				return err
			}
			if d.Cursor != Cursor(seq) {
				return &CorruptError{ID: id, Dead: true, Err: fmt.Errorf("listed at %d, stored at %d", seq, d.Cursor)}
			}
			out = append(out, d)
			next = d.Cursor
		}
		return nil
	})
	if err != nil {
		return nil, after, fmt.Errorf("store: dead letters: %w", err)
	}
	return out, next, nil
}

// getDeadLetter reads dead letter id with its wire bytes in txn.
func getDeadLetter(txn *badger.Txn, id protocol.ID) (DeadLetter, error) {
	val, err := get(txn, deadKey(id))
	if err != nil {
		return DeadLetter{}, err
	}
	d, n, err := decodeDeadLetter(val)
	if err != nil {
		return DeadLetter{}, &CorruptError{ID: id, Dead: true, Err: err}
	}
	d.ID = id
	if d.Raw, err = readOutgoingRaw(txn, id, n, true); err != nil {
		return DeadLetter{}, err
	}
	return d, nil
}

// DeleteDeadLetter deletes dead letter id, corrupt or not. It returns an
// error wrapping ErrNotFound if there is none.
func (s *Store) DeleteDeadLetter(id protocol.ID) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	err := s.updateOutbox(func(txn *badger.Txn) error {
		val, err := get(txn, deadKey(id))
		if err != nil {
			return err
		}
		if err := txn.Delete(deadKey(id)); err != nil {
			return err
		}
		d, n, err := decodeDeadLetter(val)
		if err != nil {
			return deleteCorruptDeadLetter(txn, id)
		}
		listed, err := get(txn, deadOrderKey(uint64(d.Cursor)))
		switch {
		case errors.Is(err, ErrNotFound) || (err == nil && string(listed) != string(id[:])):
			return deleteCorruptDeadLetter(txn, id) // listed elsewhere
		case err != nil:
			return err
		}
		if err := txn.Delete(deadOrderKey(uint64(d.Cursor))); err != nil {
			return err
		}
		return deleteOutgoingRaw(txn, id, n)
	})
	if err != nil {
		return fmt.Errorf("store: delete dead letter %s: %w", id, err)
	}
	return nil
}

// OutboxLen returns the number of messages in the outbox. It counts keys
// (without reading values), so its cost grows with the outbox.
func (s *Store) OutboxLen() (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	n, err := s.countKeys(prefixOutbox)
	if err != nil {
		return 0, fmt.Errorf("store: outbox len: %w", err)
	}
	return n, nil
}

// countKeys counts the keys under a one-byte prefix without reading their
// values.
func (s *Store) countKeys(prefix byte) (int, error) {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{prefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// maxOutboxTries bounds the transactions one outbox change tries. A try
// fails only if another change to the same entry (or, for Kill, any other
// Kill) commits between its reads and its commit, and each retry reads
// afresh, so every failed try is another change's success: the bound is
// reached only under that much contention for one entry.
const maxOutboxTries = 1000

// updateOutbox runs fn in a write transaction, again while it conflicts
// with a concurrent one, and returns once it is on disk. fn must do the
// same on every try.
func (s *Store) updateOutbox(fn func(txn *badger.Txn) error) error {
	for range maxOutboxTries {
		s.compact.wake()
		err := s.db.Update(fn)
		if errors.Is(err, badger.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		return s.syncer.wait()
	}
	return fmt.Errorf("gave up after %d conflicts", maxOutboxTries)
}

// getOutgoing reads outbox entry id's record in txn, returning it with Raw
// nil and the length of its wire bytes.
func getOutgoing(txn *badger.Txn, id protocol.ID) (Outgoing, int, error) {
	val, err := get(txn, outboxKey(id))
	if err != nil {
		return Outgoing{}, 0, err
	}
	o, n, err := decodeOutgoing(val)
	if err != nil {
		return Outgoing{}, 0, &CorruptError{ID: id, Err: err}
	}
	o.ID = id
	return o, n, nil
}

// setOutgoing writes o's record, with n bytes of wire bytes, and its index
// keys.
func setOutgoing(txn *badger.Txn, o *Outgoing, n int) error {
	if err := txn.Set(outboxKey(o.ID), encodeOutgoing(o, n)); err != nil {
		return err
	}
	if err := txn.Set(dueKey(o.NextTry, o.ID), nil); err != nil {
		return err
	}
	return txn.Set(recipientKey(o.To, o.NextTry, o.ID), nil)
}

// deleteOutgoingIndex deletes o's index keys.
func deleteOutgoingIndex(txn *badger.Txn, o *Outgoing) error {
	if err := txn.Delete(dueKey(o.NextTry, o.ID)); err != nil {
		return err
	}
	return txn.Delete(recipientKey(o.To, o.NextTry, o.ID))
}

// deleteOutgoingRaw deletes the n wire bytes of message id.
func deleteOutgoingRaw(txn *badger.Txn, id protocol.ID, n int) error {
	for i := range rawChunks(n) {
		if err := txn.Delete(outboxRawKey(id, i)); err != nil {
			return err
		}
	}
	return nil
}

// rawChunks returns the number of chunks holding n wire bytes.
func rawChunks(n int) int { return (n + dataChunkSize - 1) / dataChunkSize }

// readOutgoingRaw reads the n wire bytes of message id in txn.
func readOutgoingRaw(txn *badger.Txn, id protocol.ID, n int, dead bool) ([]byte, error) {
	raw := make([]byte, 0, n)
	for i := range rawChunks(n) {
		chunk, err := get(txn, outboxRawKey(id, i))
		if errors.Is(err, ErrNotFound) {
			return nil, &CorruptError{ID: id, Dead: dead, Err: fmt.Errorf("wire bytes chunk %d is missing", i)}
		}
		if err != nil {
			return nil, fmt.Errorf("message %s: wire bytes chunk %d: %w", id, i, err)
		}
		raw = append(raw, chunk...)
	}
	if len(raw) != n {
		return nil, &CorruptError{ID: id, Dead: dead, Err: fmt.Errorf("%d wire bytes stored, record says %d", len(raw), n)}
	}
	return raw, nil
}

// deleteCorruptOutgoing deletes outbox entry id, whose record cannot be
// read: its record, every index key naming it (found by scanning the due
// index, which is slow but only for corrupt entries) and its wire bytes.
func deleteCorruptOutgoing(txn *badger.Txn, id protocol.ID) error {
	keys := [][]byte{outboxKey(id)}
	keys = append(keys, keysEndingWith(txn, []byte{prefixOutboxDue}, id[:])...)
	keys = append(keys, keysEndingWith(txn, []byte{prefixOutboxTo}, id[:])...)
	keys = append(keys, keysEndingWith(txn, idKey(prefixOutboxRaw, id), nil)...)
	return deleteKeys(txn, keys)
}

// deleteCorruptDeadLetter deletes what is left of dead letter id, whose
// record cannot be read or is listed at another place than it says: the
// order keys naming it (found by scanning the list, which is slow but only
// for corrupt entries) and its wire bytes.
func deleteCorruptDeadLetter(txn *badger.Txn, id protocol.ID) error {
	var keys [][]byte
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte{prefixDeadOrder}
	it := txn.NewIterator(opts)
	for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			it.Close()
			return err
		}
		if string(v) == string(id[:]) {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
	}
	it.Close()
	keys = append(keys, keysEndingWith(txn, idKey(prefixOutboxRaw, id), nil)...)
	return deleteKeys(txn, keys)
}

// keysEndingWith returns the keys under prefix that end with suffix.
func keysEndingWith(txn *badger.Txn, prefix, suffix []byte) [][]byte {
	var keys [][]byte
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
		k := it.Item().Key()
		if len(k) >= len(suffix) && string(k[len(k)-len(suffix):]) == string(suffix) {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
	}
	return keys
}

func deleteKeys(txn *badger.Txn, keys [][]byte) error {
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Outbox record, version 1: version(1) | created(8, BE, two's complement) |
// deadline(8, same) | next try(8, same) | uvarint attempts | uvarint len(to)
// | to | uvarint len(last error) | last error | uvarint len(raw). The wire
// bytes are kept under the w keys.
//
// Dead-letter record, version 1: version(1) | seq(8, BE) | dead at(8, BE,
// two's complement) | uvarint len(reason) | reason | the outbox record the
// message had.
const (
	outgoingVersion   = 1
	deadLetterVersion = 1
	outgoingFixedSize = 1 + 3*timeSize
)

func encodeOutgoing(o *Outgoing, rawLen int) []byte {
	return appendOutgoing(make([]byte, 0, outgoingFixedSize+4*binary.MaxVarintLen64+len(o.To)+len(o.LastError)), o, rawLen)
}

func appendOutgoing(b []byte, o *Outgoing, rawLen int) []byte {
	b = append(b, outgoingVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Created))
	b = binary.BigEndian.AppendUint64(b, uint64(o.Deadline))
	b = binary.BigEndian.AppendUint64(b, uint64(o.NextTry))
	b = binary.AppendUvarint(b, uint64(o.Attempts))
	b = appendString(b, o.To)
	b = appendString(b, o.LastError)
	return binary.AppendUvarint(b, uint64(rawLen))
}

func encodeDeadLetter(d *DeadLetter, rawLen int) []byte {
	b := make([]byte, 0, 1+seqSize+timeSize+binary.MaxVarintLen64+len(d.Reason)+
		outgoingFixedSize+4*binary.MaxVarintLen64+len(d.To)+len(d.LastError))
	b = append(b, deadLetterVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(d.Cursor))
	b = binary.BigEndian.AppendUint64(b, uint64(d.DeadAt))
	b = appendString(b, d.Reason)
	return appendOutgoing(b, &d.Outgoing, rawLen)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeOutgoing decodes an outbox record, returning it with ID zero, Raw
// nil and the length of its wire bytes.
func decodeOutgoing(b []byte) (Outgoing, int, error) {
	r := recordReader{b: b}
	o, n := r.outgoing()
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return Outgoing{}, 0, r.err
	}
	return o, n, nil
}

// decodeDeadLetter decodes a dead-letter record, returning it with ID zero,
// Raw nil and the length of its wire bytes.
func decodeDeadLetter(b []byte) (DeadLetter, int, error) {
	r := recordReader{b: b}
	var d DeadLetter
	r.version("dead-letter", deadLetterVersion)
	d.Cursor = Cursor(r.fixed())
	d.DeadAt = int64(r.fixed())
	d.Reason = r.string("reason", MaxReasonSize, false)
	o, n := r.outgoing()
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err == nil && d.Cursor == 0 {
		r.fail("seq 0")
	}
	if r.err != nil {
		return DeadLetter{}, 0, r.err
	}
	d.Outgoing = o
	return d, n, nil
}

// recordReader reads the fields of an outbox or dead-letter record,
// keeping the first error; after one, every read returns zero.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *recordReader) version(what string, want byte) {
	switch {
	case r.err != nil:
	case len(r.b) == 0:
		r.fail("empty %s record", what)
	case r.b[0] != want:
		r.fail("%s record version %d, want %d", what, r.b[0], want)
	default:
		r.b = r.b[1:]
	}
}

func (r *recordReader) fixed() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail("truncated at %d bytes", len(r.b))
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *recordReader) uvarint(what string, limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, w := binary.Uvarint(r.b)
	switch {
	case w <= 0:
		r.fail("%s: bad varint", what)
		return 0
	case v > limit:
		r.fail("%s: %d exceeds %d", what, v, limit)
		return 0
	}
	r.b = r.b[w:]
	return v
}

func (r *recordReader) string(what string, limit int, required bool) string {
	n := int(r.uvarint(what+" length", uint64(limit)))
	switch {
	case r.err != nil:
		return ""
	case n > len(r.b):
		r.fail("%s: length %d, %d bytes left", what, n, len(r.b))
		return ""
	case n == 0 && required:
		r.fail("%s: empty", what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// outgoing reads an outbox record (Raw nil) and the length of its wire
// bytes.
func (r *recordReader) outgoing() (Outgoing, int) {
	var o Outgoing
	r.version("outbox", outgoingVersion)
	o.Created = int64(r.fixed())
	o.Deadline = int64(r.fixed())
	o.NextTry = int64(r.fixed())
	o.Attempts = int(r.uvarint("attempts", maxAttempts))
	o.To = r.string("recipient", MaxRecipientSize, true)
	o.LastError = r.string("last error", MaxReasonSize, false)
	n := int(r.uvarint("wire length", MaxOutgoingSize))
	if r.err == nil && n == 0 {
		r.fail("no wire bytes")
	}
	return o, n
}
