package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/iacp"
	"github.com/weftmesh/weft/store"
)

// Outbox timing.
const (
	// DefaultDMDeadline is how long the outbox retries a direct message
	// that has no TTL.
	DefaultDMDeadline = 24 * time.Hour
	retryMin          = time.Second
	retryMax          = time.Minute
	// dialWait bounds reaching a recipient in one delivery attempt.
	dialWait = 5 * time.Second
	// sendWait bounds how long POST /v1/dm waits for the first attempt.
	sendWait = 5 * time.Second
	// outboxBatch is how many messages one attempt sends to one peer.
	outboxBatch = 64
	// outboxDue is how many due messages one scan looks at.
	outboxDue = 512
	// outboxMinWait is the shortest wait between scans.
	outboxMinWait = 100 * time.Millisecond
	// outboxPoll is the longest the outbox loop sleeps between scans.
	outboxPoll = 5 * time.Second
)

// DM is a direct message an agent sends: the daemon adds the sender and
// the time, signs it and queues it in the outbox.
type DM struct {
	To      peer.ID
	Kind    string // request, response, event (default), error, heartbeat
	Content json.RawMessage
	ReplyTo protocol.ID // zero: none; replying inherits the message's trace, session and correlation
	TTL     time.Duration
	Meta    map[string]string
}

// Sent is a direct message in the outbox: delivered, or queued until its
// deadline.
type Sent struct {
	*protocol.Message
	Deadline  time.Time
	Delivered bool // acknowledged by the recipient within the first attempt
}

// DM signs a direct message, puts it in the durable outbox and tries to
// deliver it at once. Sent says whether the recipient acknowledged it
// within a few seconds; otherwise it stays queued and is retried until its
// deadline.
func (n *Node) DM(ctx context.Context, dm DM) (Sent, error) {
	if dm.To == "" || dm.To.Validate() != nil {
		return Sent{}, errorf(api.CodeBadPeer, "to: %q is not a peer ID", dm.To)
	}
	if dm.To == n.mesh.ID() {
		return Sent{}, errorf(api.CodeBadPeer, "to: that is this node")
	}
	d, err := n.dmDraft(dm)
	if err != nil {
		return Sent{}, err
	}
	return n.sendDirect(ctx, dm.To, d)
}

// DMIACP sends an IACP 1.x envelope as a direct message: it is imported
// (its message_id kept as meta iacp.id), signed by this node and sent like
// DM.
func (n *Node) DMIACP(ctx context.Context, envelope []byte) (Sent, error) {
	imp, err := iacp.Import(envelope)
	if err != nil {
		return Sent{}, err
	}
	if imp.Recipient == n.mesh.ID() {
		return Sent{}, errorf(api.CodeBadPeer, "recipient: that is this node")
	}
	return n.sendDirect(ctx, imp.Recipient, imp.Draft)
}

// ExportIACP returns a stored direct message as an IACP 1.x envelope.
func (n *Node) ExportIACP(id protocol.ID) ([]byte, error) {
	m, err := n.Get(id)
	if err != nil {
		return nil, err
	}
	b, err := iacp.Export(m.Message)
	if err != nil {
		return nil, errorf(api.CodeInvalid, "not exportable as IACP (only direct messages are): %v", err)
	}
	return b, nil
}

