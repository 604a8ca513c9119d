package mesh

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/protocol"
)

// Rate is a token bucket: PerSecond tokens are added every second, up to
// Burst; each message takes one. The zero Rate is no limit.
type Rate = rate.Rate

// TokenBytes is what one token of a Rate buys: a message takes a token
// per started TokenBytes of its wire bytes (one up to 16 KiB, 4 for 64
// KiB, 64 at the 1 MiB limit), so that a rate bounds bytes as well as
// messages.
const TokenBytes = 16 << 10

// Tokens returns what a message of size wire bytes takes from a bucket.
func Tokens(size int) int { return 1 + max(size-1, 0)/TokenBytes }

// RateLimits bound how fast gossip brings a node new messages of a space;
// every bucket is per space, and a message takes a token per started 16
// KiB (see TokenBytes). A message over a rate is ignored (neither stored
// nor forwarded; sync may fetch it later) and, when the peer that sent it
// is to blame, costs that peer gossip score (see the flood penalty
// below): a peer that keeps going over is graylisted.
//
// The defaults are generous for agents, which post a few messages a
// minute, and bursts when they hand work around: an author may post 50
// messages a second for a while, after a burst of 200 (a swarm's
// coordinator fanning out tasks), or 800 KB a second of large ones, after
// 3.2 MB. Authors new to the node (see Gate.Known) share 100 a second,
// burst 100, so that a peer ID, which costs nothing, buys no rate of its
// own; members keep theirs. The strangers' burst is what a flooder gets
// stored before it is graylisted, and storing it is what members' messages
// wait behind: at 200 the members of a 3-node test mesh saw their p99
// latency go from 28 ms to 250 ms for the second a 1 KiB flood began, at
// 100 to 67 ms. A peer relays what every author it hears sends, so its own
// bound is well above one author's: 500 a second, burst 1000. A node paces
// its own agents' posts below the author rate (see node.Config.Rates), so
// that honest nodes are never penalised for them.
type RateLimits struct {
	// Author bounds what one author publishes in a space.
	Author Rate
	// Strangers bounds, together, every author that Gate.Known does not
	// know in a space.
	Strangers Rate
	// Peer bounds what one peer forwards in a space, whoever wrote it.
	Peer Rate
	// Off turns rate limiting off (tests, closed meshes).
	Off bool
}

// DefaultRateLimits are the rate limits of a Config whose Rates is zero.
func DefaultRateLimits() RateLimits {
	return RateLimits{
		Author:    Rate{PerSecond: 50, Burst: 200},
		Strangers: Rate{PerSecond: 100, Burst: 100},
		Peer:      Rate{PerSecond: 500, Burst: 1000},
	}
}

// Validate reports the first unusable rate.
func (r RateLimits) Validate() error {
	for _, x := range []struct {
		name string
		r    Rate
	}{{"author", r.Author}, {"strangers", r.Strangers}, {"peer", r.Peer}} {
		if err := x.r.Validate(); err != nil {
			return fmt.Errorf("%s %w", x.name, err)
		}
	}
	return nil
}

// The flood penalty is gossipsub's application-specific score (P5) of a
// peer: every message a peer sends over a rate it is to blame for adds its
// tokens (1 per started 16 KiB) to its counter, which decays to a
// hundredth in penaltyMemory. The score
// is the square of the counter beyond penaltyGrace, negated: a peer a
// few messages over (an honest node whose clock or pacing differs a
// little) loses nothing, while a flooder's counter takes it below the
// graylist threshold (-400, see score.go) some 30 messages past its
// grace, whatever good score it had. Graylisted, its messages are
// dropped unread, so its counter would stop growing and decay back over
// the line within seconds: a peer whose counter reaches graylistLevel is
// sentenced instead, its counter raised a hundredfold, so that it stays
// graylisted for penaltyMemory. Let back then, it is graylisted again
// after the same 30 messages if it floods again.
const (
	penaltyGrace  = 10
	penaltyMemory = 10 * time.Minute
	// maxPenalised bounds the peers whose counters are kept.
	maxPenalised = 8192
	// maxBuckets bounds each table of buckets (see rate.Table).
	maxBuckets = 1 << 16
)

var (
	// penaltyDecay is the counter's decay per second.
	penaltyDecay = math.Log(0.01) / penaltyMemory.Seconds()
	// graylistLevel is the counter at which the flood penalty alone
	// graylists a peer that has the best score there is otherwise.
	graylistLevel = penaltyGrace + math.Sqrt(topicScoreCap-graylistThreshold)
)

type penalty struct {
	count  float64
	at     time.Time
	logged time.Time // when the peer's excess was last logged
}

// value returns the counter at now.
func (p *penalty) value(now time.Time) float64 {
	return p.count * math.Exp(penaltyDecay*now.Sub(p.at).Seconds())
}

// floodGuard keeps the rate buckets of the gossip validators and the
// peers' flood penalties. It is safe for concurrent use.
type floodGuard struct {
	rates RateLimits
	now   func() time.Time
	log   *slog.Logger

	mu        sync.Mutex
	authors   *rate.Table[authorKey]
	strangers *rate.Table[protocol.ID]
	peers     *rate.Table[peerKey]
	penalties map[peer.ID]*penalty
	pruned    time.Time // penalties last pruned
	stats     FloodStats
}

