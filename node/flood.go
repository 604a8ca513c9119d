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

// paceRate is the author rate this node's own posts are paced below:
// none when the rate limits are off (no peer would ignore them).
func (c Config) paceRate() rate.Rate {
	r := c.rates()
	if r.Off {
		return rate.Rate{}
	}
	return r.Author
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
	size := int64(len(m.Encode()))
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

// Known reports whether author has been a member of space for the
// stranger probation: this node has held a message of it since then. The
// node itself is always known. (mesh.Gate)
func (s spaceSink) Known(space protocol.ID, author peer.ID) bool {
	n := s.n
	if author == n.mesh.ID() {
		return true
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

// pacer keeps this node's own posts to a space within the rate its peers
// allow an author (mesh.RateLimits.Author, tokens per message as there),
// with room to spare: 80% of the
// rate and of the burst, so that the jitter of the network between here
// and a peer never takes a post over the peer's bucket. A post waits for
// its turn up to paceWait, then fails: its agent is posting faster than
// the space takes.
type pacer struct {
	mu      sync.Mutex
	r       rate.Rate
	buckets *rate.Table[protocol.ID]
}

// paceWait is how long a post may wait for its turn.
const paceWait = 2 * time.Second

func newPacer(author rate.Rate) *pacer {
	r := rate.Rate{}
	if !author.IsZero() {
		r = rate.Rate{PerSecond: 0.8 * author.PerSecond, Burst: max(1, author.Burst*4/5)}
	}
	return &pacer{r: r, buckets: rate.NewTable[protocol.ID](r, 1<<12)}
}

// wait waits for a turn to post a message of size wire bytes to space
// (it takes mesh.Tokens(size)), up to paceWait.
func (p *pacer) wait(ctx context.Context, space protocol.ID, size int) error {
	if p.r.IsZero() {
		return nil
	}
	deadline := time.Now().Add(paceWait)
	for {
		p.mu.Lock()
		ok := p.buckets.TakeN(space, time.Now(), mesh.Tokens(size))
		p.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errorf(api.CodeRateLimited, "posting to space %s faster than its peers accept (%v for one author, this node paces at %v): slow down", space, rate.Rate{PerSecond: p.r.PerSecond / 0.8, Burst: p.r.Burst * 5 / 4}, p.r)
		}
		t := time.NewTimer(min(time.Duration(float64(time.Second)/p.r.PerSecond), time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
