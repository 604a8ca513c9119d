package iacp

import (
	"encoding/json"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Version is the IACP envelope version Export writes. Import reads any 1.x.
const Version = "1.0"

// MaxSize bounds the envelope Import reads. It leaves room for a payload of
// protocol.MaxMessageSize carried twice, once as the payload and once,
// escaped, inside x-weft.body.
const MaxSize = 4 << 20

// Meta keys that IACP fields map to, besides protocol.MetaCorrelation
// (correlation_id).
const (
	MetaID      = "iacp.id"      // message_id
	MetaChannel = "iacp.channel" // recipient.channel
	MetaIntent  = "iacp.intent"  // message.intent
	MetaSender  = "iacp.sender"  // sender.agent_id
)

// maxAgentID bounds sender.agent_id so that it fits in one meta value under
// the default limits.
const maxAgentID = 1024

// maxTime is the last millisecond RFC 3339 can write (9999-12-31T23:59:59.999Z).
const maxTime = 253402300799999

// Envelope is an IACP 1.x envelope in its JSON form, with IACP's field
// names. Weft is weft's "x-weft" extension.
type Envelope struct {
	Version       string    `json:"version"`
	MessageID     string    `json:"message_id"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	Sender        Sender    `json:"sender"`
	Recipient     Recipient `json:"recipient"`
	Timestamp     string    `json:"timestamp"`
	TTLSeconds    int64     `json:"ttl_seconds,omitempty"`
	Message       Message   `json:"message"`
	Weft          *Weft     `json:"x-weft,omitempty"`
}

// Sender is an envelope's sender.
type Sender struct {
	AgentID     string `json:"agent_id"`
	IdentitySig string `json:"identity_sig,omitempty"`
}

// Recipient is an envelope's recipient.
type Recipient struct {
	AgentID string `json:"agent_id"`
	Channel string `json:"channel,omitempty"`
}

// Message is an envelope's message: its kind, intent and payload.
type Message struct {
	Type    string          `json:"type"`
	Intent  string          `json:"intent,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// Weft is the "x-weft" extension, described in the package documentation.
type Weft struct {
	ID      string            `json:"id,omitempty"`
	From    string            `json:"from,omitempty"`
	ReplyTo string            `json:"reply_to,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// Imported is what Import reads from an envelope. The daemon signs Draft
// (as itself) and sends the message to Recipient.
type Imported struct {
	Recipient peer.ID
	Draft     protocol.Draft
	// Envelope is the envelope as read, in its flat form, with IDs in lower
	// case and the recipient in canonical form. It includes the fields weft
	// does not map, such as sender.identity_sig.
	Envelope Envelope
}

// isMetaKey reports whether meta key k is one that an IACP field always
// maps to. protocol.MetaCorrelation is not one of them: a correlation that
// is not a UUID travels in x-weft.meta.
func isMetaKey(k string) bool {
	return k == MetaID || k == MetaSender || k == MetaChannel || k == MetaIntent
}

// fieldErr is an error about one envelope field that wraps kind, one of
// protocol's sentinel errors.
func fieldErr(field string, kind error, format string, args ...any) error {
	return fmt.Errorf("iacp %s: %w", field, errorf(kind, format, args...))
}

// errorf wraps kind, one of protocol's sentinel errors, the way protocol's
// own errors do.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
