// # IACP interop
//
// [ImportIACP] and [ExportIACP] translate between weft's direct messages and
// the JSON envelopes of IACP 1.x, the Inter-Agent Communication Protocol of
// Works With Agents: iacp.md version 1.1.0 (whose definitions are unchanged
// since 1.0.0) and the Internet-Draft draft-vystartas-iacp-00, both kept in
// github.com/workswithagents/specs and published at
// https://workswithagents.dev/specs/iacp.md. The spec draws the envelope in
// YAML. The JSON used here follows the spec's reference clients
// (iacp/v1.1.0/typescript.md, iacp/v1.0.0/curl.md): envelope fields at the
// top level, the message nested under "message".
//
//	{"version":"1.0","message_id":UUIDv7,"correlation_id":UUID,
//	 "sender":{"agent_id":S,"identity_sig":HEX},
//	 "recipient":{"agent_id":PEER_ID,"channel":C},
//	 "timestamp":RFC3339,"ttl_seconds":N,
//	 "message":{"type":KIND,"intent":I,"payload":{…}},
//	 "x-weft":{…}}
//
// ImportIACP also reads the JSON form of the YAML drawing, where these
// envelope fields sit in an "envelope" object beside "message". Giving
// both forms in one document is refused.
//
// The fields map as follows (import: IACP → weft; export: weft → IACP):
//
//	version              must be 1.x: another major version is ErrVersion.
//	                     Export writes "1.0".
//	message_id           meta "iacp.id": a UUIDv7 (RFC 9562), stored in lower
//	                     case. Export takes it from meta "iacp.id", or else
//	                     derives one (below).
//	correlation_id       meta "correlation". Any UUID version is accepted,
//	                     because the spec's reference clients send v4. Export
//	                     writes it only when meta "correlation" is a lower-case
//	                     UUID. Any other value stays in x-weft.meta.
//	sender.agent_id      meta "iacp.sender": what the envelope claims, not
//	                     checked. weft vouches only for the daemon that signs.
//	                     Export uses meta "iacp.sender", else "from".
//	sender.identity_sig  On import: neither checked nor kept. The draft does
//	                     not define the canonical serialization it signs, and
//	                     the importing daemon signs the message itself.
//	                     On export: the weft signature in hex (Ed25519 by the
//	                     key behind x-weft.from, over SigningDomain followed by
//	                     x-weft.body).
//	recipient.agent_id   The recipient: a libp2p peer ID (in any form
//	                     peer.Decode accepts, written in canonical form).
//	                     space = InboxSpace(recipient), refs.nodes = [recipient].
//	                     The spec's wildcards are refused: a direct message has
//	                     exactly one recipient.
//	recipient.channel    meta "iacp.channel": a name accepted by CheckName.
//	timestamp            created_at (RFC 3339 with any offset; time finer than
//	                     a millisecond is dropped; before 1970 is refused).
//	                     Export writes it in UTC, adding milliseconds only when
//	                     they are not zero.
//	ttl_seconds          ttl: a whole number from 1 to MaxTTL. Leaving it out
//	                     means no expiry. 0 is refused, because in IACP it
//	                     would mean the message has already expired.
//	message.type         type: request, response, event, error or heartbeat.
//	message.intent       meta "iacp.intent": a name accepted by CheckName. It
//	                     may be left out (the spec's error messages have none).
//	message.payload      content: must be a JSON object (the spec's payload
//	                     is always one), at most MaxMessageSize bytes. Import
//	                     copies it byte for byte. Export writes it compacted
//	                     (white space between tokens removed), because it is
//	                     written through encoding/json.
//
// IACP 1.x defines no metadata or trace fields, and it ignores fields it
// does not know. So weft puts everything the spec has no field for in one
// top-level extension object, "x-weft" (the draft reserves the x- prefix for
// custom names):
//
//	id        export only: the weft message ID.
//	from      export only: the peer ID that signed the message.
//	body      export only: the exact signed body, as a JSON string.
//	          SHA-256(body) is id, and sender.identity_sig verifies over it,
//	          so a reader can check the export without trusting whoever
//	          relayed it.
//	reply_to  refs.messages[0]: the weft message this one answers. It is
//	          read on import and written on export.
//	meta      every other meta entry, such as traceparent, tracestate and
//	          session. It is read on import and written on export. On
//	          import it may not set a key that an envelope field maps to,
//	          nor a local key.
//
// ImportIACP ignores x-weft's id, from and body: the draft it returns is a
// new message, which the importing daemon signs.
//
// When meta has no "iacp.id", ExportIACP derives the message_id, so that
// every export is reproducible. It is a UUIDv7: its 48-bit unix_ts_ms is
// created_at, and its bytes 6–15 are bytes 0–9 of the weft message ID with
// the version (7) and variant (10) bits set on top.
//
// ImportIACP does not look at the clock. The daemon's Sign and Validate
// check skew and TTL.
package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"
)