// sendDirect signs d, puts it in the outbox and makes a first delivery
// attempt.
func (n *Node) sendDirect(ctx context.Context, to peer.ID, d protocol.Draft) (Sent, error) {
	m, err := protocol.Sign(n.key, d, n.cfg.Limits)
	if err != nil {
		return Sent{}, err
	}
	deadline := d.CreatedAt.Add(DefaultDMDeadline)
	if exp, ok := m.Expiry(); ok {
		deadline = exp
	}
	o := store.Outgoing{
		ID: m.ID, To: to.String(), Raw: m.Encode(),
		Created: time.Now().UnixMilli(), Deadline: deadline.UnixMilli(), NextTry: time.Now().UnixMilli(),
	}
	if _, err := n.store.Enqueue(o); err != nil {
		return Sent{}, fmt.Errorf("outbox: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, sendWait)
	defer cancel()
	delivered := n.outbox.flush(wctx, to)
	if !delivered[m.ID] {
		// The loop may be asleep for up to outboxPoll: have it plan the
		// retry the failed attempt just scheduled.
		n.outbox.wake()
	}
	return Sent{Message: m, Deadline: deadline, Delivered: delivered[m.ID]}, nil
}

// dmDraft turns a DM into a draft direct message.
func (n *Node) dmDraft(dm DM) (protocol.Draft, error) {
	if err := checkContent(dm.Content, dm.TTL, dm.Meta); err != nil {
		return protocol.Draft{}, err
	}
	kind := cmp.Or(dm.Kind, protocol.KindEvent)
	if !protocol.IsKind(kind) {
		return protocol.Draft{}, errorf(api.CodeInvalid, "kind %q is not one of %v", kind, protocol.Kinds)
	}
	d := protocol.Draft{
		Space:     protocol.InboxSpace(dm.To),
		CreatedAt: time.Now(),
		Refs:      protocol.Refs{Nodes: []string{dm.To.String()}},
		Type:      kind,
		TTL:       dm.TTL,
		Content:   dm.Content,
	}
	var parent map[string]string
	if !dm.ReplyTo.IsZero() {
		d.Refs.Messages = []protocol.ID{dm.ReplyTo}
		// Answering a message in the inbox: inherit its trace, session
		// and correlation (its ID when it carried none).
		if pm, err := n.Get(dm.ReplyTo); err == nil && pm.Space == n.Inbox() {
			parent = pm.Meta
			if parent[protocol.MetaCorrelation] == "" {
				parent = cloneMeta(parent)
				parent[protocol.MetaCorrelation] = pm.ID.String()
			}
		}
	}
	d.Meta = protocol.Inherit(parent, protocol.StripLocal(dm.Meta), false)
	if kind == protocol.KindRequest && d.Meta[protocol.MetaCorrelation] == "" {
		d.Meta = cloneMeta(d.Meta)
		d.Meta[protocol.MetaCorrelation] = newCorrelation()
	}
	return d, nil
}

// Outbox returns up to limit queued direct messages, to one peer or ("")
// to all.
func (n *Node) Outbox(to string, limit int) ([]store.Outgoing, error) {
	return n.store.Pending(to, limit)
}

// DeadLetters returns up to limit direct messages that were given up on,
// after a cursor, and the cursor to continue from.
func (n *Node) DeadLetters(after store.Cursor, limit int) ([]store.DeadLetter, store.Cursor, error) {
	return n.store.DeadLetters(after, limit)
}

// DeleteDeadLetter removes a dead letter.
func (n *Node) DeleteDeadLetter(id protocol.ID) error {
	return notFound(n.store.DeleteDeadLetter(id), api.CodeNotFound, "no dead letter "+id.String())
}

func cloneMeta(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// newCorrelation returns a random correlation ID.
func newCorrelation() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// outbox delivers queued direct messages: at once when sent, when the
// recipient connects, and on a backoff schedule until their deadline,
// after which they move to the dead letters.
type outbox struct {
	n         *Node
	kick      chan struct{}
	connected chan peer.ID // recipients that just connected

	mu       sync.Mutex
	inflight map[peer.ID]chan struct{} // one delivery attempt per peer at a time (capacity 1)
	wg       sync.WaitGroup            // flushes started by scan
}

func newOutbox(n *Node) *outbox {
	return &outbox{
		n:         n,
		kick:      make(chan struct{}, 1),
		connected: make(chan peer.ID, 64),
		inflight:  make(map[peer.ID]chan struct{}),
	}
}

// lock takes p's delivery slot, waiting until ctx ends (wait false: not
// at all); it reports whether it did. unlock gives it back.
func (o *outbox) lock(ctx context.Context, p peer.ID, wait bool) bool {
	o.mu.Lock()
	l, ok := o.inflight[p]
	if !ok {
		l = make(chan struct{}, 1)
		o.inflight[p] = l
	}
	o.mu.Unlock()
	if !wait {
		select {
		case l <- struct{}{}:
			return true
		default:
			return false
		}
	}
	select {
	case l <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (o *outbox) unlock(p peer.ID) {
	o.mu.Lock()
	l := o.inflight[p]
	o.mu.Unlock()
	<-l
}

// wake makes the loop scan now.
func (o *outbox) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// peerConnected is a mesh.OnPeerConnected hook: a recipient that connects
// gets its queued messages at once. It does not block.
func (o *outbox) peerConnected(p peer.ID, _ []ma.Multiaddr) {
	select {
	case o.connected <- p:
	default:
		o.wake() // a full scan covers it
	}
}

// run delivers due messages until ctx ends.
func (o *outbox) run(ctx context.Context) {
	defer o.wg.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-o.connected:
			if q, err := o.n.store.Pending(p.String(), 1); err == nil && len(q) > 0 {
				o.wg.Go(func() { o.flush(ctx, p) })
			}
			continue
		case <-t.C:
		case <-o.kick:
		}
		next := o.scan(ctx)
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// scan starts a delivery attempt for each recipient with due messages
// that has none in flight (one slow recipient holds up no other), and
// returns how long to wait before the next scan.
func (o *outbox) scan(ctx context.Context) time.Duration {
	now := time.Now().UnixMilli()
	due, err := o.n.store.Due(now, outboxDue)
	if err != nil {
		if ctx.Err() == nil {
			o.n.log.Warn("outbox scan", "err", err)
		}
		return outboxPoll
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
		o.wg.Go(func() {
			defer o.unlock(p)
			o.flushLocked(ctx, p)
		})
	}
	wait := outboxPoll
	if rest, err := o.n.store.Pending("", 1); err == nil && len(rest) == 1 {
		wait = min(wait, max(time.Duration(rest[0].NextTry-time.Now().UnixMilli())*time.Millisecond, outboxMinWait))
	}
	return wait
}

// flush makes one delivery attempt of everything queued for p, due or not,
// once no other attempt for p is in flight (or not at all if ctx ends
// first), and returns the IDs p acknowledged.
func (o *outbox) flush(ctx context.Context, p peer.ID) map[protocol.ID]bool {
	if !o.lock(ctx, p, true) {
		return nil
	}
	defer o.unlock(p)
	return o.flushLocked(ctx, p)
}

func (o *outbox) flushLocked(ctx context.Context, p peer.ID) map[protocol.ID]bool {
	delivered := make(map[protocol.ID]bool)
	for {
		pending, err := o.n.store.Pending(p.String(), outboxBatch)
		if err != nil || len(pending) == 0 {
			return delivered
		}
		live := pending[:0]
		now := time.Now()
		for _, e := range pending {
			if e.Deadline <= now.UnixMilli() {
				o.kill(e, now, "deadline passed before delivery")
				continue
			}
			live = append(live, e)
		}
		if len(live) == 0 {
			continue
		}
		if !o.attempt(ctx, p, live, delivered) || len(pending) < outboxBatch {
			return delivered
		}
	}
}

// attempt sends msgs to p once, recording each outcome; it reports whether
// p was reached.
func (o *outbox) attempt(ctx context.Context, p peer.ID, msgs []store.Outgoing, delivered map[protocol.ID]bool) bool {
	n := o.n
	dctx, cancel := context.WithTimeout(ctx, dialWait)
	err := n.mesh.Dial(dctx, p)
	cancel()
	answered := make([]bool, len(msgs))
	var transient *protocol.CallError // a refusal worth retrying
	if err == nil {
		raws := make([][]byte, len(msgs))
		for i, e := range msgs {
			raws[i] = e.Raw
		}
		err = n.direct.Send(ctx, p, raws, func(i int, refusal *protocol.CallError) {
			answered[i] = true
			e := msgs[i]
			if refusal != nil {
				if !permanent(refusal) {
					answered[i] = false // retried like an unreachable peer
					transient = refusal
					return
				}
				o.kill(e, time.Now(), "refused by recipient: "+refusal.Error())
				return
			}
			if err := n.store.Delivered(e.ID); err != nil {
				n.log.Warn("outbox: mark delivered", "id", e.ID, "err", err)
			}
			delivered[e.ID] = true
			n.log.Debug("direct message delivered", "id", e.ID, "to", p, "attempts", e.Attempts+1)
		})
	}
	if err == nil && transient != nil {
		err = transient
	}
	if err == nil {
		return true
	}
	now := time.Now()
	for i, e := range msgs {
		if answered[i] {
			continue
		}
		next := now.Add(backoff(e.Attempts))
		if next.UnixMilli() >= e.Deadline {
			next = time.UnixMilli(e.Deadline) // a last look at the deadline
		}
		if rerr := n.store.Retry(e.ID, e.Attempts+1, next.UnixMilli(), err.Error()); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			n.log.Warn("outbox: record retry", "id", e.ID, "err", rerr)
		}
	}
	n.log.Debug("direct message not delivered yet", "to", p, "messages", len(msgs), "err", err)
	return false
}

func (o *outbox) kill(e store.Outgoing, at time.Time, reason string) {
	if e.LastError != "" {
		reason += "; last error: " + e.LastError
	}
	reason = fmt.Sprintf("%s (after %d attempts)", reason, e.Attempts)
	if err := o.n.store.Kill(e.ID, reason, at.UnixMilli()); err != nil && !errors.Is(err, store.ErrNotFound) {
		o.n.log.Warn("outbox: dead-letter", "id", e.ID, "err", err)
		return
	}
	o.n.log.Info("direct message dead-lettered", "id", e.ID, "to", e.To, "reason", reason)
}

// backoff is the wait after the given number of failed attempts:
// exponential from retryMin to retryMax, with ±20% jitter.
func backoff(attempts int) time.Duration {
	d := retryMin << min(attempts, 10)
	d = min(d, retryMax)
	return time.Duration(float64(d) * (0.8 + 0.4*mrand.Float64()))
}

// permanent reports whether a recipient's refusal will not change on a
// retry: the message itself is bad. A recipient that could not store it,
// or whose clock is behind the sender's, may take it later.
func permanent(refusal *protocol.CallError) bool {
	return refusal.Code == protocol.CodeRefused && !strings.HasPrefix(refusal.Message, "clock_skew")
}
