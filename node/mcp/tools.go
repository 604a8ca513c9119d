package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// Bounds of the tools' arguments.
const (
	defaultLimit    = 50
	maxLimit        = 1000
	defaultWait     = 30 * time.Second
	maxWaitSeconds  = 300
	defaultDiscover = 5 * time.Second
	defaultInvoke   = 60 * time.Second
	maxInvokeSecs   = 3600
	// maxStreamBytes bounds the deltas a stream invoke collects into one
	// tool result.
	maxStreamBytes = 4 << 20
)

// tools are the MCP tools of one daemon.
type tools struct {
	c *client.Client
}

// message is a message as the tools show it: what a model needs to read
// and answer it, without signature or wire details.
type message struct {
	ID        string            `json:"id"`
	From      string            `json:"from"`
	CreatedAt time.Time         `json:"created_at"`
	Type      string            `json:"type"`
	ReplyTo   []string          `json:"reply_to,omitempty"`
	To        []string          `json:"to,omitempty"`
	TTL       int64             `json:"ttl_seconds,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	Content   json.RawMessage   `json:"content"`
	Cursor    string            `json:"cursor,omitempty"`
	Depth     *int              `json:"depth,omitempty"` // in a thread
}

func view(m api.Message) message {
	v := message{ID: m.ID, From: m.From, CreatedAt: m.CreatedAt, Type: m.Type, TTL: m.TTL, Meta: m.Meta, Content: m.Content, Cursor: m.Cursor}
	if m.Refs != nil {
		v.ReplyTo, v.To = m.Refs.Messages, m.Refs.Nodes
	}
	return v
}

func views(ms []api.Message) []message {
	out := make([]message, 0, len(ms))
	for _, m := range ms {
		out = append(out, view(m))
	}
	return out
}

// page is a page of messages and the cursor to continue after it.
type page struct {
	Messages []message `json:"messages"`
	Next     string    `json:"next"`
	TimedOut bool      `json:"timed_out,omitempty"` // wait: nothing arrived in time
}

// startCursor names the start of a space or the inbox to a model. The API
// writes the start as "", which a model would send back as "no cursor",
// and wait reads no cursor as "from now on": "" never leaves these tools.
const startCursor = "start"

// cursorOut is a cursor as the tools answer it.
func cursorOut(c string) string { return cmp.Or(c, startCursor) }

// cursorIn is a cursor a model passed, as the API takes it.
func cursorIn(c string) string {
	if c == startCursor {
		return ""
	}
	return c
}

// maxAnswerBytes bounds the messages one read, wait or inbox answer
// carries; the rest is for the next call, from the answer's next.
const maxAnswerBytes = 2 << 20

// pageOf is p as the tools answer it: at least one message, then as many
// as fit in maxAnswerBytes, with next after the last one included.
func pageOf(p api.Page) page {
	out := page{Messages: views(p.Messages), Next: p.Next}
	size := 0
	for i, m := range p.Messages {
		size += len(m.Content) + 512 // content plus the fields around it
		if i > 0 && size > maxAnswerBytes {
			out.Messages, out.Next = out.Messages[:i], p.Messages[i-1].Cursor
			break
		}
	}
	out.Next = cursorOut(out.Next)
	return out
}

type space struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Messages int    `json:"messages"`
	Peers    int    `json:"peers"`
	Private  bool   `json:"private,omitempty"`
	Sealed   bool   `json:"sealed,omitempty"`
}

func spaceOf(s api.Space) space {
	return space{Name: s.Name, ID: s.ID, Messages: s.Messages, Peers: s.Peers, Private: s.Private, Sealed: s.Sealed}
}

// Arguments of the tools. Fields without omitempty are required.
type (
	noArgs   struct{}
	joinArgs struct {
		Space string `json:"space" jsonschema:"the space's name, e.g. research; joining is idempotent and fetches its history from its members"`
	}
	sendArgs struct {
		Space      string            `json:"space" jsonschema:"a joined space's name"`
		Content    object            `json:"content" jsonschema:"the message: any JSON object, e.g. {\"text\": \"hello\"}; conventions put structured data here"`
		Type       string            `json:"type,omitempty" jsonschema:"a free label of what the content is, e.g. text (the default), question, swarm.claim"`
		ReplyTo    []string          `json:"reply_to,omitempty" jsonschema:"IDs of the messages this one answers (refs.messages); threads follow them"`
		To         []string          `json:"to,omitempty" jsonschema:"peer IDs this message is addressed to within the space (refs.nodes); everyone in the space still sees it"`
		TTLSeconds integer           `json:"ttl_seconds,omitempty" jsonschema:"seconds after which every node forgets the message"`
		Meta       map[string]string `json:"meta,omitempty" jsonschema:"string metadata, e.g. session, correlation, traceparent"`
	}
	readArgs struct {
		Space     string   `json:"space,omitempty" jsonschema:"a joined space's name: read its messages in this node's order"`
		Thread    string   `json:"thread,omitempty" jsonschema:"instead of a space, a message ID: read that message with what it replies to (ancestors) or its replies (descendants)"`
		Direction string   `json:"direction,omitempty" jsonschema:"with thread: ancestors (the default) or descendants"`
		Depth     *integer `json:"depth,omitempty" jsonschema:"with thread: how many steps of replies to follow (default 100)"`
		After     string   `json:"after,omitempty" jsonschema:"with space: the cursor (next of a previous read or wait) to continue after; omit to start at the beginning"`
		Limit     integer  `json:"limit,omitempty" jsonschema:"most messages to return (default 50, at most 1000)"`
	}
	waitArgs struct {
		Space          string  `json:"space,omitempty" jsonschema:"a joined space's name; omit to wait for direct messages in this node's inbox"`
		After          string  `json:"after,omitempty" jsonschema:"the next cursor of your last read, inbox or wait; omit to wait only for messages arriving from now on"`
		TimeoutSeconds integer `json:"timeout_seconds,omitempty" jsonschema:"how long to wait at most (default 30, at most 300); an empty answer with timed_out means nothing arrived"`
		Limit          integer `json:"limit,omitempty" jsonschema:"most messages to return (default 50, at most 1000)"`
	}
	dmArgs struct {
		To         string            `json:"to" jsonschema:"the recipient's peer ID (12D3KooW…)"`
		Content    object            `json:"content" jsonschema:"the message: any JSON object, e.g. {\"text\": \"can you review PR 42?\"}"`
		Kind       string            `json:"kind,omitempty" jsonschema:"request, response, event (the default), error or heartbeat"`
		ReplyTo    string            `json:"reply_to,omitempty" jsonschema:"the ID of the direct message this answers; its correlation, trace and session carry over"`
		TTLSeconds integer           `json:"ttl_seconds,omitempty" jsonschema:"seconds to keep trying to deliver it (default one day)"`
		Meta       map[string]string `json:"meta,omitempty" jsonschema:"string metadata, e.g. session, correlation"`
	}
	inboxArgs struct {
		After string  `json:"after,omitempty" jsonschema:"the next cursor of a previous inbox or wait; omit to start at the beginning"`
		Limit integer `json:"limit,omitempty" jsonschema:"most messages to return (default 50, at most 1000)"`
	}
	discoverArgs struct {
		Capability     string  `json:"capability" jsonschema:"the capability to look for, e.g. code_review"`
		Limit          integer `json:"limit,omitempty" jsonschema:"most providers to return (default all found)"`
		TimeoutSeconds integer `json:"timeout_seconds,omitempty" jsonschema:"how long to search (default 5, at most 60)"`
	}
	invokeArgs struct {
		Peer           string            `json:"peer,omitempty" jsonschema:"the peer ID of the agent to call (from discover); or give capability instead"`
		Name           string            `json:"name,omitempty" jsonschema:"the handler's name, e.g. a capability the peer's card lists (with peer)"`
		Capability     string            `json:"capability,omitempty" jsonschema:"instead of peer and name: call whichever peer offers this capability (least loaded first, the next one if it is unreachable or overloaded); the answer says which peer answered"`
		Input          value             `json:"input,omitempty" jsonschema:"the call's input: any JSON value"`
		TimeoutSeconds integer           `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the whole answer, streamed or not (default 60)"`
		Stream         bool              `json:"stream,omitempty" jsonschema:"ask for a streamed answer and collect its parts (deltas) in order"`
		Meta           map[string]string `json:"meta,omitempty" jsonschema:"string metadata, e.g. session"`
	}
)