// IACPVersion is the IACP envelope version ExportIACP writes. ImportIACP
// reads any 1.x.
const IACPVersion = "1.0"

// MaxIACPSize bounds the envelope ImportIACP reads. It leaves room for a
// payload of MaxMessageSize carried twice, once as the payload and once,
// escaped, inside x-weft.body.
const MaxIACPSize = 4 << 20

// Meta keys that IACP fields map to, besides MetaCorrelation.
const (
	MetaIACPID      = "iacp.id"      // message_id
	MetaIACPChannel = "iacp.channel" // recipient.channel
	MetaIACPIntent  = "iacp.intent"  // message.intent
	MetaIACPSender  = "iacp.sender"  // sender.agent_id
)

// maxIACPAgentID bounds sender.agent_id so that it fits in one meta value
// under the default limits.
const maxIACPAgentID = 1024

// maxIACPTime is the last millisecond RFC 3339 can write (9999-12-31T23:59:59.999Z).
const maxIACPTime = 253402300799999

// IACPEnvelope is an IACP 1.x envelope in its JSON form, with IACP's field
// names. Weft is weft's "x-weft" extension.
type IACPEnvelope struct {
	Version       string        `json:"version"`
	MessageID     string        `json:"message_id"`
	CorrelationID string        `json:"correlation_id,omitempty"`
	Sender        IACPSender    `json:"sender"`
	Recipient     IACPRecipient `json:"recipient"`
	Timestamp     string        `json:"timestamp"`
	TTLSeconds    int64         `json:"ttl_seconds,omitempty"`
	Message       IACPMessage   `json:"message"`
	Weft          *IACPWeft     `json:"x-weft,omitempty"`
}

// IACPSender is an envelope's sender.
type IACPSender struct {
	AgentID     string `json:"agent_id"`
	IdentitySig string `json:"identity_sig,omitempty"`
}

// IACPRecipient is an envelope's recipient.
type IACPRecipient struct {
	AgentID string `json:"agent_id"`
	Channel string `json:"channel,omitempty"`
}