type authorKey struct {
	space  protocol.ID
	author peer.ID
}

type peerKey struct {
	space protocol.ID
	peer  peer.ID
}

// FloodStats count the gossip messages the rate limits ignored, by the
// bucket that was empty.
type FloodStats struct {
	OverPeer, OverAuthor, OverStrangers int64
}

func newFloodGuard(rates RateLimits, now func() time.Time, log *slog.Logger) *floodGuard {
	return &floodGuard{
		rates:     rates,
		now:       now,
		log:       log,
		authors:   rate.NewTable[authorKey](rates.Author, maxBuckets),
		strangers: rate.NewTable[protocol.ID](rates.Strangers, maxBuckets),
		peers:     rate.NewTable[peerKey](rates.Peer, maxBuckets),
		penalties: make(map[peer.ID]*penalty),
	}
}

// verdict is what the guard says of a message.
type verdict int

const (
	within        verdict = iota
	overPeer              // the forwarding peer is over its rate
	overAuthor            // the author is over its rate
	overStrangers         // the space's strangers are over their rate
)

func (v verdict) String() string {
	switch v {
	case overPeer:
		return "peer over its rate"
	case overAuthor:
		return "author over its rate"
	case overStrangers:
		return "strangers over their rate"
	}
	return "within rates"
}

// reason is v as a refusal reason (see Refusals).
func (v verdict) reason() string {
	switch v {
	case overPeer:
		return "rate_peer"
	case overAuthor:
		return "rate_author"
	case overStrangers:
		return "rate_strangers"
	}
	return ""
}

// forwarded charges a message of space (of size wire bytes) that from sent us, before it is
// decoded: a peer that sends more than any honest relay would is cut off
// before its messages cost a signature check each, and penalised.
func (g *floodGuard) forwarded(space protocol.ID, from peer.ID, size int) verdict {
	if g.rates.Off {
		return within
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.pruned) >= time.Minute {
		g.pruned = now
		g.prunePenaltiesLocked(now)
	}
	if g.peers.TakeN(peerKey{space, from}, now, Tokens(size)) {
		return within
	}
	g.stats.OverPeer++
	g.penaliseLocked(from, space, overPeer, Tokens(size), now)
	return overPeer
}

// authored charges a valid message of space by author, which from sent
// us: the author's own bucket, and the space's strangers' bucket when
// known is false. When the author sent it itself, going over is its own
// doing and it is penalised; a relay is not (it forwards what it
// accepted, within its own limits).
func (g *floodGuard) authored(space protocol.ID, author, from peer.ID, known bool, size int) verdict {
	if g.rates.Off {
		return within
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	v := within
	switch {
	case !g.authors.TakeN(authorKey{space, author}, now, Tokens(size)):
		v = overAuthor
		g.stats.OverAuthor++
	case !known && !g.strangers.TakeN(space, now, Tokens(size)):
		v = overStrangers
		g.stats.OverStrangers++
	}
	if v != within && author == from {
		g.penaliseLocked(from, space, v, Tokens(size), now)
	}
	return v
}

// penaliseLocked adds n (the tokens of the message over the rate) to p's
// flood penalty, logging (once a minute per peer) that it is over.
func (g *floodGuard) penaliseLocked(p peer.ID, space protocol.ID, why verdict, n int, now time.Time) {
	pen, ok := g.penalties[p]
	if !ok {
		if len(g.penalties) >= maxPenalised {
			g.prunePenaltiesLocked(now)
		}
		pen = &penalty{at: now}
		g.penalties[p] = pen
	}
	pen.count = pen.value(now) + float64(n)
	pen.at = now
	if pen.count >= graylistLevel && pen.count < 100*graylistLevel {
		pen.count = 100 * graylistLevel // sentenced: see graylistLevel
		g.log.Warn("gossip: peer flooding: graylisted", "peer", p, "space", space, "reason", why.String(), "for", penaltyMemory)
	}
	if now.Sub(pen.logged) >= time.Minute {
		pen.logged = now
		g.log.Warn("gossip: peer over its publish rate; ignoring the excess and lowering its score",
			"peer", p, "space", space, "reason", why.String(), "penalty", math.Round(pen.count))
	}
}

// prunePenaltiesLocked forgets the penalties that have decayed away, and
// if that is not enough, those at or below the mean.
func (g *floodGuard) prunePenaltiesLocked(now time.Time) {
	for p, pen := range g.penalties {
		if pen.value(now) < 1 {
			delete(g.penalties, p)
		}
	}
	if len(g.penalties) < maxPenalised {
		return
	}
	var sum float64
	for _, pen := range g.penalties {
		sum += pen.value(now)
	}
	mean := sum / float64(len(g.penalties))
	for p, pen := range g.penalties {
		if pen.value(now) <= mean {
			delete(g.penalties, p)
		}
	}
}

// score is p's application-specific gossip score: zero or negative. It is
// called by gossipsub's scoring under its own lock, on every RPC.
func (g *floodGuard) score(p peer.ID) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	pen, ok := g.penalties[p]
	if !ok {
		return 0
	}
	excess := pen.value(g.now()) - penaltyGrace
	if excess <= 0 {
		return 0
	}
	return -excess * excess
}

// Stats returns the counts of messages ignored so far.
func (g *floodGuard) Stats() FloodStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}
