package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// Flood resistance, the node's part: what each space may hold (quotas per
// space and per sender, a message size) on every path a message comes in,
// who is a known member of a space (for the gossip rates, see
// mesh.RateLimits), and the pacing of this node's own posts.

// rates returns the gossip rate limits in effect.
func (c Config) rates() mesh.RateLimits {
	if c.Rates == (mesh.RateLimits{}) {
		return mesh.DefaultRateLimits()
	}
	return c.Rates
}

// paceRates are the rates this node's own posts are paced below (see
// pacer): none when the rate limits are off (no peer would ignore them).
func (c Config) paceRates() (member, stranger rate.Rate) {
	r := c.rates()
	if r.Off {
		return rate.Rate{}, rate.Rate{}
	}
	if c.probation() == 0 {
		return r.Author, r.Author // no strangers: every author is known at once
	}
	return r.Author, r.Strangers
}

// probation returns the stranger probation in effect.
func (c Config) probation() time.Duration {
	switch {
	case c.StrangerProbation == 0:
		return DefaultStrangerProbation
	case c.StrangerProbation < 0:
		return 0
	}
	return c.StrangerProbation
}

// spaceLimits holds each joined space's own limits.
type spaceLimits struct {
	mu  sync.RWMutex
	own map[protocol.ID]store.SpaceLimits
}

func (l *spaceLimits) set(space protocol.ID, sl store.SpaceLimits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own[space] = sl
}

func (l *spaceLimits) drop(space protocol.ID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.own, space)
}

func (l *spaceLimits) get(space protocol.ID) store.SpaceLimits {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.own[space]
}

// limitsOf returns the limits in effect for space: its own, else the
// node's, else the defaults; a zero field is no bound.
func (n *Node) limitsOf(space protocol.ID) store.SpaceLimits {
	return effectiveLimits(n.limits.get(space), n.cfg.SpaceLimits, n.cfg.Limits.MaxSize)
}

func effectiveLimits(own, node store.SpaceLimits, maxSize int) store.SpaceLimits {
	pick := func(own, node, dflt int64) int64 {
		switch {
		case own > 0:
			return own
		case node > 0:
			return node
		case node < 0:
			return 0
		}
		return dflt
	}
	l := store.SpaceLimits{
		MaxBytes:       pick(own.MaxBytes, node.MaxBytes, DefaultSpaceLimits.MaxBytes),
		MaxSenderBytes: pick(own.MaxSenderBytes, node.MaxSenderBytes, DefaultSpaceLimits.MaxSenderBytes),
		MaxMessageSize: int(pick(int64(own.MaxMessageSize), int64(node.MaxMessageSize), int64(maxSize))),
	}
	if l.MaxMessageSize <= 0 || l.MaxMessageSize > maxSize {
		l.MaxMessageSize = maxSize
	}
	return l
}

// errOverLimit says why a message is over its space's limits.
type errOverLimit struct {
	code string // api.CodeTooLarge or api.CodeQuotaExceeded
	msg  string
}

func (e *errOverLimit) Error() string { return e.msg }

// admit checks m against its space's size limit and, roughly (without
// the store's lock), its quotas: what gossip asks before it accepts a
// message, and ingest before it tries to store one. The store checks the
// quotas again, exactly, as it stores.
func (n *Node) admit(m *protocol.Message) error {
	if err := n.admitPrivate(m); err != nil {
		return err
	}
	return n.admitLimits(m)
}

