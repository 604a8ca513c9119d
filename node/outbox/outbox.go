// Package outbox delivers direct messages durably. The caller signs a
// message and hands it to Send, which queues it in a Store and makes a first
// delivery attempt over a Transport. What is not delivered then is tried
// again when its recipient connects (PeerConnected) and on a backoff
// schedule — 1 s doubling to 1 min, each wait jittered by ±20% — until its
// deadline, when it becomes a dead letter whose reason names the last error
// and the number of attempts.
//
// A recipient's answer decides a message's fate: an ack delivers it; a
// refusal (code protocol.CodeRefused) kills it at once, since the message
// itself is bad, unless the refusal's Reason is clock_skew, as the
// recipient's clock may catch up. Any other failure — unreachable peer,
// broken stream, a recipient that could not store the message — is retried.
//
// At most one delivery attempt per recipient is in flight at a time; it
// sends up to 64 messages on one stream, and a slow recipient holds up no
// other. Time enters only through a Clock and the jitter through a random
// source (WithClock, WithRand), so the policy can be tested without
// sleeping.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// DefaultDeadline is how long the outbox tries to deliver a message that
// has no TTL (see Deadline).
const DefaultDeadline = 24 * time.Hour

// Timing and batching.
const (
	// retryMin and retryMax bound the wait between attempts (before jitter).
	retryMin = time.Second
	retryMax = time.Minute
	// dialWait bounds reaching a recipient in one delivery attempt.
	dialWait = 5 * time.Second
	// sendWait bounds how long Send waits for the first attempt.
	sendWait = 5 * time.Second
	// batch is how many messages one attempt sends to one peer.
	batch = 64
	// dueBatch is how many due messages one scan looks at.
	dueBatch = 512
	// minWait is the shortest wait between scans.
	minWait = 100 * time.Millisecond
	// pollWait is the longest the loop waits between scans.
	pollWait = 5 * time.Second
)

// Store is the durable queue the outbox works from; *store.Store
// implements it (see there for the details). Its methods may be called
// concurrently. Times are Unix milliseconds.
type Store interface {
	// Enqueue adds o unless a message with its ID is queued or dead
	// already, and reports whether it did.
	Enqueue(o store.Outgoing) (added bool, err error)
	// Pending returns up to limit messages queued for recipient to, or
	// for anyone if to is "", earliest NextTry first.
	Pending(to string, limit int) ([]store.Outgoing, error)
	// Due returns up to limit messages whose NextTry is at most now,
	// earliest first.
	Due(now int64, limit int) ([]store.Outgoing, error)
	// Delivered removes message id; one not queued is no error.
	Delivered(id protocol.ID) error
	// Retry records a failed attempt at message id: the attempts so far,
	// the next time to try and the error. An error wrapping
	// store.ErrNotFound means id is no longer queued.
	Retry(id protocol.ID, attempts int, next int64, lastErr string) error
	// Kill moves message id to the dead letters with reason, at time at.
	// An error wrapping store.ErrNotFound means id is no longer queued.
	Kill(id protocol.ID, reason string, at int64) error
}

// Transport reaches recipients. Its methods may be called concurrently.
type Transport interface {
	// Dial makes sure p can be sent to, within ctx.
	Dial(ctx context.Context, p peer.ID) error
	// Send delivers raws (message wire encodings) to p over one stream,
	// in order, calling ack for each message p answered — with nil once p
	// has stored it, or with p's refusal — from one goroutine, before it
	// returns. An error means the messages not acked may not have been
	// delivered. mesh/direct.Service.Send is one.
	Send(ctx context.Context, p peer.ID, raws [][]byte, ack func(i int, refusal *protocol.CallError)) error
}

