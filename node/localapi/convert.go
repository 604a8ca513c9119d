package localapi

import (
	"encoding/base64"
	"time"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// The API's JSON shapes of the backend's types.

func apiMessage(m *protocol.Message, cur store.Cursor) api.Message {
	out := api.Message{
		ID:        m.ID.String(),
		V:         m.V,
		Space:     m.Space.String(),
		From:      m.From,
		CreatedAt: m.Created().UTC(),
		Type:      m.Type,
		TTL:       m.TTL,
		Meta:      m.Meta,
		Content:   m.Content,
		Sig:       base64.StdEncoding.EncodeToString(m.Sig),
	}
	if cur != 0 {
		out.Cursor = cur.String()
	}
	for _, p := range m.Prev {
		out.Prev = append(out.Prev, p.String())
	}
	if !m.Refs.IsZero() {
		out.Refs = &api.Refs{Nodes: m.Refs.Nodes}
		for _, id := range m.Refs.Messages {
			out.Refs.Messages = append(out.Refs.Messages, id.String())
		}
	}
	return out
}

func apiStored(m node.Message) api.Message { return apiMessage(m.Message, m.Cursor) }

func apiSpace(sp node.Space) api.Space {
	out := api.Space{ID: sp.ID.String(), Name: sp.Name, JoinedAt: sp.JoinedAt.UTC(), Messages: sp.Messages, Peers: sp.Peers, Bytes: sp.Bytes, Private: sp.Private != nil, Sealed: sp.Sealed}
	if l := sp.Limit; !l.IsZero() {
		out.Limits = &api.SpaceLimits{MaxBytes: l.MaxBytes, MaxSenderBytes: l.MaxSenderBytes, MaxMessageSize: l.MaxMessageSize}
	}
	if k := sp.Keep; k != (store.Retention{}) {
		out.Retention = &api.Retention{MaxCount: k.MaxCount}
		if k.MaxAge > 0 {
			out.Retention.MaxAge = k.MaxAge.String()
		}
	}
	if s := sp.Sync; s != nil {
		out.Sync = &api.SpaceSync{Running: s.Running, Left: s.Left, LastReceived: s.LastReceived, LastError: s.LastErr}
		if !s.LastEnd.IsZero() {
			out.Sync.LastEnd, out.Sync.LastPeer = s.LastEnd.UTC(), s.LastPeer.String()
		}
		switch {
		case s.Left > 0:
			out.Sync.State = api.SyncCatchingUp
		case s.Running:
			out.Sync.State = api.SyncRunning
		case s.LastEnd.IsZero():
			out.Sync.State = api.SyncNone
		case s.LastErr != "":
			out.Sync.State = api.SyncFailed
		default:
			out.Sync.State = api.SyncInSync
		}
	}
	return out
}

// parseRetention reads an API retention; nil stays nil.
func parseRetention(r *api.Retention) (*store.Retention, error) {
	if r == nil {
		return nil, nil
	}
	out := &store.Retention{MaxCount: r.MaxCount}
	if out.MaxCount < 0 {
		return nil, &node.Error{Code: api.CodeBadRequest, Msg: "retention max_count must not be negative"}
	}
	if r.MaxAge != "" {
		d, err := time.ParseDuration(r.MaxAge)
		if err != nil || d < 0 {
			return nil, &node.Error{Code: api.CodeBadRequest, Msg: "retention max_age " + r.MaxAge + " is not a positive duration such as \"720h\""}
		}
		out.MaxAge = d
	}
	return out, nil
}

// parseRefs reads an API message's refs.
func parseRefs(r *api.Refs) (protocol.Refs, error) {
	var out protocol.Refs
	if r == nil {
		return out, nil
	}
	for _, s := range r.Messages {
		id, err := protocol.ParseID(s)
		if err != nil {
			return out, &node.Error{Code: api.CodeInvalid, Msg: "refs.messages: " + err.Error()}
		}
		out.Messages = append(out.Messages, id)
	}
	for _, s := range r.Nodes {
		if _, err := parsePeer("refs.nodes", s); err != nil {
			return out, &node.Error{Code: api.CodeInvalid, Msg: err.Error()}
		}
		out.Nodes = append(out.Nodes, s)
	}
	return out, nil
}

func apiOutgoing(o store.Outgoing) api.Outgoing {
	out := api.Outgoing{
		ID: o.ID.String(), To: o.To,
		Created: time.UnixMilli(o.Created).UTC(), Deadline: time.UnixMilli(o.Deadline).UTC(),
		Attempts: o.Attempts, LastError: o.LastError,
	}
	if o.NextTry > 0 {
		out.NextTry = time.UnixMilli(o.NextTry).UTC()
	}
	if m, err := protocol.Decode(o.Raw, protocol.StoredLimits()); err == nil {
		am := apiMessage(m, 0)
		out.Message = &am
	}
	return out
}

func apiCard(c protocol.Card) api.Card {
	out := api.Card{ID: c.ID, Name: c.Name, Description: c.Description, Version: c.Version, Capabilities: []api.Capability{}}
	for _, cp := range c.Capabilities {
		out.Capabilities = append(out.Capabilities, api.Capability(cp))
	}
	return out
}

func capabilities(in []api.Capability) []protocol.Capability {
	out := make([]protocol.Capability, 0, len(in))
	for _, c := range in {
		out = append(out, protocol.Capability(c))
	}
	return out
}

func apiProvider(p agent.Provider) api.Provider {
	ap := api.Provider{Card: apiCard(p.Card)}
	for _, a := range p.Addrs {
		ap.Addrs = append(ap.Addrs, a.String())
	}
	return ap
}

func apiIncoming(c node.IncomingCall) *api.IncomingCall {
	return &api.IncomingCall{
		ID: c.ID, Name: c.Name, From: c.From.String(),
		Input: c.Input, Meta: c.Meta, Stream: c.Stream, Deadline: c.Deadline,
	}
}

func apiErrorBody(e *protocol.CallError) *api.ErrorBody {
	if e == nil {
		return nil
	}
	return &api.ErrorBody{Code: e.Code, Message: e.Message}
}
