package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// The sent log: so that a sender can see its own direct messages after they
// were delivered, Delivered records each one (without its wire bytes) in a
// log in delivery order. The log is bounded: Sent lists the last SentMax
// deliveries, none older than SentMaxAge, whichever is fewer, and Sweep
// deletes the rest. Delivered only adds a key (its seq comes from a counter
// in memory, loaded at Open), so concurrent deliveries never conflict;
// seqs are allocated before commit, so a reader paging through the log
// while deliveries commit may miss one that commits after it read past its
// seq.

// Sent-log bounds.
const (
	// SentMax is how many delivered messages the sent log keeps at most.
	SentMax = 1000
	// SentMaxAge is how long the sent log keeps a delivered message at most.
	SentMaxAge = 7 * 24 * time.Hour
	// sentTrimBatch bounds the entries one transaction of the sweep
	// deletes from the log.
	sentTrimBatch = 256
)

// SentMessage is a delivered direct message in the sent log.
type SentMessage struct {
	ID   protocol.ID
	To   string // recipient peer ID as text
	Kind string // the message's type ("" if its wire bytes did not decode)
	// Created is when it was queued, Delivered when the recipient
	// acknowledged it (Unix ms).
	Created, Delivered int64
	// Attempts is the number of delivery attempts, the last one included.
	Attempts int
	// Cursor is its position in the log: reading after it continues with
	// the next.
	Cursor Cursor
}

func sentKey(seq uint64) []byte {
	b := make([]byte, 1+seqSize)
	b[0] = prefixSent
	binary.BigEndian.PutUint64(b[1:], seq)
	return b
}

// Sent-log record, version 1: version(1) | id(32) | created(8, BE) |
// delivered(8, BE) | uvarint attempts | uvarint len(to) | to | uvarint
// len(kind) | kind. The key holds the seq.
const sentVersion = 1

func encodeSent(m *SentMessage) []byte {
	b := make([]byte, 0, 1+protocol.IDSize+2*timeSize+3*binary.MaxVarintLen64+len(m.To)+len(m.Kind))
	b = append(b, sentVersion)
	b = append(b, m.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Created))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Delivered))
	b = binary.AppendUvarint(b, uint64(m.Attempts))
	b = appendString(b, m.To)
	return appendString(b, m.Kind)
}

func decodeSent(b []byte) (SentMessage, error) {
	var m SentMessage
	r := recordReader{b: b}
	r.version("sent", sentVersion)
	if r.err == nil {
		if len(r.b) < protocol.IDSize {
			r.fail("short id")
		} else {
			copy(m.ID[:], r.b[:protocol.IDSize])
			r.b = r.b[protocol.IDSize:]
		}
	}
	m.Created = int64(r.fixed())
	m.Delivered = int64(r.fixed())
	m.Attempts = int(r.uvarint("attempts", maxAttempts))
	m.To = r.string("recipient", MaxRecipientSize, true)
	m.Kind = r.string("kind", protocol.MaxWireSize, false)
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return m, r.err
}

// loadSentSeq sets the sent-log counter to the last seq stored (at Open).
func (s *Store) loadSentSeq() error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Reverse = true
		opts.Prefix = []byte{prefixSent}
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Seek(sentKey(math.MaxUint64))
		if !it.ValidForPrefix(opts.Prefix) {
			return nil
		}
		k := it.Item().Key()
		if len(k) != 1+seqSize {
			return fmt.Errorf("%w: sent-log key %x", ErrCorrupt, k)
		}
		s.sentSeq.Store(binary.BigEndian.Uint64(k[1:]))
		return nil
	})
}

// logSent adds o, just delivered, to the sent log in txn as entry seq. n
// is the length of o's wire bytes, still stored.
func logSent(txn *badger.Txn, o *Outgoing, n int, now int64, seq uint64) error {
	kind := ""
	if raw, err := readOutgoingRaw(txn, o.ID, n, false); err == nil {
		if m, err := protocol.Decode(raw, protocol.StoredLimits()); err == nil {
			kind = m.Type
		}
	}
	m := SentMessage{ID: o.ID, To: o.To, Kind: kind, Created: o.Created, Delivered: now, Attempts: min(o.Attempts+1, maxAttempts)}
	return txn.Set(sentKey(seq), encodeSent(&m))
}

// firstSentSeq returns the oldest seq Sent lists, by count.
func (s *Store) firstSentSeq() uint64 {
	last := s.sentSeq.Load()
	if last < SentMax {
		return 1
	}
	return last - SentMax + 1
}

// trimSent deletes the sent-log entries that Sent no longer lists: beyond
// the last SentMax, delivered before now-SentMaxAge, or undecodable.
func (s *Store) trimSent(ctx context.Context, now int64) error {
	cutoff := now - SentMaxAge.Milliseconds()
	for ctx.Err() == nil {
		first := s.firstSentSeq()
		var drop [][]byte
		done := false
		err := s.db.View(func(txn *badger.Txn) error {
			opts := badger.DefaultIteratorOptions
			opts.Prefix = []byte{prefixSent}
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Rewind(); ; it.Next() {
				if !it.ValidForPrefix(opts.Prefix) {
					done = true
					return nil
				}
				if len(drop) == sentTrimBatch {
					return nil
				}
				item := it.Item()
				k := item.KeyCopy(nil)
				if len(k) == 1+seqSize && binary.BigEndian.Uint64(k[1:]) >= first {
					v, err := item.ValueCopy(nil)
					if err != nil {
						return err
					}
					if e, err := decodeSent(v); err == nil && e.Delivered >= cutoff {
						done = true
						return nil
					}
				}
				drop = append(drop, k)
			}
		})
		if err != nil {
			return err
		}
		if len(drop) > 0 {
			if err := s.updateOutbox(func(txn *badger.Txn) error { return deleteKeys(txn, drop) }); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
	return ctx.Err()
}

// Sent returns up to limit (> 0) messages of the sent log after cursor, in
// the order they were delivered, and the cursor to pass next time (after
// itself when there is nothing new). It lists only the last SentMax
// delivered, and none delivered more than SentMaxAge ago.
func (s *Store) Sent(after Cursor, limit int) ([]SentMessage, Cursor, error) {
	if limit <= 0 {
		return nil, after, fmt.Errorf("store: sent: limit %d is not positive", limit)
	}
	if err := s.enter(); err != nil {
		return nil, after, err
	}
	defer s.leave()
	if after == Cursor(^uint64(0)) {
		return nil, after, nil
	}
	cutoff := s.nowMilli() - SentMaxAge.Milliseconds()
	from := max(uint64(after)+1, s.firstSentSeq())
	var out []SentMessage
	next := after
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefixSent}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(sentKey(from)); it.ValidForPrefix(opts.Prefix) && len(out) < limit; it.Next() {
			item := it.Item()
			k := item.Key()
			if len(k) != 1+seqSize {
				return fmt.Errorf("%w: sent-log key %x", ErrCorrupt, k)
			}
			seq := binary.BigEndian.Uint64(k[1:])
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			m, err := decodeSent(v)
			if err != nil {
				return fmt.Errorf("%w: sent-log entry %d: %v", ErrCorrupt, seq, err)
			}
			next = Cursor(seq)
			if m.Delivered < cutoff {
				continue
			}
			m.Cursor = Cursor(seq)
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, after, fmt.Errorf("store: sent: %w", err)
	}
	return out, next, nil
}
