package policy

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// DM policies: who may put direct messages in the inbox.
const (
	DMAnyone  = "anyone"  // every peer, strangers within their rate and quota
	DMTrusted = "trusted" // the peers on the trust list only
)

// DMConfig is the inbox's policy. Trusted peers are never limited; the
// limits are those of strangers. Zero fields take DefaultDM's values.
type DMConfig struct {
	Policy string // DMAnyone (also "") or DMTrusted

	// Each stranger may send Rate messages a second, in bursts of up to
	// Burst, and have at most Quota messages held in the inbox at once.
	Rate  float64
	Burst int
	Quota int

	// All strangers together may send AllRate messages a second, in
	// bursts of up to AllBurst, and have at most AllQuota held at once:
	// fresh identities cost nothing, so these bound a flood from many.
	AllRate  float64
	AllBurst int
	AllQuota int
}

// DefaultDM returns the default DM policy: anyone may write, since a
// direct message runs no code, but each stranger at most 10 messages a
// second (bursts of 50) and 1,000 held; all strangers together 100 a
// second (bursts of 500) and 10,000 held.
func DefaultDM() DMConfig {
	return DMConfig{
		Policy: DMAnyone,
		Rate:   10, Burst: 50, Quota: 1000,
		AllRate: 100, AllBurst: 500, AllQuota: 10000,
	}
}

// WithDefaults returns c with its zero fields set to DefaultDM's.
func (c DMConfig) WithDefaults() DMConfig {
	d := DefaultDM()
	if c.Policy == "" {
		c.Policy = d.Policy
	}
	setDefault(&c.Rate, d.Rate)
	setDefault(&c.Burst, d.Burst)
	setDefault(&c.Quota, d.Quota)
	setDefault(&c.AllRate, d.AllRate)
	setDefault(&c.AllBurst, d.AllBurst)
	setDefault(&c.AllQuota, d.AllQuota)
	return c
}

func setDefault[T int | float64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate reports whether c is usable.
func (c DMConfig) Validate() error {
	switch c.Policy {
	case "", DMAnyone, DMTrusted:
	default:
		return fmt.Errorf("dm policy %q: want %s or %s", c.Policy, DMAnyone, DMTrusted)
	}
	if c.Rate < 0 || c.AllRate < 0 || math.IsNaN(c.Rate) || math.IsNaN(c.AllRate) ||
		c.Burst < 0 || c.AllBurst < 0 || c.Quota < 0 || c.AllQuota < 0 {
		return errors.New("dm limits must not be negative")
	}
	return nil
}

// Verdict is the gate's decision on one direct message.
type Verdict int

const (
	Accept      Verdict = iota // store it
	Forbidden                  // the policy takes nothing from this sender: do not retry
	RateLimited                // too many too fast: retry later
	OverQuota                  // the sender, or all strangers, hold as many as they may: retry later
)

func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Forbidden:
		return "forbidden"
	case RateLimited:
		return "rate_limited"
	case OverQuota:
		return "quota"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// minPrune is the fewest token buckets kept before idle ones are dropped.
const minPrune = 4096

// Gate admits direct messages to the inbox under a DMConfig. It counts the
// messages each stranger holds in the inbox: Admit counts an accepted
// message at once (Release uncounts one that was not stored after all),
// and SetHeld replaces the counts with a recount of the inbox, which
// catches up with messages removed since (expired, past retention). It is
// safe for concurrent use.
type Gate struct {
	cfg DMConfig

	mu      sync.Mutex
	buckets map[peer.ID]*bucket // strangers that sent lately
	all     bucket              // all strangers
	pruneAt int
	held    map[peer.ID]int // messages held per stranger (> 0)
	total   int             // their sum
}

// NewGate returns a gate applying cfg (zero fields: DefaultDM's).
func NewGate(cfg DMConfig) *Gate {
	return &Gate{
		cfg:     cfg.WithDefaults(),
		buckets: make(map[peer.ID]*bucket),
		pruneAt: minPrune,
		held:    make(map[peer.ID]int),
	}
}

// Config returns the policy the gate applies.
func (g *Gate) Config() DMConfig { return g.cfg }

// Admit decides on a direct message from from at now. A trusted sender is
// always accepted and not counted. A stranger is checked against the
// policy, then the quotas (a refusal for quota spends no rate), then the
// rates; an accepted stranger's message counts as held from now on.
func (g *Gate) Admit(from peer.ID, trusted bool, now time.Time) Verdict {
	if trusted {
		return Accept
	}
	if g.cfg.Policy == DMTrusted {
		return Forbidden
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[from] >= g.cfg.Quota || g.total >= g.cfg.AllQuota {
		return OverQuota
	}
	rate, burst := g.cfg.Rate, float64(g.cfg.Burst)
	b := g.buckets[from]
	if b == nil {
		b = &bucket{}
	}
	b.fill(now, rate, burst)
	g.all.fill(now, g.cfg.AllRate, float64(g.cfg.AllBurst))
	if b.tokens < 1 || g.all.tokens < 1 {
		return RateLimited
	}
	b.tokens--
	g.all.tokens--
	if g.buckets[from] == nil {
		g.buckets[from] = b
		if len(g.buckets) >= g.pruneAt {
			g.prune(now)
		}
	}
	g.held[from]++
	g.total++
	return Accept
}

// prune drops the buckets that have refilled: a full bucket is the same
// as none. The caller holds mu.
func (g *Gate) prune(now time.Time) {
	for p, b := range g.buckets {
		b.fill(now, g.cfg.Rate, float64(g.cfg.Burst))
		if b.tokens >= float64(g.cfg.Burst) {
			delete(g.buckets, p)
		}
	}
	g.pruneAt = max(minPrune, 2*len(g.buckets))
}

// Release uncounts a message of from that Admit accepted but that was not
// stored (a duplicate of one already held, or a failure to store it).
func (g *Gate) Release(from peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[from] > 0 {
		g.dec(from, 1)
	}
}

// Forget drops the counts of p, which became trusted.
func (g *Gate) Forget(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dec(p, g.held[p])
	delete(g.buckets, p)
}

func (g *Gate) dec(p peer.ID, n int) {
	g.held[p] -= n
	g.total -= n
	if g.held[p] <= 0 {
		delete(g.held, p)
	}
}

// SetHeld replaces the counts with held: the messages each stranger holds
// in the inbox now, by a recount.
func (g *Gate) SetHeld(held map[peer.ID]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(map[peer.ID]int, len(held))
	g.total = 0
	for p, n := range held {
		if n > 0 {
			g.held[p] = n
			g.total += n
		}
	}
}

// Held returns how many messages p holds by the gate's count, and how
// many all strangers hold.
func (g *Gate) Held(p peer.ID) (mine, all int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[p], g.total
}

// bucket is a token bucket: it holds up to burst tokens and gains rate a
// second.
type bucket struct {
	tokens float64
	last   time.Time // zero: new, so full
}

// fill adds the tokens gained since the last fill. A clock that went back
// adds none.
func (b *bucket) fill(now time.Time, rate, burst float64) {
	switch {
	case b.last.IsZero():
		b.tokens = burst
	case now.After(b.last):
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	default:
		return
	}
	b.last = now
}
