package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/protocol/api"
)

// The outbox tool: what became of the direct messages this node sent.
// A dm answers "queued" when the recipient is unreachable; the daemon
// keeps trying until the message's TTL, and the model needs a way to
// learn, later, whether it arrived or why not.

// Outbox states a model asks for.
const (
	boxQueued    = "queued"    // waiting for delivery (GET /v1/outbox)
	boxDelivered = "delivered" // acknowledged by the recipient (GET /v1/sent)
	boxDead      = "dead"      // given up: expired, refused or cancelled (GET /v1/deadletters)
)

type outboxArgs struct {
	State string  `json:"state,omitempty" jsonschema:"queued (waiting for delivery; the default), delivered (acknowledged by the recipient: the last 1,000 within 7 days) or dead (not delivered: expired, refused or cancelled, with the reason)"`
	To    string  `json:"to,omitempty" jsonschema:"queued only: just the messages to this peer ID"`
	After string  `json:"after,omitempty" jsonschema:"delivered and dead: the next cursor of a previous answer; omit to start at the oldest"`
	Limit integer `json:"limit,omitempty" jsonschema:"delivered and dead: most messages to return (default 50, at most 1000)"`
}

// outgoing is a direct message this node sent, as the outbox tool shows
// it.
type outgoing struct {
	ID          string    `json:"id"`
	To          string    `json:"to"`
	Kind        string    `json:"kind,omitempty"`
	Created     time.Time `json:"created"`
	Deadline    time.Time `json:"deadline,omitzero"`
	Attempts    int       `json:"attempts"`
	NextTry     time.Time `json:"next_try,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	DeadAt      time.Time `json:"dead_at,omitzero"`
	// Content is the message's content: queued and dead messages only (the
	// sent log keeps no content).
	Content json.RawMessage `json:"content,omitempty"`
	// ContentOmitted: the answer was full; read the message another way
	// (weft outbox, or ask with a smaller limit).
	ContentOmitted bool `json:"content_omitted,omitempty"`
}

type outboxPage struct {
	State    string     `json:"state"`
	Messages []outgoing `json:"messages"`
	// Next continues a delivered or dead listing (pass it as after); empty
	// when there is nothing more yet.
	Next string `json:"next,omitempty"`
}

func (t *tools) registerOutbox(s *mcp.Server) {
	addTool(s, &mcp.Tool{Name: "outbox",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
		Description: "What became of the direct messages this node sent with dm: queued (the recipient was unreachable; the daemon keeps retrying until the TTL, with attempts and the last error), delivered (acknowledged by the recipient) or dead (given up, with the reason). Queued and dead ones come with their content."},
		t.outbox, limits(map[string][2]float64{"limit": {1, maxLimit}}), enum("state", boxQueued, boxDelivered, boxDead))
}

func (t *tools) outbox(ctx context.Context, in outboxArgs) (any, error) {
	state := cmp.Or(in.State, boxQueued)
	if state != boxQueued && in.To != "" {
		return nil, fmt.Errorf("to filters only the queued messages, not %s ones", state)
	}
	if state == boxQueued && (in.After != "" || in.Limit != 0) {
		return nil, fmt.Errorf("after and limit page the delivered and dead messages; queued ones come all at once")
	}
	var (
		box api.Outbox
		err error
	)
	limit := cmp.Or(int(in.Limit), defaultLimit)
	switch state {
	case boxQueued:
		box.Messages, err = t.c.Outbox(ctx, in.To)
	case boxDelivered:
		box, err = t.c.Sent(ctx, in.After, limit)
	case boxDead:
		box, err = t.c.DeadLetters(ctx, in.After, limit)
	}
	if err != nil {
		return nil, err
	}
	out := outboxPage{State: state, Messages: make([]outgoing, 0, len(box.Messages)), Next: box.Next}
	size := 0
	for _, o := range box.Messages {
		v := outgoing{ID: o.ID, To: o.To, Kind: o.Kind, Created: o.Created, Deadline: o.Deadline, Attempts: o.Attempts,
			NextTry: o.NextTry, LastError: o.LastError, DeliveredAt: o.DeliveredAt, Reason: o.Reason, DeadAt: o.DeadAt}
		if o.Message != nil {
			v.Kind = cmp.Or(v.Kind, o.Message.Type)
			// Contents fill the answer up to maxAnswerBytes; the messages
			// after that are listed without theirs.
			if size += len(o.Message.Content); size <= maxAnswerBytes {
				v.Content = o.Message.Content
			} else {
				v.ContentOmitted = true
			}
		}
		out.Messages = append(out.Messages, v)
	}
	return out, nil
}
