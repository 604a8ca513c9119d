package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// badRequest is a send request the daemon cannot turn into a message.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// Send signs a message for a joined space, stores it durably, then
// publishes it to the space's peers. prev is set to the space's heads as
// this node sees them. A publish failure is logged, not returned: the
// message is stored and peers repair gaps from the store.
func (n *Node) Send(ctx context.Context, space protocol.ID, req api.SendRequest) (*protocol.Message, store.Entry, error) {
	d, err := n.draft(space, req)
	if err != nil {
		return nil, store.Entry{}, err
	}
	m, err := protocol.Sign(n.key, d, n.cfg.Limits)
	if err != nil {
		return nil, store.Entry{}, err
	}
	e, _, err := n.store.Put(ctx, storeMessage(m))
	if err != nil {
		return nil, store.Entry{}, fmt.Errorf("store: %w", err)
	}
	if err := n.mesh.Publish(ctx, m); err != nil {
		n.log.Warn("publish", "id", m.ID, "err", err)
	}
	return m, e, nil
}

func (n *Node) draft(space protocol.ID, req api.SendRequest) (protocol.Draft, error) {
	if len(req.Content) == 0 || string(req.Content) == "null" {
		return protocol.Draft{}, badRequest{"content is missing: want a JSON object, e.g. {\"text\": \"hello\"}"}
	}
	if req.TTL < 0 {
		return protocol.Draft{}, badRequest{"ttl must not be negative"}
	}
	d := protocol.Draft{
		Space:     space,
		CreatedAt: time.Now(),
		Type:      req.Type,
		TTL:       time.Duration(req.TTL) * time.Second,
		Meta:      protocol.StripLocal(req.Meta), // local keys never leave this node
		Content:   req.Content,
	}
	if err := protocol.ValidateMeta(req.Meta); err != nil {
		return d, badRequest{err.Error()}
	}
	if d.Type == "" {
		d.Type = "text"
	}
	if req.Refs != nil {
		for _, s := range req.Refs.Messages {
			id, err := protocol.ParseID(s)
			if err != nil {
				return d, badRequest{"refs.messages: " + err.Error()}
			}
			d.Refs.Messages = append(d.Refs.Messages, id)
		}
		for _, s := range req.Refs.Nodes {
			if _, err := peer.Decode(s); err != nil {
				return d, badRequest{fmt.Sprintf("refs.nodes: %q is not a peer ID", s)}
			}
			d.Refs.Nodes = append(d.Refs.Nodes, s)
		}
	}
	heads, err := n.store.Heads(space)
	if err != nil {
		return d, fmt.Errorf("heads: %w", err)
	}
	if len(heads) > n.cfg.Limits.MaxPrev {
		heads = heads[:n.cfg.Limits.MaxPrev]
	}
	d.Prev = slices.Clone(heads)
	return d, nil
}
