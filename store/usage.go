package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// Usage accounting: what each space, and each sender within a space, holds
// in the store, so that quotas (PutWithin) bound the disk a flooder can
// fill and survive restarts.
//
// The counters live on disk beside the messages (keys b and f, see
// keys.go), written in the same transaction as the message they count:
// Put adds, deletes (Sweep: expiry and retention) subtract. A write does
// not read the counter in its transaction (concurrent Puts of a space
// would all conflict on it); the value written is computed from the
// in-memory book below under commitMu, which orders commits, so each
// commit writes the total of every Put committed or committing before it,
// itself included. A Put whose commit then fails takes its share back from
// the book; if other Puts committed meanwhile, their totals on disk
// include it until the next write of the same counter. Should the process
// stop in that window, the counter overstates what is held by at most
// those failed Puts' bytes: a quota errs on the safe side.

// Usage is what a space, or one sender in a space, holds: the wire bytes
// (Message.Raw) and the number of its messages. The keys and indexes
// beside them are not counted.
type Usage struct {
	Bytes int64
	Count int64
}

// SenderUsage is what one sender holds in a space, and since when.
type SenderUsage struct {
	Usage
	// Since is when (the store's clock, Unix ms) the sender's oldest
	// message still held was stored here (zero when it holds none): a
	// sender that has held messages for a while is not new to this node.
	// It is the store's time, not the message's created_at, which the
	// sender chooses.
	Since int64
}

// Quota bounds what PutWithin stores: the bytes of a space, and of each
// sender in a space (Message.From). Zero fields are no bound.
type Quota struct {
	SpaceBytes  int64
	SenderBytes int64
}

// ErrQuota reports a message that would take a space or a sender in it
// over its Quota; it was not stored. The error it wraps says which.
var ErrQuota = errors.New("store: quota exceeded")

// maxCachedSenders bounds the senders of one space whose counters are
// kept in memory; beyond it, idle ones are dropped and read again from
// disk when next needed.
const maxCachedSenders = 4096

// usageBook is the in-memory copy of the counters, loaded from disk on
// first use. It includes the Puts in flight.
type usageBook struct {
	mu     sync.Mutex
	spaces map[protocol.ID]*spaceBook
}

type spaceBook struct {
	total   Usage
	senders map[string]*senderBook
}

type senderBook struct {
	SenderUsage
	inflight int // Puts charged and not yet settled: not to be evicted
}

// charge is one Put's share of the book, to settle or undo.
type charge struct {
	space protocol.ID
	from  string
	size  int64
}

func newUsageBook() *usageBook { return &usageBook{spaces: make(map[protocol.ID]*spaceBook)} }

