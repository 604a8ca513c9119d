package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// Stream protocols for direct traffic between two daemons. Each frame on
// them is a uvarint length followed by that many bytes.
const (
	// DirectProtocol carries direct messages: the sender writes message
	// wire encodings, the receiver answers each with a DirectAck.
	DirectProtocol = "/weft/dm/1.0.0"
	// CallProtocol carries one call per stream: a CallRequest, then
	// CallFrames back (started, delta…, then final or error). The caller
	// resets the stream to cancel.
	CallProtocol = "/weft/call/1.0.0"
	// CallKeepProtocol is CallProtocol with the stream kept for further
	// calls, one at a time: once the caller has read a call's final or
	// error frame it may write the next CallRequest on the same stream
	// (whose frames count seq from 0 again), or close its side to end the
	// stream. While a call is answered, the caller's side ending or being
	// reset cancels it, and a byte from the caller is a protocol error (the
	// callee resets). The callee closes a stream that stays idle between
	// calls (CallKeepIdle), or sooner when it shuts down; a caller reuses
	// only streams idle for less than that. A caller offers this protocol
	// first and CallProtocol second, so a callee that speaks only
	// CallProtocol still serves it.
	CallKeepProtocol = "/weft/call/1.1.0"
	// AgentProtocol serves a node's agent card and health: the asker writes
	// an AgentQuery, the node answers with a Card or a Health.
	AgentProtocol = "/weft/agent/1.0.0"
)

// CallKeepIdle is how long a callee keeps a CallKeepProtocol stream idle
// between calls before it closes it.
const CallKeepIdle = 30 * time.Second

// CapabilityNamespace is the DHT (rendezvous) namespace under which the
// providers of capability name advertise themselves.
func CapabilityNamespace(name string) string { return "weft/cap/" + name }

// MaxNameLen bounds capability and handler names.
const MaxNameLen = 64

// CheckName checks a capability or handler name: 1–64 characters of
// a–z, A–Z, 0–9, '_', '-', '.', '/' and ':' , starting with a letter or
// digit.
func CheckName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("%w: name %q must be 1 to %d characters", ErrMalformed, truncate(s, 80), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '_' && c != '-' && c != '.' && c != '/' && c != ':')) {
			return fmt.Errorf("%w: name %q: letters, digits and _-./: only, starting with a letter or digit", ErrMalformed, truncate(s, 80))
		}
	}
	return nil
}

// DirectAck answers one direct message: OK, or why it was refused.
type DirectAck struct {
	OK    bool       `json:"ok,omitempty"`
	Error *CallError `json:"error,omitempty"`
}

// CallRequest opens a call.
type CallRequest struct {
	Name     string            `json:"name"`
	Input    json.RawMessage   `json:"input,omitempty"` // a JSON value; null when absent
	Meta     map[string]string `json:"meta,omitempty"`
	Deadline int64             `json:"deadline,omitempty"` // Unix ms by the caller's clock; 0 = none
	Stream   bool              `json:"stream,omitempty"`   // the caller wants started/delta…/final
}

// Call frame kinds.
const (
	FrameStarted = "started"
	FrameDelta   = "delta"
	FrameFinal   = "final"
	FrameError   = "error"
)

// CallFrame is one frame of a call's answer. Seq counts frames from 0 in
// the order they were sent; a unary call is answered by one final or error
// frame.
type CallFrame struct {
	Seq   uint64            `json:"seq"`
	Kind  string            `json:"kind"`
	Data  json.RawMessage   `json:"data,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
	Error *CallError        `json:"error,omitempty"`
}

// Error codes of calls and direct messages. They are stable: agents and
// clients switch on them.
const (
	CodeNoHandler     = "no_handler"        // nobody serves that name there
	CodeUnreachable   = "unreachable"       // the peer could not be reached
	CodeDeadline      = "deadline_exceeded" // the call's deadline passed
	CodeCancelled     = "cancelled"         // the caller gave up
	CodeHandlerFailed = "handler_failed"    // the handler ran and failed
	CodeBadRequest    = "bad_request"       // malformed request or frame
	CodeOverloaded    = "overloaded"        // too many calls in flight
	CodeRefused       = "refused"           // a direct message was not accepted
	CodeForbidden     = "forbidden"         // the callee's call policy does not allow the caller
	CodeInternal      = "internal"
)

// CallError is a typed error carried in frames and direct message acks.
type CallError struct {
	Code    string `json:"code"`
	Message string `json:"message"` // for humans; not to be parsed
	// Reason says why a direct message was refused when Code is
	// CodeRefused: the validation code of the failure (see Code:
	// "clock_skew", "expired", "bad_signature", "malformed", …), or
	// "forbidden" when the recipient's DM policy takes nothing from the
	// sender; so that a sender can tell a refusal that may pass later from
	// one that never will without reading Message. With CodeOverloaded it
	// says which limit of the recipient's DM policy the sender is over:
	// "rate_limited" or "quota" (retry later). Empty otherwise, and from
	// recipients older than the field.
	Reason string `json:"reason,omitempty"`
}

func (e *CallError) Error() string { return e.Code + ": " + e.Message }

// Is makes errors.Is match CallErrors by code.
func (e *CallError) Is(target error) bool {
	t, ok := target.(*CallError)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Errorf returns a CallError with code and a formatted message.
func Errorf(code, format string, args ...any) *CallError {
	return &CallError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AgentQuery asks a node for its card or its health.
type AgentQuery struct {
	Get string `json:"get"` // "card" or "health"
}

// Card is an agent card: who a node is and what it can do.
type Card struct {
	ID           string       `json:"id"` // peer ID
	Name         string       `json:"name,omitempty"`
	Description  string       `json:"description,omitempty"`
	Version      string       `json:"version,omitempty"`
	Capabilities []Capability `json:"capabilities,omitempty"`
}

// Capability is something an agent offers, usually a callable name.
type Capability struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`  // JSON schema
	OutputSchema json.RawMessage `json:"output_schema,omitempty"` // JSON schema
	// Access says who may call it: "anyone", or "restricted" (only the
	// peers the node trusts or lists; others get forbidden). Set by the
	// node for the names its handlers serve; absent for a capability no
	// handler serves now.
	Access string `json:"access,omitempty"`
}

// Has reports whether c offers capability name.
func (c *Card) Has(name string) bool {
	for _, cp := range c.Capabilities {
		if cp.Name == name {
			return true
		}
	}
	return false
}

// Health is a node's heartbeat: whether it takes work and how busy it is.
type Health struct {
	Status      string  `json:"status"` // "ok" or "busy"
	ActiveCalls int     `json:"active_calls"`
	Handlers    int     `json:"handlers"` // handler connections registered
	Load        float64 `json:"load"`     // active calls per handler connection
	UptimeS     int64   `json:"uptime_s"`
	Time        int64   `json:"time"` // Unix ms at the node
}