// Outbox delivers queued direct messages. Its methods may be called
// concurrently.
type Outbox struct {
	st    Store
	tr    Transport
	log   *slog.Logger
	obs   Observer
	clock Clock
	rand  func() float64

	kick      chan struct{} // scan now
	connected chan peer.ID  // recipients that just connected
	wg        sync.WaitGroup

	mu       sync.Mutex
	inflight map[peer.ID]*slot // one delivery attempt per peer at a time
	// sending holds the messages a Send is trying to deliver at once:
	// true once any attempt (Run's, say, which may see the message as
	// soon as it is queued) has had it acknowledged. Guarded by mu.
	sending map[protocol.ID]bool
}

// slot is a peer's delivery slot: a token in ch while an attempt is in
// flight; users counts who hold it or wait for it, so that it can be
// forgotten when nobody does.
type slot struct {
	ch    chan struct{} // capacity 1
	users int
}

// New returns an outbox that delivers the messages of st over tr. Nothing
// is delivered in the background until Run is called.
func New(st Store, tr Transport, opts ...Option) (*Outbox, error) {
	if st == nil || tr == nil {
		return nil, errors.New("outbox: nil store or transport")
	}
	cfg := defaults()
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.obs == nil {
		cfg.obs = nobody{}
	}
	return &Outbox{
		st:        st,
		tr:        tr,
		obs:       cfg.obs,
		log:       cfg.log,
		clock:     cfg.clock,
		rand:      cfg.rand,
		kick:      make(chan struct{}, 1),
		connected: make(chan peer.ID, 64),
		inflight:  make(map[peer.ID]*slot),
		sending:   make(map[protocol.ID]bool),
	}, nil
}

// Deadline is when the outbox gives up on m unless told otherwise: when m
// expires if it has a TTL, else DefaultDeadline after it was created.
func Deadline(m *protocol.Message) time.Time {
	if exp, ok := m.Expiry(); ok {
		return exp
	}
	return m.Created().Add(DefaultDeadline)
}

// Send queues m, signed already, for recipient to until deadline (zero:
// Deadline(m)) and makes a first delivery attempt, waiting at most a few
// seconds (or until ctx ends) for it. It reports whether that attempt
// delivered m; if not, m stays queued and is retried (an attempt made
// meanwhile for another reason, such as PeerConnected, may deliver it). A
// message already queued or dead is not queued again. The error is the
// store's, when m could not be queued. Send works whether Run is running
// or not.
func (o *Outbox) Send(ctx context.Context, to peer.ID, m *protocol.Message, deadline time.Time) (delivered bool, err error) {
	if deadline.IsZero() {
		deadline = Deadline(m)
	}
	now := o.clock.Now().UnixMilli()
	e := store.Outgoing{
		ID: m.ID, To: to.String(), Raw: m.Wire(),
		Created: now, Deadline: deadline.UnixMilli(), NextTry: now,
	}
	o.mu.Lock()
	o.sending[m.ID] = false
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.sending, m.ID)
		o.mu.Unlock()
	}()
	if _, err := o.st.Enqueue(e); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	wctx, cancel := o.clock.WithTimeout(ctx, sendWait)
	defer cancel()
	ok := o.flush(wctx, to)[m.ID]
	o.mu.Lock()
	ok = ok || o.sending[m.ID] // delivered by another attempt meanwhile
	o.mu.Unlock()
	if !ok {
		// The loop may be asleep for up to pollWait: have it plan the
		// retry the failed attempt just scheduled.
		o.Wake()
	}
	return ok, nil
}

// Wake makes Run scan for due messages now. It does not block.
func (o *Outbox) Wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// PeerConnected tells the outbox that p just connected: what is queued for
// p is sent at once, due or not, by Run. It does not block, so a
// mesh.OnPeerConnected hook can call it.
func (o *Outbox) PeerConnected(p peer.ID) {
	select {
	case o.connected <- p:
	default:
		o.Wake() // a full scan covers it
	}
}