// spaceLocked returns space's book, read from disk if needed. b.mu held.
func (b *usageBook) spaceLocked(db *badger.DB, space protocol.ID) (*spaceBook, error) {
	if sb, ok := b.spaces[space]; ok {
		return sb, nil
	}
	sb := &spaceBook{senders: make(map[string]*senderBook)}
	err := db.View(func(txn *badger.Txn) error {
		val, err := get(txn, usageKey(space))
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		sb.total, err = decodeUsage(val)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("usage of %s: %w", space, err)
	}
	b.spaces[space] = sb
	return sb, nil
}

// senderLocked returns from's book in space, read from disk if needed.
// b.mu held.
func (b *usageBook) senderLocked(db *badger.DB, sb *spaceBook, space protocol.ID, from string) (*senderBook, error) {
	if u, ok := sb.senders[from]; ok {
		return u, nil
	}
	u := &senderBook{}
	err := db.View(func(txn *badger.Txn) error {
		val, err := get(txn, senderUsageKey(space, from))
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		u.SenderUsage, err = decodeSenderUsage(val)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("usage of %s in %s: %w", from, space, err)
	}
	if len(sb.senders) >= maxCachedSenders {
		for k, v := range sb.senders {
			if v.inflight == 0 {
				delete(sb.senders, k)
			}
		}
	}
	sb.senders[from] = u
	return u, nil
}

// chargeLocked checks m against q, adds it to the book and writes the new
// totals into txn. commitMu must be held, and the caller must settle or
// undo the charge once the transaction has committed or failed.
func (s *Store) chargeLocked(txn *badger.Txn, m Message, q Quota) (charge, error) {
	c, err := s.chargeBookLocked(m, q)
	if err != nil {
		return charge{}, err
	}
	if err := s.writeUsageLocked(txn, []charge{c}); err != nil {
		s.undo(c)
		return charge{}, err
	}
	return c, nil
}

// chargeBookLocked is chargeLocked without the write: the caller writes
// the counters its charges touched once they are all made (see
// writeUsageLocked), as a batch does. commitMu must be held.
func (s *Store) chargeBookLocked(m Message, q Quota) (charge, error) {
	b := s.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	size := int64(len(m.Raw))
	sb, err := b.spaceLocked(s.db, m.Space)
	if err != nil {
		return charge{}, err
	}
	u, err := b.senderLocked(s.db, sb, m.Space, m.From)
	if err != nil {
		return charge{}, err
	}
	if q.SpaceBytes > 0 && sb.total.Bytes+size > q.SpaceBytes {
		return charge{}, fmt.Errorf("%w: the space holds %d bytes, %d more would pass its quota of %d", ErrQuota, sb.total.Bytes, size, q.SpaceBytes)
	}
	if q.SenderBytes > 0 && u.Bytes+size > q.SenderBytes {
		return charge{}, fmt.Errorf("%w: the space holds %d bytes from %s, %d more would pass the quota of %d per sender", ErrQuota, u.Bytes, senderName(m.From), size, q.SenderBytes)
	}
	sb.total = Usage{Bytes: sb.total.Bytes + size, Count: sb.total.Count + 1}
	u.Bytes += size
	u.Count++
	if u.Since == 0 {
		u.Since = s.nowMilli()
	}
	u.inflight++
	return charge{space: m.Space, from: m.From, size: size}, nil
}

// writeUsageLocked writes into txn the book's totals of each space and
// sender that cs charged, once each: with commitMu held since the charges
// were made, they are the totals of every Put committed or committing
// before txn, its own charges included (a batch of a thousand messages of
// one space wrote its counter a thousand times, one Set each).
func (s *Store) writeUsageLocked(txn *badger.Txn, cs []charge) error {
	b := s.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	spaces := make(map[protocol.ID]struct{}, 1)
	senders := make(map[senderRef]struct{})
	for _, c := range cs {
		k := senderRef{c.space, c.from}
		if _, ok := senders[k]; ok {
			continue
		}
		senders[k] = struct{}{}
		sb, ok := b.spaces[c.space]
		if !ok {
			return fmt.Errorf("usage of %s: not in the book", c.space)
		}
		if _, ok := spaces[c.space]; !ok {
			spaces[c.space] = struct{}{}
			if err := txn.Set(usageKey(c.space), encodeUsage(sb.total)); err != nil {
				return err
			}
		}
		u, ok := sb.senders[c.from]
		if !ok {
			return fmt.Errorf("usage of %s in %s: not in the book", senderName(c.from), c.space)
		}
		if err := txn.Set(senderUsageKey(c.space, c.from), encodeSenderUsage(u.SenderUsage)); err != nil {
			return err
		}
	}
	return nil
}

// settle ends a charge whose transaction committed.
func (s *Store) settle(c charge) {
	b := s.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	if sb, ok := b.spaces[c.space]; ok {
		if u, ok := sb.senders[c.from]; ok {
			u.inflight--
		}
	}
}

// undo takes back a charge whose transaction failed.
func (s *Store) undo(c charge) {
	b := s.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	sb, ok := b.spaces[c.space]
	if !ok {
		return
	}
	sb.total.Bytes -= c.size
	sb.total.Count--
	if u, ok := sb.senders[c.from]; ok {
		u.inflight--
		u.Bytes -= c.size
		u.Count--
		if u.Count <= 0 {
			u.SenderUsage = SenderUsage{}
		}
	}
}

// usageDelta is what a delete transaction removes from the counters.
type usageDelta struct {
	spaces  map[protocol.ID]Usage
	senders map[senderRef]Usage
}

type senderRef struct {
	space protocol.ID
	from  string
}

func (d *usageDelta) add(space protocol.ID, from string, size int64) {
	if d.spaces == nil {
		d.spaces = make(map[protocol.ID]Usage)
		d.senders = make(map[senderRef]Usage)
	}
	u := d.spaces[space]
	d.spaces[space] = Usage{Bytes: u.Bytes + size, Count: u.Count + 1}
	k := senderRef{space, from}
	u = d.senders[k]
	d.senders[k] = Usage{Bytes: u.Bytes + size, Count: u.Count + 1}
}

// usageAfter holds the totals a delete transaction wrote, to apply to the
// book once it has committed.
type usageAfter struct {
	spaces  map[protocol.ID]Usage
	senders map[senderRef]SenderUsage
}

// writeDeltaLocked writes into txn the counters less d. mutateMu must be
// held exclusively: no Put is in flight, so the book is what is on disk.
func (s *Store) writeDeltaLocked(txn *badger.Txn, d usageDelta) (usageAfter, error) {
	b := s.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	after := usageAfter{spaces: make(map[protocol.ID]Usage), senders: make(map[senderRef]SenderUsage)}
	for space, du := range d.spaces {
		sb, err := b.spaceLocked(s.db, space)
		if err != nil {
			return after, err
		}
		t := Usage{Bytes: max(sb.total.Bytes-du.Bytes, 0), Count: max(sb.total.Count-du.Count, 0)}
		if t.Count == 0 {
			t = Usage{}
			err = txn.Delete(usageKey(space))
		} else {
			err = txn.Set(usageKey(space), encodeUsage(t))
		}
		if err != nil {
			return after, err
		}
		after.spaces[space] = t
	}
	for k, du := range d.senders {
		sb, err := b.spaceLocked(s.db, k.space)
		if err != nil {
			return after, err
		}
		u, err := b.senderLocked(s.db, sb, k.space, k.from)
		if err != nil {
			return after, err
		}
		su := u.SenderUsage
		su.Bytes, su.Count = max(su.Bytes-du.Bytes, 0), max(su.Count-du.Count, 0)
		if su.Count == 0 {
			su = SenderUsage{}
			err = txn.Delete(senderUsageKey(k.space, k.from))
		} else {
			err = txn.Set(senderUsageKey(k.space, k.from), encodeSenderUsage(su))
		}
		if err != nil {
			return after, err
		}
		after.senders[k] = su
	}
	return after, nil
}

// applyUsage puts the totals of a committed delete into the book.
func (s *Store) applyUsage(a usageAfter) {
	b := s.usage
	b.mu.Lock()
	defer b.mu.Unlock()
	for space, t := range a.spaces {
		if sb, ok := b.spaces[space]; ok {
			sb.total = t
		}
	}
	for k, su := range a.senders {
		sb, ok := b.spaces[k.space]
		if !ok {
			continue
		}
		if u, ok := sb.senders[k.from]; ok {
			if su.Count == 0 && u.inflight == 0 {
				delete(sb.senders, k.from)
				continue
			}
			u.SenderUsage = su
		}
	}
}

// Usage returns what space holds (zero for a space that holds nothing).
func (s *Store) Usage(space protocol.ID) (Usage, error) {
	if err := s.enter(); err != nil {
		return Usage{}, err
	}
	defer s.leave()
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	sb, err := s.usage.spaceLocked(s.db, space)
	if err != nil {
		return Usage{}, fmt.Errorf("store: %w", err)
	}
	return sb.total, nil
}

// SenderUsage returns what from holds in space (zero if nothing). It
// counts the Puts in flight.
func (s *Store) SenderUsage(space protocol.ID, from string) (SenderUsage, error) {
	if err := s.enter(); err != nil {
		return SenderUsage{}, err
	}
	defer s.leave()
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	sb, err := s.usage.spaceLocked(s.db, space)
	if err != nil {
		return SenderUsage{}, fmt.Errorf("store: %w", err)
	}
	if u, ok := sb.senders[from]; ok {
		return u.SenderUsage, nil
	}
	// Not cached: read it without caching, so that asking about many
	// senders (strangers) costs no memory.
	var su SenderUsage
	err = s.db.View(func(txn *badger.Txn) error {
		val, err := get(txn, senderUsageKey(space, from))
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		su, err = decodeSenderUsage(val)
		return err
	})
	if err != nil {
		return SenderUsage{}, fmt.Errorf("store: usage of %s in %s: %w", from, space, err)
	}
	return su, nil
}

func senderName(from string) string {
	if from == "" {
		return "an unnamed sender"
	}
	return from
}

func encodeUsage(u Usage) []byte {
	b := make([]byte, 0, 16)
	b = binary.BigEndian.AppendUint64(b, uint64(u.Bytes))
	return binary.BigEndian.AppendUint64(b, uint64(u.Count))
}

func decodeUsage(b []byte) (Usage, error) {
	if len(b) != 16 {
		return Usage{}, fmt.Errorf("usage record of %d bytes", len(b))
	}
	return Usage{Bytes: int64(binary.BigEndian.Uint64(b)), Count: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

func encodeSenderUsage(u SenderUsage) []byte {
	return binary.BigEndian.AppendUint64(encodeUsage(u.Usage), uint64(u.Since))
}

func decodeSenderUsage(b []byte) (SenderUsage, error) {
	if len(b) != 24 {
		return SenderUsage{}, fmt.Errorf("sender usage record of %d bytes", len(b))
	}
	u, _ := decodeUsage(b[:16])
	return SenderUsage{Usage: u, Since: int64(binary.BigEndian.Uint64(b[16:]))}, nil
}
