package api

import (
	"encoding/json"
	"time"
)

// Error codes of direct messages and calls, beside the ones above; they
// are the protocol's call error codes (protocol.Code…). A call that the
// callee's call policy does not allow fails with CodeForbidden (403).
const (
	CodeNoHandler     = "no_handler"        // 404: nobody serves that name on that peer
	CodeUnreachable   = "unreachable"       // 503: the peer could not be reached
	CodeDeadline      = "deadline_exceeded" // 504
	CodeCancelled     = "cancelled"         // 409: the call was cancelled
	CodeHandlerFailed = "handler_failed"    // 502: the remote handler failed
	CodeOverloaded    = "overloaded"        // 503: too many calls in flight there
	CodeBadPeer       = "bad_peer"          // 400: not a peer ID
	CodeUnknownCall   = "unknown_call"      // 404: no such call in flight here
	CodeRefused       = "refused"           // 502: the recipient refused a direct message
	CodeInternal      = "internal"          // 500
)

// DMRequest is the body of POST /v1/dm: a direct message to one peer.
type DMRequest struct {
	To      string            `json:"to"`             // peer ID
	Kind    string            `json:"kind,omitempty"` // request, response, event (default), error, heartbeat
	Content json.RawMessage   `json:"content"`        // a JSON object
	ReplyTo string            `json:"reply_to,omitempty"`
	TTL     int64             `json:"ttl,omitempty"` // seconds; also how long the outbox retries
	Meta    map[string]string `json:"meta,omitempty"`
}

// DMResult answers POST /v1/dm.
type DMResult struct {
	Message Message `json:"message"`
	// Status is "delivered" when the recipient acknowledged it before the
	// answer, else "queued": it is in the outbox and will be retried until
	// its deadline.
	Status   string    `json:"status"`
	Deadline time.Time `json:"deadline"`
}

// Outgoing is a direct message in the outbox, the dead letters or the sent
// log (GET /v1/sent: ID, To, Kind, Created, DeliveredAt and Attempts, the
// delivering one included).
type Outgoing struct {
	ID        string    `json:"id"`
	To        string    `json:"to"`
	Kind      string    `json:"kind,omitempty"` // sent log: the message's type
	Created   time.Time `json:"created"`
	Deadline  time.Time `json:"deadline,omitzero"`
	Attempts  int       `json:"attempts"`
	NextTry   time.Time `json:"next_try,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	Reason    string    `json:"reason,omitempty"` // dead letters: why
	DeadAt    time.Time `json:"dead_at,omitzero"` // dead letters: when
	// DeliveredAt is when the recipient acknowledged it (sent log).
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	Message     *Message  `json:"message,omitempty"` // the message itself
}

// Outbox answers GET /v1/outbox, GET /v1/deadletters and GET /v1/sent.
type Outbox struct {
	Messages []Outgoing `json:"messages"`
	Next     string     `json:"next,omitempty"` // dead letters: cursor for ?after=
}

// HandlerRequest is the body of POST /v1/handlers, which registers the
// connection as a handler and streams calls back (NDJSON, one HandlerEvent
// per line) for as long as it stays open.
type HandlerRequest struct {
	Names []string `json:"names"`
	// Concurrency bounds the calls this connection is given at once
	// (default 64).
	Concurrency int `json:"concurrency,omitempty"`
	// Capabilities describe the names for the agent card (optional).
	Capabilities []Capability `json:"capabilities,omitempty"`
	// Allow says who may call: "trusted" (the peers on the trust list),
	// "anyone", or peer IDs (bare or "peer:ID"), in any mix. Empty means
	// "trusted": a handler is open to strangers only when it says
	// "anyone". Others get forbidden and never reach the handler.
	Allow []string `json:"allow,omitempty"`
}

// HandlerEvent is one line of a handler stream.
type HandlerEvent struct {
	Type string        `json:"type"` // "ready", "call", "cancel"
	Call *IncomingCall `json:"call,omitempty"`
	ID   string        `json:"id,omitempty"` // cancel: the call cancelled
	// Allow is who may call, on the ready event: the registration's allow
	// as the daemon understood it (e.g. ["trusted"] when none was given).
	Allow []string `json:"allow,omitempty"`
}

// IncomingCall is a call for a handler to serve. Answer it with POST
// /v1/calls/{id}/reply, or for a stream call stream frames with POST
// /v1/calls/{id}/frames.
type IncomingCall struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	From     string            `json:"from"`
	Input    json.RawMessage   `json:"input,omitempty"`
	Meta     map[string]string `json:"meta,omitempty"`
	Stream   bool              `json:"stream,omitempty"`
	Deadline time.Time         `json:"deadline,omitzero"`
}

// Reply is the body of POST /v1/calls/{id}/reply, and one line of POST
// /v1/calls/{id}/frames (NDJSON) with Kind "delta", "final" or "error".
type Reply struct {
	Kind   string            `json:"kind,omitempty"`   // frames only
	Output json.RawMessage   `json:"output,omitempty"` // final result / delta data
	Meta   map[string]string `json:"meta,omitempty"`
	Error  *ErrorBody        `json:"error,omitempty"` // the call failed
}

// InvokeRequest is the body of POST /v1/invoke.
type InvokeRequest struct {
	Peer string `json:"peer,omitempty"`
	// Capability, instead of Peer, calls whichever peer offers it (Name
	// defaults to it): see AnyCall.
	Capability string            `json:"capability,omitempty"`
	Name       string            `json:"name"`
	Input      json.RawMessage   `json:"input,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Timeout    string            `json:"timeout,omitempty"` // e.g. "30s"; default 60s for unary calls, none for streams
	Stream     bool              `json:"stream,omitempty"`  // answer with NDJSON frames
	// Parent is the ID of a call this daemon is serving that this call is
	// made for: its trace, session and correlation are inherited.
	Parent string `json:"parent,omitempty"`
}

