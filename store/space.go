package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// Space is a space this node has joined.
type Space struct {
	ID       protocol.ID `json:"id"`
	Name     string      `json:"name"`
	JoinedAt time.Time   `json:"joined_at"`
	// Retention bounds what the store keeps of the space; zero means the
	// store's default (Options.Retention).
	Retention Retention `json:"retention,omitzero"`
	// Limits bound what the node takes into the space; zero fields mean
	// the node's defaults. The store keeps them; the node enforces them.
	Limits SpaceLimits `json:"limits,omitzero"`
	// Private is set for a members-only space: see protocol/member.
	Private *Private `json:"private,omitempty"`
}

// Private is what the store keeps of a private space: its genesis, stored
// as a message of the space, from which the node rebuilds its membership.
type Private struct {
	Genesis protocol.ID `json:"genesis"`
}

// SpaceLimits bound what a node takes into one space, on every path
// (gossip, sync, its own agents): the bytes the space may hold, the bytes
// each sender may hold in it (both counted as Usage counts them), and the
// size of one message's body. A zero field is no bound of the space's own.
type SpaceLimits struct {
	MaxBytes       int64 `json:"max_bytes,omitempty"`
	MaxSenderBytes int64 `json:"max_sender_bytes,omitempty"`
	MaxMessageSize int   `json:"max_message_size,omitempty"`
}

// IsZero reports whether l sets no limit of its own.
func (l SpaceLimits) IsZero() bool { return l == SpaceLimits{} }

func (l SpaceLimits) validate() error {
	if l.MaxBytes < 0 || l.MaxSenderBytes < 0 || l.MaxMessageSize < 0 {
		return fmt.Errorf("space limits %+v: negative bound", l)
	}
	return nil
}

// Retention bounds how many messages of a space, and how old, a store
// keeps; Sweep deletes the others, oldest (by sync key) first. A zero field
// is no bound.
//
// In JSON, max_age is a Go duration string such as "720h0m0s" (also read:
// a number of milliseconds); zero fields are omitted:
//
//	{"max_count": 10000, "max_age": "168h0m0s"}
type Retention struct {
	MaxCount int           // keep at most this many messages
	MaxAge   time.Duration // keep messages created at most this long ago
}

// IsZero reports whether r keeps everything.
func (r Retention) IsZero() bool { return r == Retention{} }

func (r Retention) validate() error {
	if r.MaxCount < 0 || r.MaxAge < 0 {
		return fmt.Errorf("retention %+v: negative bound", r)
	}
	return nil
}

