package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// The store serves a sync session's messages in one read each exchange.
var _ reconcile.WireBatcher = (*store.Store)(nil)

// Every message this node stores, whether sent here, gossiped, fetched by
// sync or received directly, goes through ingest: validated once on its
// way in (by the API's Sign, the gossip validator, the sync session or
// the direct protocol), then stored with the exact wire bytes it arrived
// in, never encoded again.

// spaceSink is the node as the mesh's Sink: messages of joined spaces from
// gossip and sync.
type spaceSink struct{ n *Node }

func (s spaceSink) Deliver(ctx context.Context, m *protocol.Message) error {
	n := s.n
	if again := n.recent.put(m); again { // before the store wakes its followers (recent.go)
		// Received before (gossip and sync may race): most likely
		// stored already, which a lookup tells without a transaction.
		if has, err := n.store.Has(m.ID); err == nil && has {
			return nil
		}
	}
	if n.private.get(m.Space) != nil {
		return s.deliverOne(ctx, m)
	}
	// An open space's message is stored with others received meanwhile
	// (group.go), as DeliverBatch stores a sync exchange's.
	return n.group.put(ctx, m, s.DeliverBatch)
}

// DeliverGossip is Deliver for the messages gossip brought meanwhile
// (mesh.GossipBatchSink): they are one group already, stored through
// DeliverBatch at once rather than queued for the group commit one by one.
func (s spaceSink) DeliverGossip(ctx context.Context, ms []*protocol.Message) []error {
	n := s.n
	errs := make([]error, len(ms))
	pass := make([]*protocol.Message, 0, len(ms))
	at := make([]int, 0, len(ms))
	for i, m := range ms {
		if again := n.recent.put(m); again { // as Deliver
			if has, err := n.store.Has(m.ID); err == nil && has {
				continue
			}
		}
		pass, at = append(pass, m), append(at, i)
	}
	if len(pass) == 0 {
		return errs
	}
	berrs := s.DeliverBatch(ctx, pass)
	for k, i := range at {
		errs[i] = errNotCommitted
		if len(berrs) == len(pass) {
			errs[i] = berrs[k]
		}
	}
	return errs
}

var _ mesh.GossipBatchSink = spaceSink{}

// deliverOne is Deliver for a message stored on its own: a private
// space's, whose acceptance depends on those accepted before it.
func (s spaceSink) deliverOne(ctx context.Context, m *protocol.Message) error {
	ctx, span := s.n.messageSpan(ctx, "process", s.n.spaceLabel(m.Space), m)
	_, added, err := s.n.ingest(ctx, m, "mesh")
	span.SetAttributes(attribute.Bool("weft.new", added))
	endSpan(span, err)
	if added {
		s.n.cfg.Metrics.MessageReceived(m.Space.String())
	}
	return err
}

// DeliverBatch is Deliver for the messages of a sync exchange
// (reconcile.BatchSink), parents first as far as created_at tells: each is
// checked as Deliver checks it, and those of open spaces within their
// space's limits are stored in one batch (store.PutBatch) rather than a
// transaction each. A private space's are decided in order, since
// whether one is accepted depends on those accepted before it, and
// stored in batches too (see ingestPrivateBatch).
func (s spaceSink) DeliverBatch(ctx context.Context, ms []*protocol.Message) []error {
	n := s.n
	errs := make([]error, len(ms))
	spans := make([]trace.Span, len(ms))
	bySpace := make(map[protocol.ID][]int)
	for i := 0; i < len(ms); i++ {
		m := ms[i]
		if ps := n.private.get(m.Space); ps != nil {
			// A run of one private space's messages: in order, in one
			// batch (ingestPrivateBatch).
			j := i + 1
			for j < len(ms) && ms[j].Space == m.Space {
				j++
			}
			n.ingestPrivateBatch(ctx, ps, ms[i:j], errs[i:j])
			i = j - 1
			continue
		}
		_, spans[i] = n.messageSpan(ctx, "process", n.spaceLabel(m.Space), m)
		if err := n.admitLimits(m); err != nil {
			if has, _ := n.store.Has(m.ID); !has {
				errs[i] = n.refusal(m, "mesh", err)
			}
			continue
		}
		bySpace[m.Space] = append(bySpace[m.Space], i)
	}
	for space, idx := range bySpace {
		batch := make([]store.Message, len(idx))
		for k, i := range idx {
			batch[k] = storeMessage(ms[i])
		}
		lim := n.limitsOf(space)
		res, err := n.store.PutBatch(ctx, batch, store.Quota{SpaceBytes: lim.MaxBytes, SenderBytes: lim.MaxSenderBytes})
		if err != nil {
			n.log.Warn("store messages", "via", "mesh", "space", space, "count", len(idx), "err", err)
			for _, i := range idx {
				errs[i] = fmt.Errorf("store: %w", err)
			}
			continue
		}
		for k, r := range res {
			i := idx[k]
			m := ms[i]
			switch {
			case errors.Is(r.Err, store.ErrQuota):
				errs[i] = n.refusal(m, "mesh", r.Err)
			case r.Err != nil:
				errs[i] = fmt.Errorf("store: %w", r.Err)
			case r.Added:
				n.cfg.Metrics.MessageReceived(space.String())
				n.log.Debug("message stored", "via", "mesh", "id", m.ID, "space", m.Space, "from", m.From, "type", m.Type)
			}
			spans[i].SetAttributes(attribute.Bool("weft.new", r.Added))
		}
	}
	for i, span := range spans {
		if span != nil {
			endSpan(span, errs[i])
		}
	}
	return errs
}