// InvokeResult answers a unary POST /v1/invoke.
type InvokeResult struct {
	Output json.RawMessage   `json:"output"`
	Meta   map[string]string `json:"meta,omitempty"`
	// Peer is the provider that answered a call by capability, Attempts
	// the providers tried before it.
	Peer     string    `json:"peer,omitempty"`
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Frame is one line of a stream invoke's NDJSON answer.
type Frame struct {
	Seq   uint64            `json:"seq"`
	Kind  string            `json:"kind"` // started, delta, final, error
	Data  json.RawMessage   `json:"data,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
	Error *ErrorBody        `json:"error,omitempty"`
	// Peer and Attempts are set on the first frame of a stream call by
	// capability: the provider answering, and those tried before it.
	Peer     string    `json:"peer,omitempty"`
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Capability is one thing an agent offers.
type Capability struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Access says who may call it: "anyone", or "restricted" (only peers
	// the node trusts or lists: others get forbidden). Cards set it for the
	// names a handler serves; it is ignored in requests.
	Access string `json:"access,omitempty"`
}

// Card is an agent card: a node's name, description and capabilities
// (static ones, set with PUT /v1/card, and those of its handlers).
type Card struct {
	ID           string       `json:"id,omitempty"`
	Name         string       `json:"name,omitempty"`
	Description  string       `json:"description,omitempty"`
	Version      string       `json:"version,omitempty"`
	Capabilities []Capability `json:"capabilities"`
}

// CardUpdate is the body of PUT /v1/card: the fields given replace this
// node's stored ones.
type CardUpdate struct {
	Name         *string       `json:"name,omitempty"`
	Description  *string       `json:"description,omitempty"`
	Capabilities *[]Capability `json:"capabilities,omitempty"`
}

// Provider is a peer that offers a capability.
type Provider struct {
	Card  Card     `json:"card"`
	Addrs []string `json:"addrs,omitempty"`
}

// Discovery answers GET /v1/discover?capability=NAME.
type Discovery struct {
	Capability string     `json:"capability"`
	Providers  []Provider `json:"providers"`
}

// Health is a peer's heartbeat answer.
type Health struct {
	Peer        string  `json:"peer"`
	Status      string  `json:"status"`
	ActiveCalls int     `json:"active_calls"`
	Handlers    int     `json:"handlers"`
	Load        float64 `json:"load"`
	UptimeS     int64   `json:"uptime_s"`
	RTTMillis   float64 `json:"rtt_ms"`
}