// IACPMessage is an envelope's message: its kind, intent and payload.
type IACPMessage struct {
	Type    string          `json:"type"`
	Intent  string          `json:"intent,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// IACPWeft is the "x-weft" extension, described in the package
// documentation.
type IACPWeft struct {
	ID      string            `json:"id,omitempty"`
	From    string            `json:"from,omitempty"`
	ReplyTo string            `json:"reply_to,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// IACPImport is what ImportIACP reads from an envelope. The daemon signs
// Draft (as itself) and sends the message to Recipient.
type IACPImport struct {
	Recipient peer.ID
	Draft     Draft
	// Envelope is the envelope as read, in its flat form, with IDs in lower
	// case and the recipient in canonical form. It includes the fields weft
	// does not map, such as sender.identity_sig.
	Envelope IACPEnvelope
}

// Field names of an envelope and of its objects. As for message bodies,
// keys that only case-fold to one of these are refused.
var (
	iacpEnvelopeFields  = []string{"version", "message_id", "correlation_id", "sender", "recipient", "timestamp", "ttl_seconds"}
	iacpTopFields       = append([]string{"envelope", "message", "x-weft"}, iacpEnvelopeFields...)
	iacpSenderFields    = []string{"agent_id", "identity_sig"}
	iacpRecipientFields = []string{"agent_id", "channel"}
	iacpMessageFields   = []string{"type", "intent", "payload"}
	iacpWeftFields      = []string{"id", "from", "body", "reply_to", "meta"}
)

// ImportIACP reads an IACP 1.x envelope (JSON) and returns what a weft
// daemon needs to sign and send it as a direct message. It is strict about
// the fields it maps and ignores fields it does not know. Every error wraps
// one of this package's sentinels: ErrTooLarge, ErrVersion, or ErrMalformed.
func ImportIACP(b []byte) (*IACPImport, error) {
	if len(b) > MaxIACPSize {
		return nil, errorf(ErrTooLarge, "iacp envelope is %d bytes, limit %d", len(b), MaxIACPSize)
	}
	if !utf8.Valid(b) {
		return nil, errorf(ErrMalformed, "iacp envelope is not UTF-8")
	}
	top, err := checkObject(b, iacpTopFields)
	if err != nil {
		return nil, fmt.Errorf("iacp envelope: %w", err)
	}
	envFields := top
	if raw, ok := present(top, "envelope"); ok {
		for _, f := range iacpEnvelopeFields {
			if _, dup := top[f]; dup {
				return nil, iacpErr("envelope", ErrMalformed, "given beside a top-level %q: use one form", f)
			}
		}
		if envFields, err = checkObject(raw, iacpEnvelopeFields); err != nil {
			return nil, fmt.Errorf("iacp envelope: %w", err)
		}
	}

	var imp IACPImport
	env := &imp.Envelope
	if err := readIACPEnvelope(envFields, env); err != nil {
		return nil, err
	}
	if err := readIACPMessage(top, &env.Message); err != nil {
		return nil, err
	}
	if raw, ok := present(top, "x-weft"); ok {
		env.Weft = new(IACPWeft)
		if err := readIACPWeft(raw, env.Weft); err != nil {
			return nil, err
		}
	}

	rcpt, err := peer.Decode(env.Recipient.AgentID)
	if err != nil {
		return nil, iacpErr("recipient.agent_id", ErrMalformed, "%q is not a libp2p peer ID", truncate(env.Recipient.AgentID, 80))
	}
	env.Recipient.AgentID = rcpt.String()
	created, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil {
		return nil, iacpErr("timestamp", ErrMalformed, "%q is not an RFC 3339 time", truncate(env.Timestamp, 80))
	}
	if created.UnixMilli() <= 0 {
		return nil, iacpErr("timestamp", ErrMalformed, "%s is not after 1970-01-01T00:00:00Z", env.Timestamp)
	}

	meta := map[string]string{
		MetaIACPID:     env.MessageID,
		MetaIACPSender: env.Sender.AgentID,
	}
	set := func(k, v string) {
		if v != "" {
			meta[k] = v
		}
	}
	set(MetaCorrelation, env.CorrelationID)
	set(MetaIACPChannel, env.Recipient.Channel)
	set(MetaIACPIntent, env.Message.Intent)
	d := Draft{
		Space:     InboxSpace(rcpt),
		CreatedAt: time.UnixMilli(created.UnixMilli()).UTC(),
		Refs:      Refs{Nodes: []string{rcpt.String()}},
		Type:      env.Message.Type,
		TTL:       time.Duration(env.TTLSeconds) * time.Second,
		Content:   bytes.Clone(env.Message.Payload),
	}
	if w := env.Weft; w != nil {
		if w.ReplyTo != "" {
			id, err := ParseID(w.ReplyTo)
			if err != nil {
				return nil, iacpErr("x-weft.reply_to", ErrMalformed, "%v", err)
			}
			d.Refs.Messages = []ID{id}
		}
		for k, v := range w.Meta {
			if _, taken := meta[k]; taken || isIACPMetaKey(k) {
				return nil, iacpErr("x-weft.meta", ErrMalformed, "key %q is set by the envelope's own fields", truncate(k, 80))
			}
			if IsLocalMeta(k) {
				return nil, iacpErr("x-weft.meta", ErrMalformed, "key %q is local and is never sent", truncate(k, 80))
			}
			meta[k] = v
		}
	}
	if err := checkIACPMeta(meta); err != nil {
		return nil, err
	}
	d.Meta = meta
	imp.Recipient = rcpt
	imp.Draft = d
	return &imp, nil
}

// isIACPMetaKey reports whether meta key k is one that an IACP field always
// maps to. MetaCorrelation is not one of them: a correlation that is not a
// UUID travels in x-weft.meta.
func isIACPMetaKey(k string) bool {
	return k == MetaIACPID || k == MetaIACPSender || k == MetaIACPChannel || k == MetaIACPIntent
}

// checkIACPMeta holds imported meta to what an agent may set and to the
// default limits, so that a draft that passes here is not refused by Sign
// for its meta.
func checkIACPMeta(meta map[string]string) error {
	if err := ValidateMeta(meta); err != nil {
		return fmt.Errorf("iacp meta: %w", err)
	}
	lim := DefaultLimits()
	if len(meta) > lim.MaxMeta {
		return iacpErr("meta", ErrMalformed, "%d entries, limit %d", len(meta), lim.MaxMeta)
	}
	for k, v := range meta {
		if len(k) > lim.MaxMetaLen || len(v) > lim.MaxMetaLen {
			return iacpErr("meta", ErrMalformed, "%q: keys and values are at most %d bytes", truncate(k, 80), lim.MaxMetaLen)
		}
	}
	return nil
}

func readIACPEnvelope(f map[string]json.RawMessage, env *IACPEnvelope) error {
	var err error
	if env.Version, err = iacpString(f, "version", "version", true); err != nil {
		return err
	}
	if err := checkIACPVersion(env.Version); err != nil {
		return err
	}
	if env.MessageID, err = iacpString(f, "message_id", "message_id", true); err != nil {
		return err
	}
	if env.MessageID, err = checkUUIDv7(env.MessageID); err != nil {
		return fmt.Errorf("iacp message_id: %w", err)
	}
	if env.CorrelationID, err = iacpString(f, "correlation_id", "correlation_id", false); err != nil {
		return err
	}
	if env.CorrelationID != "" {
		u, err := parseUUID(env.CorrelationID)
		if err != nil {
			return fmt.Errorf("iacp correlation_id: %w", err)
		}
		env.CorrelationID = formatUUID(u)
	}

	sender, err := iacpObject(f, "sender", "sender", iacpSenderFields)
	if err != nil {
		return err
	}
	if env.Sender.AgentID, err = iacpString(sender, "agent_id", "sender.agent_id", true); err != nil {
		return err
	}
	if n := len(env.Sender.AgentID); n > maxIACPAgentID {
		return iacpErr("sender.agent_id", ErrMalformed, "%d bytes, limit %d", n, maxIACPAgentID)
	}
	if env.Sender.IdentitySig, err = iacpString(sender, "identity_sig", "sender.identity_sig", false); err != nil {
		return err
	}

	rcpt, err := iacpObject(f, "recipient", "recipient", iacpRecipientFields)
	if err != nil {
		return err
	}
	if env.Recipient.AgentID, err = iacpString(rcpt, "agent_id", "recipient.agent_id", true); err != nil {
		return err
	}
	if env.Recipient.Channel, err = iacpName(rcpt, "channel", "recipient.channel"); err != nil {
		return err
	}

	if env.Timestamp, err = iacpString(f, "timestamp", "timestamp", true); err != nil {
		return err
	}
	if raw, ok := present(f, "ttl_seconds"); ok {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return iacpErr("ttl_seconds", ErrMalformed, "%s is not a whole number of seconds", truncate(string(raw), 40))
		}
		if n < 1 || n > MaxTTL {
			return iacpErr("ttl_seconds", ErrMalformed, "%d outside 1..%d (leave it out for no expiry)", n, MaxTTL)
		}
		env.TTLSeconds = n
	}
	return nil
}