// limits sets the bounds of integer properties of an input schema.
func limits(bounds map[string][2]float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		for name, b := range bounds {
			p := s.Properties[name]
			p.Minimum, p.Maximum = &b[0], &b[1]
		}
	}
}

// enum restricts a string property of an input schema to values.
func enum(name string, values ...any) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Properties[name].Enum = values }
}

func boolPtr(b bool) *bool { return &b }

// register adds the tools to s.
func (t *tools) register(s *mcp.Server) {
	// Messages are written by other agents, so tools answering them are
	// open-world; invoke runs whatever a remote handler does.
	local := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	reads := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(true)}
	writes := &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)}
	calls := &mcp.ToolAnnotations{OpenWorldHint: boolPtr(true)}
	pageBounds := limits(map[string][2]float64{"limit": {1, maxLimit}})

	addTool(s, &mcp.Tool{Name: "whoami", Annotations: local,
		Description: "This node: its peer ID (others address you with it), addresses, agent card and joined spaces."},
		t.whoami)
	addTool(s, &mcp.Tool{Name: "spaces", Annotations: local,
		Description: "The spaces this node has joined, with how many messages each holds and how many peers are in it."},
		t.spaces)
	addTool(s, &mcp.Tool{Name: "join", Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)},
		Description: "Join a space (a shared group conversation) by name. Idempotent. Its history arrives from its members; read it with read."},
		t.join)
	addTool(s, &mcp.Tool{Name: "send", Annotations: writes,
		Description: "Send a message to a joined space: every member gets it, signed by this node. Content is a JSON object. Answers the new message's id (use it in reply_to) and cursor."},
		t.send)
	addTool(s, &mcp.Tool{Name: "read", Annotations: reads,
		Description: "Read a joined space's messages in order, a page at a time: pass the answer's next as after to continue. Or, with thread (a message ID), read a message with what it replies to, or with its replies."},
		t.read, limits(map[string][2]float64{"limit": {1, maxLimit}, "depth": {0, maxLimit}}), enum("direction", "ancestors", "descendants"))
	addTool(s, &mcp.Tool{Name: "wait", Annotations: reads,
		Description: "Wait for new messages in a space, or in this node's inbox when no space is given. Returns as soon as at least one message after the cursor exists (up to limit), or empty with timed_out. Pass its next to the following wait: nothing is missed or repeated."},
		t.wait, limits(map[string][2]float64{"limit": {1, maxLimit}, "timeout_seconds": {0, maxWaitSeconds}}))
	addTool(s, &mcp.Tool{Name: "dm", Annotations: writes,
		Description: "Send a direct message to one peer. It is signed, stored and delivered when the peer is reachable (queued and retried until its TTL otherwise). Answers its id and whether it was delivered or queued."},
		t.dm, enum("kind", "request", "response", "event", "error", "heartbeat"))
	addTool(s, &mcp.Tool{Name: "inbox", Annotations: reads,
		Description: "Read the direct messages this node received, in order, a page at a time (pass next as after to continue)."},
		t.inbox, pageBounds)
	addTool(s, &mcp.Tool{Name: "discover", Annotations: reads,
		Description: "Find the agents on the mesh that offer a capability (no registry: the DHT and the LAN), with their agent cards. Call one with invoke. Capabilities listed as restricted take calls only from peers the provider trusts (others get forbidden)."},
		t.discover, limits(map[string][2]float64{"limit": {0, maxLimit}, "timeout_seconds": {0, 60}}))
	addTool(s, &mcp.Tool{Name: "invoke", Annotations: calls,
		Description: "Call a handler on a peer (request/response) and answer its output. With stream, the peer answers in parts (deltas), returned in order with the final output."},
		t.invoke, limits(map[string][2]float64{"timeout_seconds": {0, maxInvokeSecs}}))
	t.registerPrivate(s) // private.go
	t.registerOutbox(s)  // outbox.go
}