// Run delivers queued messages until ctx ends, then waits for the
// attempts it started to end and returns. Call it once.
func (o *Outbox) Run(ctx context.Context) {
	defer o.wg.Wait()
	stop := func() bool { return false }
	defer func() { stop() }()
	o.Wake() // a first scan at once
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-o.connected:
			if q, err := o.st.Pending(p.String(), 1); err == nil && len(q) > 0 {
				o.wg.Go(func() { o.flush(ctx, p) })
			}
			continue
		case <-o.kick:
		}
		next := o.scan(ctx)
		stop()
		stop = o.clock.AfterFunc(next, o.Wake)
	}
}

// scan starts a delivery attempt for each recipient with due messages
// that has none in flight (one slow recipient holds up no other), and
// returns how long to wait before the next scan.
func (o *Outbox) scan(ctx context.Context) time.Duration {
	now := o.clock.Now().UnixMilli()
	due, err := o.st.Due(now, dueBatch)
	if err != nil {
		if ctx.Err() == nil {
			o.log.Warn("outbox scan", "err", err)
		}
		return pollWait
	}
	peers := make(map[string]bool)
	for _, e := range due {
		peers[e.To] = true
	}
	for s := range peers {
		p, err := peer.Decode(s)
		if err != nil || !o.lock(ctx, p, false) {
			continue // in flight already
		}
		// An attempt that ended since Due may have put the retry off.
		if q, err := o.st.Pending(s, 1); err != nil || len(q) == 0 || q[0].NextTry > now {
			o.unlock(p)
			continue
		}
		o.wg.Go(func() {
			defer o.unlock(p)
			o.flushLocked(ctx, p)
		})
	}
	wait := pollWait
	if rest, err := o.st.Pending("", 1); err == nil && len(rest) == 1 {
		until := time.Duration(rest[0].NextTry-o.clock.Now().UnixMilli()) * time.Millisecond
		wait = min(wait, max(until, minWait))
	}
	return wait
}

// flush makes one delivery attempt of everything queued for p, due or not,
// once no other attempt for p is in flight (or not at all if ctx ends
// first), and returns the IDs p acknowledged.
func (o *Outbox) flush(ctx context.Context, p peer.ID) map[protocol.ID]bool {
	if !o.lock(ctx, p, true) {
		return nil
	}
	defer o.unlock(p)
	return o.flushLocked(ctx, p)
}

func (o *Outbox) flushLocked(ctx context.Context, p peer.ID) map[protocol.ID]bool {
	delivered := make(map[protocol.ID]bool)
	for {
		pending, err := o.st.Pending(p.String(), batch)
		if err != nil || len(pending) == 0 {
			return delivered
		}
		live := pending[:0]
		now := o.clock.Now()
		for _, e := range pending {
			if e.Deadline > 0 && e.Deadline <= now.UnixMilli() {
				o.kill(e, now, "deadline passed before delivery")
				continue
			}
			live = append(live, e)
		}
		if len(live) == 0 {
			continue
		}
		if !o.attempt(ctx, p, live, delivered) || len(pending) < batch {
			return delivered
		}
	}
}