func readIACPMessage(top map[string]json.RawMessage, m *IACPMessage) error {
	f, err := iacpObject(top, "message", "message", iacpMessageFields)
	if err != nil {
		return err
	}
	if m.Type, err = iacpString(f, "type", "message.type", true); err != nil {
		return err
	}
	if !IsKind(m.Type) {
		return iacpErr("message.type", ErrMalformed, "%q is not one of %s", truncate(m.Type, 40), strings.Join(Kinds, ", "))
	}
	if m.Intent, err = iacpName(f, "intent", "message.intent"); err != nil {
		return err
	}
	raw, ok := present(f, "payload")
	if !ok {
		return iacpErr("message.payload", ErrMalformed, "missing")
	}
	if raw[0] != '{' {
		return iacpErr("message.payload", ErrMalformed, "must be a JSON object, not %s", jsonKind(raw))
	}
	if len(raw) > MaxMessageSize {
		return iacpErr("message.payload", ErrTooLarge, "%d bytes, limit %d", len(raw), MaxMessageSize)
	}
	m.Payload = raw
	return nil
}

func readIACPWeft(raw json.RawMessage, w *IACPWeft) error {
	if raw[0] != '{' {
		return iacpErr("x-weft", ErrMalformed, "must be a JSON object, not %s", jsonKind(raw))
	}
	f, err := checkObject(raw, iacpWeftFields)
	if err != nil {
		return fmt.Errorf("iacp x-weft: %w", err)
	}
	for _, s := range []struct {
		dst *string
		key string
	}{{&w.ID, "id"}, {&w.From, "from"}, {&w.Body, "body"}, {&w.ReplyTo, "reply_to"}} {
		if *s.dst, err = iacpString(f, s.key, "x-weft."+s.key, false); err != nil {
			return err
		}
	}
	mraw, ok := present(f, "meta")
	if !ok {
		return nil
	}
	if _, err := checkObject(mraw, nil); err != nil { // refuses repeated keys
		return fmt.Errorf("iacp x-weft.meta: %w", err)
	}
	if err := json.Unmarshal(mraw, &w.Meta); err != nil {
		return iacpErr("x-weft.meta", ErrMalformed, "must map names to strings")
	}
	return nil
}