type retentionJSON struct {
	MaxCount int             `json:"max_count,omitempty"`
	MaxAge   json.RawMessage `json:"max_age,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (r Retention) MarshalJSON() ([]byte, error) {
	j := retentionJSON{MaxCount: r.MaxCount}
	if r.MaxAge != 0 {
		j.MaxAge, _ = json.Marshal(r.MaxAge.String())
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Retention) UnmarshalJSON(b []byte) error {
	var j retentionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Retention{MaxCount: j.MaxCount}
	if len(j.MaxAge) > 0 && string(j.MaxAge) != "null" {
		var text string
		var ms int64
		switch {
		case json.Unmarshal(j.MaxAge, &text) == nil:
			d, err := time.ParseDuration(text)
			if err != nil {
				return fmt.Errorf("retention: max_age: %w", err)
			}
			out.MaxAge = d
		case json.Unmarshal(j.MaxAge, &ms) == nil:
			if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
				return fmt.Errorf("retention: max_age %d ms out of range", ms)
			}
			out.MaxAge = time.Duration(ms) * time.Millisecond
		default:
			return fmt.Errorf("retention: max_age %s is neither a duration string nor milliseconds", j.MaxAge)
		}
	}
	if err := out.validate(); err != nil {
		return err
	}
	*r = out
	return nil
}

// Peer is a peer this node has seen.
type Peer struct {
	ID       string    `json:"id"`
	Addrs    []string  `json:"addrs,omitempty"`
	LastSeen time.Time `json:"last_seen"`
}

// JoinSpace records that this node joined sp. It is idempotent: if sp.ID
// is already joined it returns the existing record and created=false. A
// zero JoinedAt is set to now; times are stored in UTC.
func (s *Store) JoinSpace(sp Space) (Space, bool, error) {
	if sp.ID.IsZero() {
		return Space{}, false, errors.New("store: join space: zero id")
	}
	if err := sp.Retention.validate(); err != nil {
		return Space{}, false, fmt.Errorf("store: join space %s: %w", sp.ID, err)
	}
	if err := sp.Limits.validate(); err != nil {
		return Space{}, false, fmt.Errorf("store: join space %s: %w", sp.ID, err)
	}
	if sp.JoinedAt.IsZero() {
		sp.JoinedAt = time.Now()
	}
	sp.JoinedAt = sp.JoinedAt.UTC() // also drops the monotonic reading
	if err := s.enter(); err != nil {
		return Space{}, false, err
	}
	defer s.leave()
	var (
		out     Space
		created bool
	)
	err := s.update(func(txn *badger.Txn) error {
		val, err := get(txn, spaceKey(sp.ID))
		switch {
		case err == nil:
			created = false
			return json.Unmarshal(val, &out)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		b, err := json.Marshal(sp)
		if err != nil {
			return err
		}
		out, created = sp, true
		return txn.Set(spaceKey(sp.ID), b)
	})
	s.spaces.forget(sp.ID)
	if err != nil {
		return Space{}, false, fmt.Errorf("store: join space %s: %w", sp.ID, err)
	}
	return out, created, nil
}

// SetRetention sets the retention of joined space id (zero: the store's
// default) and returns the updated record, or ErrNotFound if id is not
// joined. The next Sweep applies it.
func (s *Store) SetRetention(id protocol.ID, r Retention) (Space, error) {
	if err := r.validate(); err != nil {
		return Space{}, fmt.Errorf("store: set retention of %s: %w", id, err)
	}
	if err := s.enter(); err != nil {
		return Space{}, err
	}
	defer s.leave()
	var sp Space
	err := s.update(func(txn *badger.Txn) error {
		val, err := get(txn, spaceKey(id))
		if err != nil {
			return err
		}
		sp = Space{}
		if err := json.Unmarshal(val, &sp); err != nil {
			return err
		}
		sp.Retention = r
		b, err := json.Marshal(sp)
		if err != nil {
			return err
		}
		return txn.Set(spaceKey(id), b)
	})
	s.spaces.forget(id)
	if err != nil {
		return Space{}, fmt.Errorf("store: set retention of %s: %w", id, err)
	}
	return sp, nil
}

// SetLimits sets the limits of joined space id (zero: the node's
// defaults) and returns the updated record, or ErrNotFound if id is not
// joined.
func (s *Store) SetLimits(id protocol.ID, l SpaceLimits) (Space, error) {
	if err := l.validate(); err != nil {
		return Space{}, fmt.Errorf("store: set limits of %s: %w", id, err)
	}
	sp, err := s.updateSpace(id, func(sp *Space) { sp.Limits = l })
	if err != nil {
		return Space{}, fmt.Errorf("store: set limits of %s: %w", id, err)
	}
	return sp, nil
}

// updateSpace applies edit to the record of joined space id.
func (s *Store) updateSpace(id protocol.ID, edit func(*Space)) (Space, error) {
	if err := s.enter(); err != nil {
		return Space{}, err
	}
	defer s.leave()
	var sp Space
	err := s.update(func(txn *badger.Txn) error {
		val, err := get(txn, spaceKey(id))
		if err != nil {
			return err
		}
		sp = Space{}
		if err := json.Unmarshal(val, &sp); err != nil {
			return err
		}
		edit(&sp)
		b, err := json.Marshal(sp)
		if err != nil {
			return err
		}
		return txn.Set(spaceKey(id), b)
	})
	s.spaces.forget(id)
	return sp, err
}

// LeaveSpace forgets that this node joined space id; its messages stay.
// It returns ErrNotFound if id is not joined.
func (s *Store) LeaveSpace(id protocol.ID) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	err := s.update(func(txn *badger.Txn) error {
		if _, err := get(txn, spaceKey(id)); err != nil {
			return err
		}
		return txn.Delete(spaceKey(id))
	})
	s.spaces.forget(id)
	if err != nil {
		return fmt.Errorf("store: leave space %s: %w", id, err)
	}
	return nil
}

// Space returns the joined space id, or ErrNotFound. Records are cached
// in memory once read: the API looks its space up on every request.
func (s *Store) Space(id protocol.ID) (Space, error) {
	if err := s.enter(); err != nil {
		return Space{}, err
	}
	defer s.leave()
	sp, gen, ok := s.spaces.get(id)
	if ok {
		return sp, nil
	}
	err := s.db.View(func(txn *badger.Txn) error {
		val, err := get(txn, spaceKey(id))
		if err != nil {
			return err
		}
		return json.Unmarshal(val, &sp)
	})
	if err != nil {
		return Space{}, fmt.Errorf("store: space %s: %w", id, err)
	}
	s.spaces.put(id, sp, gen)
	return sp, nil
}

// spaceCache holds joined spaces' records as last read. Every change of
// a record forgets it after its transaction, bumping gen, so that a read
// that began before the change (and may have read the old record) does
// not cache what it read.
type spaceCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[protocol.ID]Space
}

func (c *spaceCache) get(id protocol.ID) (Space, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp, ok := c.m[id]
	return sp, c.gen, ok
}

func (c *spaceCache) put(id protocol.ID, sp Space, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.m == nil {
		c.m = make(map[protocol.ID]Space)
	}
	c.m[id] = sp
}

func (c *spaceCache) forget(id protocol.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, id)
}

// Spaces returns the joined spaces sorted by Name (then ID).
func (s *Store) Spaces() ([]Space, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var spaces []Space
	err := scanJSON(s.db, prefixSpace, func(sp Space) { spaces = append(spaces, sp) })
	if err != nil {
		return nil, fmt.Errorf("store: spaces: %w", err)
	}
	slices.SortFunc(spaces, func(a, b Space) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), slices.Compare(a.ID[:], b.ID[:]))
	})
	return spaces, nil
}

// PutPeer stores p, replacing any earlier record of p.ID. LastSeen is
// stored in UTC.
func (s *Store) PutPeer(p Peer) error {
	if p.ID == "" {
		return errors.New("store: put peer: empty id")
	}
	p.LastSeen = p.LastSeen.UTC()
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("store: put peer %s: encode: %w", p.ID, err)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	err = s.update(func(txn *badger.Txn) error { return txn.Set(peerKey(p.ID), b) })
	if err != nil {
		return fmt.Errorf("store: put peer %s: %w", p.ID, err)
	}
	return nil
}

// Peers returns the stored peers sorted by ID.
func (s *Store) Peers() ([]Peer, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var peers []Peer
	err := scanJSON(s.db, prefixPeer, func(p Peer) { peers = append(peers, p) })
	if err != nil {
		return nil, fmt.Errorf("store: peers: %w", err)
	}
	return peers, nil // keys sort by peer id
}

// update runs fn in an update transaction, retrying on conflicts, and
// returns once it is on disk.
func (s *Store) update(fn func(txn *badger.Txn) error) error {
	var err error
	for range maxPutAttempts {
		s.compact.wake()
		err = s.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err != nil {
		return err
	}
	return s.syncer.wait()
}

// scanJSON decodes every value under the one-byte prefix into a T.
func scanJSON[T any](db *badger.DB, prefix byte, fn func(T)) error {
	return db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			var v T
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &v) }); err != nil {
				return fmt.Errorf("key %q: %w", it.Item().Key(), err)
			}
			fn(v)
		}
		return nil
	})
}