// inboxSink is the node as the direct protocol's Inbox: direct messages
// addressed to this node, admitted by its DM policy (see receiveDM).
type inboxSink struct{ n *Node }

func (s inboxSink) Receive(ctx context.Context, m *protocol.Message) error {
	return s.n.receiveDM(ctx, m)
}

// ingest stores a valid message (durably unless relayed(via)), within its space's limits (see
// flood.go), and reports whether it was new. A message over them is not
// stored: this node's agents get an *Error saying so, the network
// mesh.ErrDeclined.
func (n *Node) ingest(ctx context.Context, m *protocol.Message, via string) (store.Entry, bool, error) {
	return n.ingestThen(ctx, m, via, nil)
}

// ingestThen is ingest that calls committed, if not nil, as soon as a
// durable message of an open space is committed and before it is on disk
// (see store.PutWithinThen); committed must be quick. It is not called
// for a private space's message, nor when the message is not stored.
func (n *Node) ingestThen(ctx context.Context, m *protocol.Message, via string, committed func()) (store.Entry, bool, error) {
	if s := n.private.get(m.Space); s != nil {
		return n.ingestPrivate(ctx, s, m, via) // checks membership, then put
	}
	return n.putThen(ctx, m, via, committed)
}

// put is ingest once a message is authorized (all of an open space's are).
func (n *Node) put(ctx context.Context, m *protocol.Message, via string) (store.Entry, bool, error) {
	return n.putThen(ctx, m, via, nil)
}

// putThen is put with ingestThen's committed.
func (n *Node) putThen(ctx context.Context, m *protocol.Message, via string, committed func()) (store.Entry, bool, error) {
	if err := n.admitLimits(m); err != nil {
		if has, _ := n.store.Has(m.ID); has {
			return n.stored(m.ID)
		}
		return store.Entry{}, false, n.refusal(m, via, err)
	}
	lim := n.limitsOf(m.Space)
	putWithin := n.store.PutWithin
	switch {
	case relayed(via):
		putWithin = n.store.PutRelayed
	case committed != nil:
		putWithin = func(ctx context.Context, m store.Message, q store.Quota) (store.Entry, bool, error) {
			return n.store.PutWithinThen(ctx, m, q, committed)
		}
	}
	e, added, err := putWithin(ctx, storeMessage(m), store.Quota{SpaceBytes: lim.MaxBytes, SenderBytes: lim.MaxSenderBytes})
	if errors.Is(err, store.ErrQuota) {
		return e, false, n.refusal(m, via, err)
	}
	if err != nil {
		if via != "api" {
			n.log.Warn("store message", "via", via, "id", m.ID, "err", err)
		}
		return e, false, fmt.Errorf("store: %w", err)
	}
	if added && via != "api" {
		n.log.Debug("message stored", "via", via, "id", m.ID, "space", m.Space, "from", m.From, "type", m.Type)
	}
	return e, added, nil
}

// relayed reports whether a message that came in via is one peers can
// send again (gossip, sync, a private space's message held for its
// parents): it is stored without waiting for the disk, which it reaches
// within the store's SyncInterval. Everything else (this node's agents'
// sends, imports, direct messages, which the sender stops retrying once
// acknowledged) is on disk before ingest returns.
func relayed(via string) bool { return via == "mesh" || via == "held" }

// stored returns the entry of a message already stored, as Put would.
func (n *Node) stored(id protocol.ID) (store.Entry, bool, error) {
	e, err := n.store.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		// Expired: stored, not shown. Nothing to add.
		return store.Entry{}, false, nil
	}
	return e, false, err
}

func storeMessage(m *protocol.Message) store.Message {
	sm := store.Message{
		ID:      m.ID,
		Space:   m.Space,
		Prev:    m.Prev,
		ReplyTo: m.Refs.Messages,
		Time:    m.CreatedAt,
		Raw:     m.Wire(), // the bytes it was signed or received as, not encoded again
		From:    m.From,   // for the quota per sender
	}
	if exp, ok := m.Expiry(); ok {
		sm.Expires = exp.UnixMilli()
	}
	return sm
}

// Message is a stored message with its position in this node's order of
// its space.
type Message struct {
	*protocol.Message
	Cursor store.Cursor
}

// decodeStored reads back a stored entry. It was validated when it was
// accepted, under the limits configured then, so it is read under the
// widest limits: raising or lowering them never makes history unreadable.
func decodeStored(e store.Entry) (Message, error) {
	m, err := protocol.Decode(e.Raw, protocol.StoredLimits())
	if err != nil {
		return Message{}, fmt.Errorf("stored message %s: %w", e.ID, err)
	}
	return Message{Message: m, Cursor: e.Cursor}, nil
}

// Accept stores a message signed elsewhere (an import, a bridge, a test)
// after checking it as a message from the network is checked. Unlike Send
// it does not publish it: peers get it by sync. It reports whether the
// message was new.
func (n *Node) Accept(ctx context.Context, m *protocol.Message) (Message, bool, error) {
	if err := m.Verify(time.Now(), n.cfg.Limits); err != nil {
		return Message{}, false, err
	}
	e, added, err := n.ingest(ctx, m, "accept")
	if err != nil {
		return Message{}, false, err
	}
	return Message{Message: m, Cursor: e.Cursor}, added, nil
}