// present returns f[key] unless it is absent or null.
func present(f map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := f[key]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// iacpString reads f[key] as a string. An absent, null or empty string is
// "" — an error if required.
func iacpString(f map[string]json.RawMessage, key, field string, required bool) (string, error) {
	raw, ok := present(f, key)
	var s string
	if ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", iacpErr(field, ErrMalformed, "must be a string, not %s", jsonKind(raw))
		}
	}
	if s == "" && required {
		return "", iacpErr(field, ErrMalformed, "missing")
	}
	return s, nil
}

// iacpName reads an optional channel or intent name.
func iacpName(f map[string]json.RawMessage, key, field string) (string, error) {
	s, err := iacpString(f, key, field, false)
	if err != nil || s == "" {
		return "", err
	}
	if err := CheckName(s); err != nil {
		return "", fmt.Errorf("iacp %s: %w", field, err)
	}
	return s, nil
}

// iacpObject reads f[key], which must be there, as an object with the given
// known fields.
func iacpObject(f map[string]json.RawMessage, key, field string, known []string) (map[string]json.RawMessage, error) {
	raw, ok := present(f, key)
	if !ok {
		return nil, iacpErr(field, ErrMalformed, "missing")
	}
	if raw[0] != '{' {
		return nil, iacpErr(field, ErrMalformed, "must be a JSON object, not %s", jsonKind(raw))
	}
	obj, err := checkObject(raw, known)
	if err != nil {
		return nil, fmt.Errorf("iacp %s: %w", field, err)
	}
	return obj, nil
}

// checkIACPVersion accepts "1.MINOR".
func checkIACPVersion(v string) error {
	major, minor, ok := strings.Cut(v, ".")
	if !ok || !isDigits(major) || !isDigits(minor) {
		return iacpErr("version", ErrMalformed, "%q is not MAJOR.MINOR", truncate(v, 40))
	}
	if strings.TrimLeft(major, "0") != "1" {
		return iacpErr("version", ErrVersion, "%q, this node speaks IACP 1.x", truncate(v, 40))
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// jsonKind names the kind of a JSON value for error messages.
func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func iacpErr(field string, kind error, format string, args ...any) error {
	return fmt.Errorf("iacp %s: %w", field, errorf(kind, format, args...))
}

// parseUUID reads a UUID in its 8-4-4-4-12 hex form, in either case.
func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, errorf(ErrMalformed, "%q is not a UUID (8-4-4-4-12 hex digits)", truncate(s, 80))
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, errorf(ErrMalformed, "%q is not a UUID (8-4-4-4-12 hex digits)", truncate(s, 80))
	}
	return u, nil
}

// checkUUIDv7 checks that s is an RFC 9562 version 7 UUID and returns it in
// lower case.
func checkUUIDv7(s string) (string, error) {
	u, err := parseUUID(s)
	if err != nil {
		return "", err
	}
	if v := u[6] >> 4; v != 7 {
		return "", errorf(ErrMalformed, "%s is a version %d UUID, want version 7", s, v)
	}
	if u[8]>>6 != 0b10 {
		return "", errorf(ErrMalformed, "%s does not have the RFC 9562 variant", s)
	}
	return formatUUID(u), nil
}

