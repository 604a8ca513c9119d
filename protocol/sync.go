package protocol

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math"
)

// Range reconciliation.
//
// Two members of a space find the messages one has and the other lacks by
// comparing fingerprints of ranges of their sets, narrowing to the ranges
// that differ. Both sides must compute the same fingerprint for the same
// set, so its definition is part of the protocol:
//
//   - A message's SyncKey is its created_at (Unix ms) then its ID bytes;
//     a range [lo, hi) holds the messages with lo <= key < hi.
//   - The Sum of a set is the sum of its IDs, each read as a 256-bit
//     little-endian unsigned integer, modulo 2^256. Adding and removing a
//     message are O(1), and the sum of a union of disjoint ranges is the sum
//     of their sums, so stores can keep partial sums.
//   - Its Fingerprint is the first 16 bytes of
//     SHA-256("weft/sync/fp/v1\x00" || sum (32 bytes) || uvarint(count)).
//
// IDs are SHA-256 outputs, so two different sets share a fingerprint only
// by chance (or by a peer's design, which can only spoil its own sync).

// SyncKey is a message's position in sync order.
type SyncKey struct {
	Time int64 // created_at, Unix milliseconds
	ID   ID
}

// MinSyncKey is below every message's key; MaxSyncKey above every valid one
// (created_at is bounded by clock-skew checks), so [MinSyncKey, MaxSyncKey)
// is the whole set.
var (
	MinSyncKey = SyncKey{Time: math.MinInt64}
	MaxSyncKey = SyncKey{Time: math.MaxInt64, ID: maxID}
)

var maxID = func() (id ID) {
	for i := range id {
		id[i] = 0xff
	}
	return id
}()

// KeyOf returns m's sync key.
func KeyOf(m *Message) SyncKey { return SyncKey{Time: m.CreatedAt, ID: m.ID} }

// Compare orders keys by Time, then ID bytes; it returns -1, 0 or +1.
func (k SyncKey) Compare(o SyncKey) int {
	if c := cmp.Compare(k.Time, o.Time); c != 0 {
		return c
	}
	return bytes.Compare(k.ID[:], o.ID[:])
}

// Less reports whether k sorts before o.
func (k SyncKey) Less(o SyncKey) bool { return k.Compare(o) < 0 }

// Sum is a set's ID sum modulo 2^256, as four little-endian 64-bit limbs.
// The zero value is the sum of the empty set.
type Sum [4]uint64

// Add adds id to s.
func (s *Sum) Add(id ID) { s.AddSum(idLimbs(id)) }

// Sub removes id from s.
func (s *Sum) Sub(id ID) { s.SubSum(idLimbs(id)) }

// AddSum adds o to s (the union of disjoint sets).
func (s *Sum) AddSum(o Sum) {
	var carry uint64
	for i := range s {
		var c1, c2 uint64
		s[i], c1 = addCarry(s[i], o[i])
		s[i], c2 = addCarry(s[i], carry)
		carry = c1 + c2
	}
}

// SubSum subtracts o from s (removing a subset).
func (s *Sum) SubSum(o Sum) {
	var borrow uint64
	for i := range s {
		var b1, b2 uint64
		s[i], b1 = subBorrow(s[i], o[i])
		s[i], b2 = subBorrow(s[i], borrow)
		borrow = b1 + b2
	}
}

func addCarry(a, b uint64) (uint64, uint64) {
	r := a + b
	if r < a {
		return r, 1
	}
	return r, 0
}

func subBorrow(a, b uint64) (uint64, uint64) {
	r := a - b
	if a < b {
		return r, 1
	}
	return r, 0
}

func idLimbs(id ID) Sum {
	var s Sum
	for i := range s {
		s[i] = binary.LittleEndian.Uint64(id[i*8:])
	}
	return s
}

// FingerprintSize is the size of a Fingerprint in bytes.
const FingerprintSize = 16

// Fingerprint identifies a set of messages: see Sum.
type Fingerprint [FingerprintSize]byte

const fingerprintDomain = "weft/sync/fp/v1\x00"

// Fingerprint returns the fingerprint of a set of count messages whose IDs
// sum to s.
func (s Sum) Fingerprint(count int) Fingerprint {
	b := make([]byte, 0, len(fingerprintDomain)+32+binary.MaxVarintLen64)
	b = append(b, fingerprintDomain...)
	for _, l := range s {
		b = binary.LittleEndian.AppendUint64(b, l)
	}
	b = binary.AppendUvarint(b, uint64(count))
	h := sha256.Sum256(b)
	return Fingerprint(h[:FingerprintSize])
}
