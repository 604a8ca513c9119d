package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// The sent log: so that a sender can see its own direct messages after they
// were delivered, Delivered records each one (without its wire bytes) in a
// log in delivery order. The log is bounded: it keeps the last SentMax
// deliveries, and none older than SentMaxAge, whichever is fewer. Delivered
// trims the log as it adds to it; Sent skips entries past SentMaxAge that
// no delivery has trimmed yet.

// Sent-log bounds.
const (
	// SentMax is how many delivered messages the sent log keeps at most.
	SentMax = 1000
	// SentMaxAge is how long the sent log keeps a delivered message at most.
	SentMaxAge = 7 * 24 * time.Hour
	// sentTrimBatch bounds the entries one Delivered deletes from the log,
	// keeping its transaction small; each adds one, so the log still
	// shrinks back to its bound.
	sentTrimBatch = 64
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

func sentSeqMaxKey() []byte { return []byte{prefixSentSeqMax} }

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

// logSent adds o, just delivered, to the sent log in txn and trims the log
// to its bounds. n is the length of o's wire bytes, still stored.
func (s *Store) logSent(txn *badger.Txn, o *Outgoing, n int, now int64) error {
	kind := ""
	if raw, err := readOutgoingRaw(txn, o.ID, n, false); err == nil {
		if m, err := protocol.Decode(raw, protocol.StoredLimits()); err == nil {
			kind = m.Type
		}
	}
	seq := uint64(0)
	val, err := get(txn, sentSeqMaxKey())
	switch {
	case err == nil && len(val) == seqSize:
		seq = binary.BigEndian.Uint64(val)
	case err == nil:
		return fmt.Errorf("%w: sent-log seq has %d bytes", ErrCorrupt, len(val))
	case !errors.Is(err, ErrNotFound):
		return err
	}
	seq++
	m := SentMessage{ID: o.ID, To: o.To, Kind: kind, Created: o.Created, Delivered: now, Attempts: min(o.Attempts+1, maxAttempts)}
	if err := txn.Set(sentSeqMaxKey(), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return err
	}
	if err := txn.Set(sentKey(seq), encodeSent(&m)); err != nil {
		return err
	}
	// Trim from the oldest: entries beyond SentMax, or older than
	// SentMaxAge (or undecodable).
	cutoff := now - SentMaxAge.Milliseconds()
	var drop [][]byte
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte{prefixSent}
	it := txn.NewIterator(opts)
	for it.Rewind(); it.ValidForPrefix(opts.Prefix) && len(drop) < sentTrimBatch; it.Next() {
		item := it.Item()
		k := item.KeyCopy(nil)
		if len(k) != 1+seqSize {
			drop = append(drop, k)
			continue
		}
		if binary.BigEndian.Uint64(k[1:])+SentMax <= seq {
			drop = append(drop, k)
			continue
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			it.Close()
			return err
		}
		if e, err := decodeSent(v); err != nil || e.Delivered < cutoff {
			drop = append(drop, k)
			continue
		}
		break
	}
	it.Close()
	return deleteKeys(txn, drop)
}

// Sent returns up to limit (> 0) messages of the sent log after cursor, in
// the order they were delivered, and the cursor to pass next time (after
// itself when there is nothing new). Messages delivered more than
// SentMaxAge ago are left out.
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
	var out []SentMessage
	next := after
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefixSent}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(sentKey(uint64(after) + 1)); it.ValidForPrefix(opts.Prefix) && len(out) < limit; it.Next() {
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