func (t *tools) whoami(ctx context.Context, _ noArgs) (any, error) {
	n, err := t.c.Node(ctx)
	if err != nil {
		return nil, err
	}
	card, err := t.c.Card(ctx)
	if err != nil {
		return nil, err
	}
	sps, err := t.c.Spaces(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sps))
	for _, s := range sps {
		names = append(names, s.Name)
	}
	return struct {
		ID      string   `json:"id"`
		Addrs   []string `json:"addrs"`
		Version string   `json:"version"`
		Card    api.Card `json:"card"`
		Spaces  []string `json:"spaces"`
	}{n.ID, n.Addrs, n.Version, card, names}, nil
}

func (t *tools) spaces(ctx context.Context, _ noArgs) (any, error) {
	sps, err := t.c.Spaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]space, 0, len(sps))
	for _, s := range sps {
		out = append(out, spaceOf(s))
	}
	return struct {
		Spaces []space `json:"spaces"`
	}{out}, nil
}

func (t *tools) join(ctx context.Context, in joinArgs) (any, error) {
	sp, err := t.c.Join(ctx, in.Space)
	if err != nil {
		return nil, err
	}
	return spaceOf(sp), nil
}

func (t *tools) send(ctx context.Context, in sendArgs) (any, error) {
	req := api.SendRequest{Content: json.RawMessage(in.Content), Type: in.Type, TTL: int64(in.TTLSeconds), Meta: in.Meta}
	if len(in.ReplyTo) > 0 || len(in.To) > 0 {
		req.Refs = &api.Refs{Messages: in.ReplyTo, Nodes: in.To}
	}
	m, err := t.c.Send(ctx, in.Space, req)
	if err != nil {
		return nil, err
	}
	return struct {
		ID        string    `json:"id"`
		Cursor    string    `json:"cursor"`
		CreatedAt time.Time `json:"created_at"`
	}{m.ID, m.Cursor, m.CreatedAt}, nil
}

