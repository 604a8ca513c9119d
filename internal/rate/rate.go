// Package rate is token buckets for the mesh's rate limits: a Rate, one
// Bucket, and a Table of buckets by key that stays bounded however many
// keys (peer IDs, which cost nothing) it is asked about. Time is passed
// in, so that callers and tests choose the clock.
package rate

import (
	"fmt"
	"math"
	"time"
)

// Rate is a token bucket's setting: PerSecond tokens are added every
// second, up to Burst; each event takes one. The zero Rate is no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// IsZero reports whether r is no limit.
func (r Rate) IsZero() bool { return r == Rate{} }

func (r Rate) String() string {
	if r.IsZero() {
		return "unlimited"
	}
	return fmt.Sprintf("%g/s, burst %d", r.PerSecond, r.Burst)
}

// Validate reports whether r is usable: zero, or a positive rate with a
// burst of at least one.
func (r Rate) Validate() error {
	if r.IsZero() {
		return nil
	}
	if r.PerSecond <= 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) || r.Burst < 1 {
		return fmt.Errorf("rate %v: want a positive rate and a burst of at least 1", r)
	}
	return nil
}

// Bucket is one token bucket; the zero value is full.
type Bucket struct {
	tokens float64
	last   time.Time
}

// Take takes a token at now, if there is one.
func (b *Bucket) Take(now time.Time, r Rate) bool { return b.TakeN(now, r, 1) }

// TakeN takes n tokens at now, if there are as many. An n above the burst
// takes a full bucket.
func (b *Bucket) TakeN(now time.Time, r Rate, n int) bool {
	if r.IsZero() {
		return true
	}
	b.refill(now, r)
	need := float64(min(max(n, 1), r.Burst))
	if b.tokens < need {
		return false
	}
	b.tokens -= need
	return true
}

func (b *Bucket) refill(now time.Time, r Rate) {
	if b.last.IsZero() {
		b.tokens = float64(r.Burst)
	} else if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(float64(r.Burst), b.tokens+el*r.PerSecond)
	}
	b.last = now
}

// Full reports whether b is full at now: it is then no different from a
// new bucket.
func (b *Bucket) Full(now time.Time, r Rate) bool {
	return r.IsZero() || b.last.IsZero() || b.tokens+now.Sub(b.last).Seconds()*r.PerSecond >= float64(r.Burst)
}

// sweepEvery is how often a Table drops its full buckets.
const sweepEvery = 10 * time.Second

// Table is a bucket per key, all with one Rate. It keeps at most max
// buckets: full buckets are dropped every ten seconds, and should the
// table still reach max, it forgets every bucket (each key gets a full
// one again, a burst at most: the callers' other bounds still hold). It
// is not safe for concurrent use.
type Table[K comparable] struct {
	rate    Rate
	max     int
	buckets map[K]*Bucket
	swept   time.Time
}

// NewTable returns a table of buckets at rate r, keeping at most max.
func NewTable[K comparable](r Rate, max int) *Table[K] {
	return &Table[K]{rate: r, max: max, buckets: make(map[K]*Bucket)}
}

// Take takes a token from k's bucket at now, if there is one.
func (t *Table[K]) Take(k K, now time.Time) bool { return t.TakeN(k, now, 1) }

// TakeN takes n tokens from k's bucket at now, if there are as many (see
// Bucket.TakeN).
func (t *Table[K]) TakeN(k K, now time.Time, n int) bool {
	if t.rate.IsZero() {
		return true
	}
	t.sweep(now)
	b, ok := t.buckets[k]
	if !ok {
		b = &Bucket{}
		t.buckets[k] = b
	}
	return b.TakeN(now, t.rate, n)
}

// Len returns the number of buckets kept.
func (t *Table[K]) Len() int { return len(t.buckets) }

func (t *Table[K]) sweep(now time.Time) {
	if now.Sub(t.swept) < sweepEvery && len(t.buckets) < t.max {
		return
	}
	t.swept = now
	for k, b := range t.buckets {
		if b.Full(now, t.rate) {
			delete(t.buckets, k)
		}
	}
	if len(t.buckets) >= t.max {
		clear(t.buckets)
	}
}