// attempt sends msgs to p once, recording each outcome; it reports whether
// p was reached.
func (o *Outbox) attempt(ctx context.Context, p peer.ID, msgs []store.Outgoing, delivered map[protocol.ID]bool) bool {
	dctx, cancel := o.clock.WithTimeout(ctx, dialWait)
	err := o.tr.Dial(dctx, p)
	cancel()
	answered := make([]bool, len(msgs))
	var transient *protocol.CallError // a refusal worth retrying
	if err == nil {
		raws := make([][]byte, len(msgs))
		for i, e := range msgs {
			raws[i] = e.Raw
		}
		err = o.tr.Send(ctx, p, raws, func(i int, refusal *protocol.CallError) {
			if i < 0 || i >= len(msgs) || answered[i] {
				return
			}
			e := msgs[i]
			switch {
			case refusal == nil:
				answered[i] = true
				if err := o.st.Delivered(e.ID); err != nil {
					o.log.Warn("outbox: mark delivered", "id", e.ID, "err", err)
				}
				delivered[e.ID] = true
				o.mu.Lock()
				if _, ok := o.sending[e.ID]; ok {
					o.sending[e.ID] = true
				}
				o.mu.Unlock()
				o.obs.Delivered()
				o.log.Debug("direct message delivered", "id", e.ID, "to", p, "attempts", e.Attempts+1)
			case permanent(refusal):
				answered[i] = true
				o.kill(e, o.clock.Now(), "refused by recipient: "+refusal.Error())
			default:
				transient = refusal // retried like an unreachable peer
			}
		})
	}
	if err == nil && transient != nil {
		err = transient
	}
	o.obs.Attempt(err == nil)
	if err == nil {
		return true
	}
	now := o.clock.Now()
	for i, e := range msgs {
		if answered[i] {
			continue
		}
		next := now.Add(backoff(e.Attempts, o.rand()))
		if e.Deadline > 0 && next.UnixMilli() >= e.Deadline {
			next = time.UnixMilli(e.Deadline) // a last look at the deadline
		}
		if rerr := o.st.Retry(e.ID, e.Attempts+1, next.UnixMilli(), err.Error()); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			o.log.Warn("outbox: record retry", "id", e.ID, "err", rerr)
		}
	}
	o.log.Debug("direct message not delivered yet", "to", p, "messages", len(msgs), "err", err)
	return false
}

// kill moves e to the dead letters, with reason completed by e's last
// error and attempts.
func (o *Outbox) kill(e store.Outgoing, at time.Time, reason string) {
	if e.LastError != "" {
		reason += "; last error: " + e.LastError
	}
	reason = fmt.Sprintf("%s (after %d attempts)", reason, e.Attempts)
	if err := o.st.Kill(e.ID, reason, at.UnixMilli()); err != nil && !errors.Is(err, store.ErrNotFound) {
		o.log.Warn("outbox: dead-letter", "id", e.ID, "err", err)
		return
	}
	o.obs.DeadLettered(strings.HasPrefix(reason, "refused"))
	o.log.Info("direct message dead-lettered", "id", e.ID, "to", e.To, "reason", reason)
}

// lock takes p's delivery slot, waiting until ctx ends (wait false: not
// at all); it reports whether it did. unlock gives it back.
func (o *Outbox) lock(ctx context.Context, p peer.ID, wait bool) bool {
	o.mu.Lock()
	s := o.inflight[p]
	if s == nil {
		s = &slot{ch: make(chan struct{}, 1)}
		o.inflight[p] = s
	}
	s.users++
	o.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
		return true
	default:
	}
	if wait {
		select {
		case s.ch <- struct{}{}:
			return true
		case <-ctx.Done():
		}
	}
	o.release(p, s)
	return false
}

func (o *Outbox) unlock(p peer.ID) {
	o.mu.Lock()
	s := o.inflight[p]
	o.mu.Unlock()
	<-s.ch
	o.release(p, s)
}

// release drops a user of p's slot, forgetting the slot when it has none.
func (o *Outbox) release(p peer.ID, s *slot) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(o.inflight, p)
	}
}

// backoff is the wait after the given number of failed attempts:
// exponential from retryMin to retryMax, times 0.8 + 0.4·r for r in
// [0, 1) (±20% jitter).
func backoff(attempts int, r float64) time.Duration {
	d := retryMin << min(max(attempts, 0), 10)
	d = min(d, retryMax)
	return time.Duration(float64(d) * (0.8 + 0.4*r))
}

// clockSkew is the Reason of a refusal for a message from the future
// ("clock_skew").
var clockSkew = protocol.Code(protocol.ErrClockSkew)

// permanent reports whether a recipient's refusal will not change on a
// retry: the message itself is bad. A recipient whose clock is behind the
// sender's (Reason clock_skew) may take it later, and one that failed
// otherwise (code internal: it could not store the message) is retried like
// an unreachable one. The decision reads codes, never the refusal's text.
func permanent(refusal *protocol.CallError) bool {
	return refusal.Code == protocol.CodeRefused && refusal.Reason != clockSkew
}