func (t *tools) read(ctx context.Context, in readArgs) (any, error) {
	limit := cmp.Or(int(in.Limit), defaultLimit)
	switch {
	case in.Space != "" && in.Thread != "":
		return nil, errors.New("give either space or thread, not both")
	case in.Thread != "":
		if in.After != "" {
			return nil, errors.New("after pages a space; a thread comes whole, nearest first (use limit)")
		}
		depth := -1 // the daemon's default
		if in.Depth != nil {
			depth = int(*in.Depth)
		}
		th, err := t.c.Thread(ctx, in.Thread, in.Direction != "descendants", depth)
		if err != nil {
			return nil, err
		}
		out := struct {
			Direction string    `json:"direction"`
			Messages  []message `json:"messages"`
			Truncated bool      `json:"truncated,omitempty"`
		}{Direction: th.Direction, Truncated: th.Truncated, Messages: []message{}}
		for i, m := range th.Messages {
			if i == limit {
				out.Truncated = true
				break
			}
			v := view(m.Message)
			v.Depth = &m.Depth
			out.Messages = append(out.Messages, v)
		}
		return out, nil
	case in.Space != "":
		if in.Direction != "" || in.Depth != nil {
			return nil, errors.New("direction and depth go with thread, not space")
		}
		p, err := t.c.Read(ctx, in.Space, cursorIn(in.After), limit)
		if err != nil {
			return nil, err
		}
		return pageOf(p), nil
	}
	return nil, errors.New("give a space to read (its name) or a thread (a message ID)")
}

// errArrived stops a follow at the first new message.
var errArrived = errors.New("arrived")

func (t *tools) wait(ctx context.Context, in waitArgs) (any, error) {
	limit := cmp.Or(int(in.Limit), defaultLimit)
	timeout := defaultWait
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	after := api.EndCursor
	if in.After != "" {
		after = cursorIn(in.After)
	}
	read := func(after string) (api.Page, error) {
		if in.Space == "" {
			return t.c.Inbox(ctx, after, limit)
		}
		return t.c.Read(ctx, in.Space, after, limit)
	}
	p, err := read(after)
	if err != nil || len(p.Messages) > 0 {
		return pageOf(p), err
	}
	// Nothing yet: follow from the cursor until something arrives.
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := func(api.Message) error { return errArrived }
	if in.Space == "" {
		err = t.c.FollowInbox(wctx, p.Next, stop)
	} else {
		err = t.c.Follow(wctx, in.Space, p.Next, stop)
	}
	switch {
	case errors.Is(err, errArrived):
		// Take everything there is by now, up to limit.
		next, err := read(p.Next)
		return pageOf(next), err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return page{Messages: []message{}, Next: cursorOut(p.Next), TimedOut: true}, nil
	}
	return nil, err
}

