package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node/outbox"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/iacp"
	"github.com/weftmesh/weft/store"
)

// dialWait bounds reaching a peer for a call, a card or a health check.
const dialWait = 5 * time.Second

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
	m, err := n.signer.Sign(d, n.cfg.Limits)
	if err != nil {
		return Sent{}, err
	}
	deadline := outbox.Deadline(m)
	ctx, span := n.messageSpan(ctx, "send", "dm", m)
	span.SetAttributes(attribute.String("weft.to", to.String()))
	delivered, err := n.outbox.Send(ctx, to, m, deadline)
	if err != nil {
		endSpan(span, err)
		return Sent{}, fmt.Errorf("outbox: %w", err)
	}
	span.SetAttributes(attribute.Bool("weft.delivered", delivered))
	endSpan(span, nil)
	n.cfg.Metrics.DMSent(delivered)
	return Sent{Message: m, Deadline: deadline, Delivered: delivered}, nil
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

// Sent returns up to limit direct messages that were delivered, oldest
// first, after a cursor, and the cursor to continue from. The store keeps
// the last store.SentMax delivered within store.SentMaxAge.
func (n *Node) Sent(after store.Cursor, limit int) ([]store.SentMessage, store.Cursor, error) {
	return n.store.Sent(after, limit)
}

// DeadLetters returns up to limit direct messages that were given up on,
// after a cursor, and the cursor to continue from.
func (n *Node) DeadLetters(after store.Cursor, limit int) ([]store.DeadLetter, store.Cursor, error) {
	return n.store.DeadLetters(after, limit)
}

// CancelOutgoing gives up a direct message waiting in the outbox: it is
// not sent again, and becomes a dead letter with reason "cancelled". One
// being sent at this moment may still arrive.
func (n *Node) CancelOutgoing(id protocol.ID) error {
	return notFound(n.store.Kill(id, "cancelled", 0), api.CodeNotFound, "no direct message "+id.String()+" waiting in the outbox")
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

// dmTransport is the network as the outbox sees it: dial a peer, then
// send direct messages to it.
type dmTransport struct{ n *Node }

func (t dmTransport) Dial(ctx context.Context, p peer.ID) error { return t.n.mesh.Dial(ctx, p) }

func (t dmTransport) Send(ctx context.Context, p peer.ID, raws [][]byte, ack func(int, *protocol.CallError)) error {
	return t.n.direct.Send(ctx, p, raws, ack)
}