func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// iacpMessageID derives the UUIDv7 of a message that carries none: its
// timestamp is created_at and its other bits come from the message ID.
func iacpMessageID(createdAt int64, id ID) string {
	var u [16]byte
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(createdAt))
	copy(u[0:6], ts[2:8])
	copy(u[6:16], id[0:10])
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return formatUUID(u)
}

// iacpTime writes ms as an RFC 3339 UTC time. It adds milliseconds only
// when they are not zero.
func iacpTime(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	if ms%1000 == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04:05.000Z")
}

// ExportIACP writes m, a validated direct message, as an IACP 1.x envelope
// (compact JSON). The same message always gives the same bytes. The mapping
// is described in the package documentation. Errors wrap ErrMalformed or
// ErrBadSignature.
func ExportIACP(m *Message) ([]byte, error) {
	if len(m.Refs.Nodes) != 1 {
		return nil, errorf(ErrMalformed, "iacp export: a direct message names one recipient in refs.nodes, this one %d", len(m.Refs.Nodes))
	}
	rcpt, err := peer.Decode(m.Refs.Nodes[0])
	if err != nil {
		return nil, errorf(ErrMalformed, "iacp export: refs.nodes: %q is not a peer ID", truncate(m.Refs.Nodes[0], 80))
	}
	if err := m.CheckDirect(rcpt); err != nil {
		return nil, fmt.Errorf("iacp export: %w", err)
	}
	if len(m.Sig) != SignatureSize {
		return nil, errorf(ErrBadSignature, "iacp export: signature is %d bytes", len(m.Sig))
	}
	if m.CreatedAt <= 0 || m.CreatedAt > maxIACPTime {
		return nil, errorf(ErrMalformed, "iacp export: created_at %d is outside what RFC 3339 can write", m.CreatedAt)
	}

	rest := make(map[string]string, len(m.Meta))
	for k, v := range m.Meta {
		rest[k] = v
	}
	take := func(k string) (string, bool) {
		v, ok := rest[k]
		delete(rest, k)
		return v, ok
	}
	env := IACPEnvelope{
		Version:    IACPVersion,
		Sender:     IACPSender{AgentID: m.From, IdentitySig: hex.EncodeToString(m.Sig)},
		Recipient:  IACPRecipient{AgentID: rcpt.String()},
		Timestamp:  iacpTime(m.CreatedAt),
		TTLSeconds: m.TTL,
		Message:    IACPMessage{Type: m.Type, Payload: m.Content},
		Weft:       &IACPWeft{ID: m.ID.String(), From: m.From, Body: string(m.Body)},
	}
	if v, ok := take(MetaIACPID); ok {
		if env.MessageID, err = checkUUIDv7(v); err != nil {
			return nil, fmt.Errorf("iacp export: meta %q: %w", MetaIACPID, err)
		}
	} else {
		env.MessageID = iacpMessageID(m.CreatedAt, m.ID)
	}
	if v, ok := rest[MetaCorrelation]; ok {
		if u, err := parseUUID(v); err == nil && formatUUID(u) == v {
			env.CorrelationID = v
			delete(rest, MetaCorrelation)
		}
	}
	if v, ok := take(MetaIACPSender); ok {
		if v == "" || len(v) > maxIACPAgentID {
			return nil, errorf(ErrMalformed, "iacp export: meta %q must be 1..%d bytes", MetaIACPSender, maxIACPAgentID)
		}
		env.Sender.AgentID = v
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{MetaIACPChannel, &env.Recipient.Channel}, {MetaIACPIntent, &env.Message.Intent}} {
		if v, ok := take(f.key); ok {
			if err := CheckName(v); err != nil {
				return nil, fmt.Errorf("iacp export: meta %q: %w", f.key, err)
			}
			*f.dst = v
		}
	}
	if len(m.Refs.Messages) == 1 {
		env.Weft.ReplyTo = m.Refs.Messages[0].String()
	}
	if len(rest) > 0 {
		env.Weft.Meta = rest
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&env); err != nil {
		return nil, errorf(ErrMalformed, "iacp export: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
