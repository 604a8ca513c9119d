package protocol

import (
	"math"
	"time"
)

// MaxMessageSize is the hard upper bound of a message body in bytes.
const MaxMessageSize = 1 << 20

// Limits bound what a node accepts. The zero value is not useful; start from
// DefaultLimits.
type Limits struct {
	MaxSize    int           // body bytes, ≤ MaxMessageSize
	MaxSkew    time.Duration // how far created_at may lie in the future
	MaxAge     time.Duration // how far created_at may lie in the past (0: no bound); older counts as expired
	MaxPrev    int           // causal parents per message
	MaxRefs    int           // entries in refs.messages and in refs.nodes, each
	MaxType    int           // bytes in type
	MaxMeta    int           // entries in meta
	MaxMetaLen int           // bytes in one meta key or value
}

// DefaultMaxAge is how old a message a node accepts unless configured
// otherwise: a year. Long enough for a node offline for months to come
// back and deliver what it wrote, for a direct message to wait in an
// outbox, and for a late joiner to get a year of a space's history; short
// enough that nobody can date a message to 2001.
const DefaultMaxAge = 365 * 24 * time.Hour

// DefaultLimits returns the limits a daemon uses unless configured otherwise.
func DefaultLimits() Limits {
	return Limits{
		MaxSize:    MaxMessageSize,
		MaxSkew:    5 * time.Minute,
		MaxAge:     DefaultMaxAge,
		MaxPrev:    64,
		MaxRefs:    64,
		MaxType:    64,
		MaxMeta:    64,
		MaxMetaLen: 1024,
	}
}

// Validate reports whether l is usable.
func (l Limits) Validate() error {
	switch {
	case l.MaxSize <= 0 || l.MaxSize > MaxMessageSize:
		return errorf(ErrMalformed, "limits: max size %d outside 1..%d", l.MaxSize, MaxMessageSize)
	case l.MaxSkew < 0, l.MaxAge < 0, l.MaxPrev < 0, l.MaxRefs < 0, l.MaxType <= 0, l.MaxMeta < 0, l.MaxMetaLen <= 0:
		return errorf(ErrMalformed, "limits: negative or zero bound in %+v", l)
	}
	return nil
}

// MaxWireSize is the largest wire encoding of a message within MaxMessageSize.
const MaxWireSize = 1 + 10 + MaxMessageSize + SignatureSize

// StoredLimits returns the widest limits there are: for reading back a
// message this node validated when it accepted it, under whatever limits
// were configured then. A node whose limits were raised (or lowered since)
// still reads every message it holds, however old.
func StoredLimits() Limits {
	return Limits{
		MaxSize:    MaxMessageSize,
		MaxSkew:    math.MaxInt64,
		MaxAge:     0, // no bound
		MaxPrev:    math.MaxInt,
		MaxRefs:    math.MaxInt,
		MaxType:    math.MaxInt,
		MaxMeta:    math.MaxInt,
		MaxMetaLen: math.MaxInt,
	}
}