// admitLimits is admit without the private-space check.
func (n *Node) admitLimits(m *protocol.Message) error {
	lim := n.limitsOf(m.Space)
	if len(m.Body) > lim.MaxMessageSize {
		return &errOverLimit{api.CodeTooLarge, fmt.Sprintf("message of %d bytes is over the space's limit of %d", len(m.Body), lim.MaxMessageSize)}
	}
	size := int64(len(m.Wire()))
	if lim.MaxBytes > 0 {
		if u, err := n.store.Usage(m.Space); err == nil && u.Bytes+size > lim.MaxBytes {
			return &errOverLimit{api.CodeQuotaExceeded, fmt.Sprintf("the space holds %d bytes, its quota is %d", u.Bytes, lim.MaxBytes)}
		}
	}
	if lim.MaxSenderBytes > 0 {
		if u, err := n.store.SenderUsage(m.Space, m.From); err == nil && u.Bytes+size > lim.MaxSenderBytes {
			return &errOverLimit{api.CodeQuotaExceeded, fmt.Sprintf("the space holds %d bytes from %s, the quota per sender is %d", u.Bytes, m.From, lim.MaxSenderBytes)}
		}
	}
	return nil
}

// Known reports whether author is known in space, so that gossip gives
// it an author's rate of its own rather than a share of the strangers'
// (mesh.Gate): the node itself; a peer this node trusts (its user vouched
// for it); in a private space, a member (an owner or admin let it in, so
// a peer ID that costs nothing buys no rate); otherwise an author of whom
// this node has held a message for the stranger probation.
func (s spaceSink) Known(space protocol.ID, author peer.ID) bool {
	n := s.n
	if author == n.mesh.ID() || n.trust.IsTrusted(author) {
		return true
	}
	if ps := n.private.get(space); ps != nil {
		return ps.current.Load().IsMember(author)
	}
	u, err := n.store.SenderUsage(space, author.String())
	if err != nil || u.Count == 0 {
		return false
	}
	return time.Since(time.UnixMilli(u.Since)) >= n.cfg.probation()
}

// Admit reports whether the node would store m. (mesh.Gate)
func (s spaceSink) Admit(m *protocol.Message) error { return s.n.admit(m) }

// refusal turns a message refused for its space's limits into the error
// its path answers with: a clear *Error for this node's own agents (api,
// accept), mesh.ErrDeclined for the network, where another node's
// limits may differ and the sender is not at fault.
func (n *Node) refusal(m *protocol.Message, via string, err error) error {
	var over *errOverLimit
	switch {
	case errors.As(err, &over):
	case errors.Is(err, store.ErrQuota):
		over = &errOverLimit{api.CodeQuotaExceeded, err.Error()}
	default:
		return err
	}
	if via == "api" || via == "accept" {
		msg := fmt.Sprintf("space %s: %s", m.Space, over.msg)
		if over.code == api.CodeQuotaExceeded {
			msg += " (older messages leave with the space's retention; raise the quota with weft join --max-bytes or --max-sender-bytes, or weft daemon --space-quota or --sender-quota)"
		}
		return &Error{Code: over.code, Msg: msg, Err: err}
	}
	if via == "mesh" {
		reason := over.code
		if reason == api.CodeQuotaExceeded {
			reason = "quota"
		}
		n.cfg.Metrics.MessageRejected(m.Space.String(), reason)
	}
	n.noteDeclined(m, via, over.msg)
	return fmt.Errorf("%s: %w", over.msg, mesh.ErrDeclined)
}

// noteDeclined logs, once a minute per space, that messages from the
// network were declined for the space's limits.
func (n *Node) noteDeclined(m *protocol.Message, via, why string) {
	n.declined.Lock()
	defer n.declined.Unlock()
	if n.declined.at == nil {
		n.declined.at = make(map[protocol.ID]time.Time)
		n.declined.n = make(map[protocol.ID]int)
	}
	if time.Since(n.declined.at[m.Space]) < time.Minute {
		n.declined.n[m.Space]++
		return
	}
	n.log.Warn("messages declined: over the space's limits", "space", m.Space, "via", via, "from", m.From, "why", why, "declined_since_last_log", n.declined.n[m.Space]+1)
	n.declined.at[m.Space] = time.Now()
	n.declined.n[m.Space] = 0
}