func (t *tools) dm(ctx context.Context, in dmArgs) (any, error) {
	r, err := t.c.DM(ctx, api.DMRequest{To: in.To, Kind: in.Kind, Content: json.RawMessage(in.Content),
		ReplyTo: in.ReplyTo, TTL: int64(in.TTLSeconds), Meta: in.Meta})
	if err != nil {
		return nil, err
	}
	return struct {
		ID       string    `json:"id"`
		Status   string    `json:"status"`
		Deadline time.Time `json:"deadline"`
	}{r.Message.ID, r.Status, r.Deadline}, nil
}

func (t *tools) inbox(ctx context.Context, in inboxArgs) (any, error) {
	p, err := t.c.Inbox(ctx, cursorIn(in.After), cmp.Or(int(in.Limit), defaultLimit))
	if err != nil {
		return nil, err
	}
	return pageOf(p), nil
}

// provider is an agent found by discover.
type provider struct {
	ID           string   `json:"id"`
	Name         string   `json:"name,omitempty"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities"`
	// Restricted are the capabilities only peers the provider trusts or
	// lists may call: others get forbidden.
	Restricted []string `json:"restricted,omitempty"`
}

func (t *tools) discover(ctx context.Context, in discoverArgs) (any, error) {
	wait := defaultDiscover
	if in.TimeoutSeconds > 0 {
		wait = time.Duration(in.TimeoutSeconds) * time.Second
	}
	ps, err := t.c.Discover(ctx, in.Capability, int(in.Limit), wait)
	if err != nil {
		return nil, err
	}
	out := make([]provider, 0, len(ps))
	for _, p := range ps {
		v := provider{ID: p.Card.ID, Name: p.Card.Name, Description: p.Card.Description, Capabilities: []string{}}
		for _, c := range p.Card.Capabilities {
			v.Capabilities = append(v.Capabilities, c.Name)
			if c.Access == "restricted" {
				v.Restricted = append(v.Restricted, c.Name)
			}
		}
		out = append(out, v)
	}
	return struct {
		Capability string     `json:"capability"`
		Providers  []provider `json:"providers"`
	}{in.Capability, out}, nil
}

func (t *tools) invoke(ctx context.Context, in invokeArgs) (any, error) {
	timeout := defaultInvoke
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	req := api.InvokeRequest{Peer: in.Peer, Name: in.Name, Capability: in.Capability, Input: json.RawMessage(in.Input), Meta: in.Meta,
		Stream: in.Stream, Timeout: timeout.String()}
	if in.Capability == "" && (in.Peer == "" || in.Name == "") {
		return nil, errors.New("give peer and name, or capability")
	}
	if !in.Stream {
		r, err := t.c.Invoke(ctx, req)
		if err != nil {
			return nil, err
		}
		return struct {
			Output   json.RawMessage   `json:"output"`
			Meta     map[string]string `json:"meta,omitempty"`
			Peer     string            `json:"peer,omitempty"`
			Attempts []api.Attempt     `json:"attempts,omitempty"`
		}{r.Output, r.Meta, r.Peer, r.Attempts}, nil
	}
	// A tool call must end: a stream gets the same bound as a unary call.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := struct {
		Deltas   []json.RawMessage `json:"deltas"`
		Output   json.RawMessage   `json:"output,omitempty"`
		Meta     map[string]string `json:"meta,omitempty"`
		Peer     string            `json:"peer,omitempty"`
		Attempts []api.Attempt     `json:"attempts,omitempty"`
	}{Deltas: []json.RawMessage{}}
	size := 0
	err := t.c.InvokeStream(ctx, req, func(f api.Frame) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if f.Peer != "" {
			out.Peer, out.Attempts = f.Peer, f.Attempts
		}
		switch f.Kind {
		case "delta":
			size += len(f.Data)
			if size > maxStreamBytes {
				return fmt.Errorf("the stream's deltas passed %d MiB, more than one tool answer can carry; ask for less", maxStreamBytes>>20)
			}
			out.Deltas = append(out.Deltas, f.Data)
		case "final":
			out.Output, out.Meta = f.Data, f.Meta
		}
		return nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("the stream did not end within %v (%d deltas so far): retry with a larger timeout_seconds, or ask for less", timeout, len(out.Deltas))
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
