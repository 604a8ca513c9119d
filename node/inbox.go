package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// The inbox takes direct messages under the DM policy (Config.DM): from
// trusted peers always; from strangers, if the policy is "anyone", within
// a rate and a quota of messages held per stranger and for all strangers.
// The quotas bound what strangers hold, so the inbox is exempt from the
// count retention (Config.Retention.MaxCount, --keep-count): a flood from
// strangers can never evict a trusted peer's message. Age retention and
// TTLs apply to everyone.

// recountEvery bounds how often a refusal for quota recounts the inbox,
// to give back the room of messages removed since (expired, too old).
const recountEvery = 10 * time.Second

// inboxCount serializes recounts of the inbox.
type inboxCount struct {
	mu   sync.Mutex
	last time.Time
}

// receiveDM stores a direct message, valid and addressed to this node, if
// the DM policy admits it; a refusal is a *protocol.CallError the sender
// gets in its ack.
func (n *Node) receiveDM(ctx context.Context, m *protocol.Message) (err error) {
	ctx, span := n.messageSpan(ctx, "process", "dm", m)
	result := "accepted"
	defer func() {
		if err != nil && result == "accepted" {
			result = "error"
		}
		span.SetAttributes(attribute.String("weft.result", result))
		endSpan(span, err)
		n.cfg.Metrics.DMReceived(result)
	}()
	from := m.Sender()
	trusted := n.trust.IsTrusted(from)
	v := n.gate.Admit(from, trusted, time.Now())
	if v == policy.OverQuota && n.recountDue() {
		if err := n.recountInbox(ctx); err != nil {
			n.log.Warn("recount the inbox", "err", err)
		}
		v = n.gate.Admit(from, trusted, time.Now())
	}
	if v != policy.Accept {
		// A message held already (its ack was lost) is acknowledged again.
		if held, err := n.store.Has(m.ID); err == nil && held {
			return nil
		}
		n.log.Debug("direct message refused", "from", from, "id", m.ID, "verdict", v)
		refusal := n.dmRefusal(from, v)
		result = refusal.Reason
		return refusal
	}
	_, added, err := n.ingest(ctx, m, "direct")
	if !trusted && (err != nil || !added) {
		n.gate.Release(from)
	}
	return err
}

// dmRefusal is what a refused sender is told. A forbidden message is
// refused for good (code refused: the sender's outbox dead-letters it); one
// over a rate or a quota is overloaded, which the sender's outbox retries.
// The Reason is the verdict ("forbidden", "rate_limited", "quota"), also
// the first word of the message.
func (n *Node) dmRefusal(from peer.ID, v policy.Verdict) *protocol.CallError {
	c := n.gate.Config()
	var e *protocol.CallError
	switch v {
	case policy.Forbidden:
		e = protocol.Errorf(protocol.CodeRefused, "forbidden: this node takes direct messages from trusted peers only")
	case policy.RateLimited:
		e = protocol.Errorf(protocol.CodeOverloaded, "rate_limited: a peer this node does not trust may send %g messages a second (bursts of %d), and all of them together %g; retry later", c.Rate, c.Burst, c.AllRate)
	default:
		mine, all := n.gate.Held(from)
		e = protocol.Errorf(protocol.CodeOverloaded, "quota: the inbox holds %d messages from you (at most %d from a peer it does not trust) and %d from all such peers (at most %d); retry later", mine, c.Quota, all, c.AllQuota)
	}
	e.Reason = v.String()
	return e
}

// recountDue reports whether the last recount is older than recountEvery.
func (n *Node) recountDue() bool {
	n.inboxCount.mu.Lock()
	defer n.inboxCount.mu.Unlock()
	return time.Since(n.inboxCount.last) >= recountEvery
}

// recountInbox counts the messages each stranger holds in the inbox and
// hands the counts to the gate.
func (n *Node) recountInbox(ctx context.Context) error {
	n.inboxCount.mu.Lock()
	defer n.inboxCount.mu.Unlock()
	held := make(map[peer.ID]int)
	inbox := n.Inbox()
	var after store.Cursor
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, next, err := n.store.Read(inbox, after, 1000)
		if err != nil {
			return err
		}
		for _, e := range page {
			m, err := protocol.Decode(e.Raw, protocol.StoredLimits())
			if err != nil {
				return fmt.Errorf("stored message %s: %w", e.ID, err)
			}
			if from := m.Sender(); !n.trust.IsTrusted(from) {
				held[from]++
			}
		}
		if next == after {
			break
		}
		after = next
	}
	n.gate.SetHeld(held)
	n.inboxCount.last = time.Now()
	return nil
}