// declinedLog is noteDeclined's state.
type declinedLog struct {
	sync.Mutex
	at map[protocol.ID]time.Time
	n  map[protocol.ID]int
}

// pacer keeps this node's own posts to a space within what its peers
// allow, with room to spare, so that the jitter of the network between
// here and a peer never takes a post over a peer's bucket and honest
// nodes are never penalised (mesh.RateLimits):
//   - in a private space this node is a member, which every member knows at
//     once (see spaceSink.Known): its posts are paced at 80% of the author
//     rate and burst;
//   - in an open space a peer that has not yet held its messages for the
//     stranger probation (one that joined later, or restarted with a new
//     store) counts it among the strangers, who share one bucket, and
//     penalises it for going over that: its posts are paced at the lower of
//     80% of the author rate and 40% of the strangers' (leaving the rest to
//     other new authors), with half the strangers' burst. Pacing by the
//     author rate there once this node thinks itself known would get it
//     graylisted by any peer that does not know it yet.
//
// Posts take their turns in the order they ask (a reservation each, as
// in the generic cell rate algorithm), so that concurrent agents of one
// space share its pace fairly: a post whose turn is more than paceWait
// away fails at once, without waiting, with rate_limited: its agent is
// posting faster than the space takes.
type pacer struct {
	member   rate.Rate // private spaces
	stranger rate.Rate // open spaces
	private  func(space protocol.ID) bool

	mu   sync.Mutex
	next map[protocol.ID]time.Time // per space, when its pace is next free (see wait)
}

// paceWait is how long a post may wait for its turn.
const paceWait = 2 * time.Second

// maxPaced bounds the spaces whose turns are kept; those long free are
// forgotten first.
const maxPaced = 1 << 12

// newPacer paces below author in private spaces (those private says) and
// below both author and strangers in open ones; a zero author is no pacing.
func newPacer(author, strangers rate.Rate, private func(protocol.ID) bool) *pacer {
	var member, stranger rate.Rate
	if !author.IsZero() {
		member = rate.Rate{PerSecond: 0.8 * author.PerSecond, Burst: max(1, author.Burst*4/5)}
		stranger = member
		if !strangers.IsZero() {
			stranger = rate.Rate{
				PerSecond: min(member.PerSecond, 0.4*strangers.PerSecond),
				Burst:     max(1, min(member.Burst, strangers.Burst/2)),
			}
		}
	}
	return &pacer{member: member, stranger: stranger, private: private, next: make(map[protocol.ID]time.Time)}
}

// wait waits for a turn to post a message of size wire bytes to space
// (it takes mesh.Tokens(size)), up to paceWait.
//
// A space's pace is a virtual time next: each post moves it on by its
// tokens' worth (1/rate each) from itself or now, whichever is later, and
// may go once next is within the burst's worth of now. A post cancelled
// while it waits keeps its turn (the pace stays below the rate).
func (p *pacer) wait(ctx context.Context, space protocol.ID, size int) error {
	r := p.stranger
	if p.private(space) {
		r = p.member
	}
	if r.IsZero() {
		return nil
	}
	per := time.Duration(float64(time.Second) / r.PerSecond)
	now := time.Now()
	p.mu.Lock()
	next := p.next[space]
	if next.Before(now) {
		next = now
	}
	next = next.Add(time.Duration(mesh.Tokens(size)) * per)
	turn := next.Add(-time.Duration(r.Burst) * per)
	if d := turn.Sub(now); d > paceWait {
		p.mu.Unlock()
		return errorf(api.CodeRateLimited, "posting to space %s faster than its peers accept (this node paces its posts there at %v; this one's turn is %v away): slow down", space, r, d.Round(time.Millisecond))
	}
	if len(p.next) >= maxPaced {
		for sp, t := range p.next {
			if t.Before(now) {
				delete(p.next, sp)
			}
		}
	}
	p.next[space] = next
	p.mu.Unlock()
	d := turn.Sub(now)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
