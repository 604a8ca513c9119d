package iacp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Field names of an envelope and of its objects. As for message bodies,
// keys that only case-fold to one of these are refused.
var (
	envelopeFields  = []string{"version", "message_id", "correlation_id", "sender", "recipient", "timestamp", "ttl_seconds"}
	topFields       = append([]string{"envelope", "message", "x-weft"}, envelopeFields...)
	senderFields    = []string{"agent_id", "identity_sig"}
	recipientFields = []string{"agent_id", "channel"}
	messageFields   = []string{"type", "intent", "payload"}
	weftFields      = []string{"id", "from", "body", "reply_to", "meta"}
)

// Import reads an IACP 1.x envelope (JSON, at most MaxSize bytes) and
// returns what a weft daemon needs to sign and send it as a direct message.
// It is strict about the fields it maps and ignores fields it does not
// know. Every error wraps one of protocol.ErrTooLarge, protocol.ErrVersion
// or protocol.ErrMalformed.
func Import(envelope []byte) (Imported, error) {
	if len(envelope) > MaxSize {
		return Imported{}, errorf(protocol.ErrTooLarge, "iacp envelope is %d bytes, limit %d", len(envelope), MaxSize)
	}
	if !utf8.Valid(envelope) {
		return Imported{}, errorf(protocol.ErrMalformed, "iacp envelope is not UTF-8")
	}
	top, err := protocol.ParseObject(envelope, topFields)
	if err != nil {
		return Imported{}, fmt.Errorf("iacp envelope: %w", err)
	}
	envFields := top
	if raw, ok := present(top, "envelope"); ok {
		for _, f := range envelopeFields {
			if _, dup := top[f]; dup {
				return Imported{}, fieldErr("envelope", protocol.ErrMalformed, "given beside a top-level %q: use one form", f)
			}
		}
		if envFields, err = protocol.ParseObject(raw, envelopeFields); err != nil {
			return Imported{}, fmt.Errorf("iacp envelope: %w", err)
		}
	}

	var imp Imported
	env := &imp.Envelope
	if err := readEnvelope(envFields, env); err != nil {
		return Imported{}, err
	}
	if err := readMessage(top, &env.Message); err != nil {
		return Imported{}, err
	}
	if raw, ok := present(top, "x-weft"); ok {
		env.Weft = new(Weft)
		if err := readWeft(raw, env.Weft); err != nil {
			return Imported{}, err
		}
	}

	rcpt, err := peer.Decode(env.Recipient.AgentID)
	if err != nil {
		return Imported{}, fieldErr("recipient.agent_id", protocol.ErrMalformed, "%q is not a libp2p peer ID", truncate(env.Recipient.AgentID, 80))
	}
	env.Recipient.AgentID = rcpt.String()
	created, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil {
		return Imported{}, fieldErr("timestamp", protocol.ErrMalformed, "%q is not an RFC 3339 time", truncate(env.Timestamp, 80))
	}
	if created.UnixMilli() <= 0 {
		return Imported{}, fieldErr("timestamp", protocol.ErrMalformed, "%s is not after 1970-01-01T00:00:00Z", env.Timestamp)
	}

	meta := map[string]string{
		MetaID:     env.MessageID,
		MetaSender: env.Sender.AgentID,
	}
	set := func(k, v string) {
		if v != "" {
			meta[k] = v
		}
	}
	set(protocol.MetaCorrelation, env.CorrelationID)
	set(MetaChannel, env.Recipient.Channel)
	set(MetaIntent, env.Message.Intent)
	d := protocol.Draft{
		Space:     protocol.InboxSpace(rcpt),
		CreatedAt: time.UnixMilli(created.UnixMilli()).UTC(),
		Refs:      protocol.Refs{Nodes: []string{rcpt.String()}},
		Type:      env.Message.Type,
		TTL:       time.Duration(env.TTLSeconds) * time.Second,
		Content:   bytes.Clone(env.Message.Payload),
	}
	if w := env.Weft; w != nil {
		if w.ReplyTo != "" {
			id, err := protocol.ParseID(w.ReplyTo)
			if err != nil {
				return Imported{}, fieldErr("x-weft.reply_to", protocol.ErrMalformed, "%v", err)
			}
			d.Refs.Messages = []protocol.ID{id}
		}
		for k, v := range w.Meta {
			if _, taken := meta[k]; taken || isMetaKey(k) {
				return Imported{}, fieldErr("x-weft.meta", protocol.ErrMalformed, "key %q is set by the envelope's own fields", truncate(k, 80))
			}
			if protocol.IsLocalMeta(k) {
				return Imported{}, fieldErr("x-weft.meta", protocol.ErrMalformed, "key %q is local and is never sent", truncate(k, 80))
			}
			meta[k] = v
		}
	}
	if err := checkMeta(meta); err != nil {
		return Imported{}, err
	}
	d.Meta = meta
	imp.Recipient = rcpt
	imp.Draft = d
	return imp, nil
}

// checkMeta holds imported meta to what an agent may set and to the default
// limits, so that a draft that passes here is not refused by protocol.Sign
// for its meta.
func checkMeta(meta map[string]string) error {
	if err := protocol.ValidateMeta(meta); err != nil {
		return fmt.Errorf("iacp meta: %w", err)
	}
	lim := protocol.DefaultLimits()
	if len(meta) > lim.MaxMeta {
		return fieldErr("meta", protocol.ErrMalformed, "%d entries, limit %d", len(meta), lim.MaxMeta)
	}
	for k, v := range meta {
		if len(k) > lim.MaxMetaLen || len(v) > lim.MaxMetaLen {
			return fieldErr("meta", protocol.ErrMalformed, "%q: keys and values are at most %d bytes", truncate(k, 80), lim.MaxMetaLen)
		}
	}
	return nil
}

func readEnvelope(f map[string]json.RawMessage, env *Envelope) error {
	var err error
	if env.Version, err = readString(f, "version", "version", true); err != nil {
		return err
	}
	if err := checkVersion(env.Version); err != nil {
		return err
	}
	if env.MessageID, err = readString(f, "message_id", "message_id", true); err != nil {
		return err
	}
	if env.MessageID, err = checkUUIDv7(env.MessageID); err != nil {
		return fmt.Errorf("iacp message_id: %w", err)
	}
	if env.CorrelationID, err = readString(f, "correlation_id", "correlation_id", false); err != nil {
		return err
	}
	if env.CorrelationID != "" {
		u, err := parseUUID(env.CorrelationID)
		if err != nil {
			return fmt.Errorf("iacp correlation_id: %w", err)
		}
		env.CorrelationID = formatUUID(u)
	}

	sender, err := readObject(f, "sender", "sender", senderFields)
	if err != nil {
		return err
	}
	if env.Sender.AgentID, err = readString(sender, "agent_id", "sender.agent_id", true); err != nil {
		return err
	}
	if n := len(env.Sender.AgentID); n > maxAgentID {
		return fieldErr("sender.agent_id", protocol.ErrMalformed, "%d bytes, limit %d", n, maxAgentID)
	}
	if env.Sender.IdentitySig, err = readString(sender, "identity_sig", "sender.identity_sig", false); err != nil {
		return err
	}

	rcpt, err := readObject(f, "recipient", "recipient", recipientFields)
	if err != nil {
		return err
	}
	if env.Recipient.AgentID, err = readString(rcpt, "agent_id", "recipient.agent_id", true); err != nil {
		return err
	}
	if env.Recipient.Channel, err = readName(rcpt, "channel", "recipient.channel"); err != nil {
		return err
	}

	if env.Timestamp, err = readString(f, "timestamp", "timestamp", true); err != nil {
		return err
	}
	if raw, ok := present(f, "ttl_seconds"); ok {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return fieldErr("ttl_seconds", protocol.ErrMalformed, "%s is not a whole number of seconds", truncate(string(raw), 40))
		}
		if n < 1 || n > protocol.MaxTTL {
			return fieldErr("ttl_seconds", protocol.ErrMalformed, "%d outside 1..%d (leave it out for no expiry)", n, protocol.MaxTTL)
		}
		env.TTLSeconds = n
	}
	return nil
}

func readMessage(top map[string]json.RawMessage, m *Message) error {
	f, err := readObject(top, "message", "message", messageFields)
	if err != nil {
		return err
	}
	if m.Type, err = readString(f, "type", "message.type", true); err != nil {
		return err
	}
	if !protocol.IsKind(m.Type) {
		return fieldErr("message.type", protocol.ErrMalformed, "%q is not one of %s", truncate(m.Type, 40), strings.Join(protocol.Kinds, ", "))
	}
	if m.Intent, err = readName(f, "intent", "message.intent"); err != nil {
		return err
	}
	raw, ok := present(f, "payload")
	if !ok {
		return fieldErr("message.payload", protocol.ErrMalformed, "missing")
	}
	if raw[0] != '{' {
		return fieldErr("message.payload", protocol.ErrMalformed, "must be a JSON object, not %s", jsonKind(raw))
	}
	if len(raw) > protocol.MaxMessageSize {
		return fieldErr("message.payload", protocol.ErrTooLarge, "%d bytes, limit %d", len(raw), protocol.MaxMessageSize)
	}
	m.Payload = raw
	return nil
}

func readWeft(raw json.RawMessage, w *Weft) error {
	if raw[0] != '{' {
		return fieldErr("x-weft", protocol.ErrMalformed, "must be a JSON object, not %s", jsonKind(raw))
	}
	f, err := protocol.ParseObject(raw, weftFields)
	if err != nil {
		return fmt.Errorf("iacp x-weft: %w", err)
	}
	for _, s := range []struct {
		dst *string
		key string
	}{{&w.ID, "id"}, {&w.From, "from"}, {&w.Body, "body"}, {&w.ReplyTo, "reply_to"}} {
		if *s.dst, err = readString(f, s.key, "x-weft."+s.key, false); err != nil {
			return err
		}
	}
	mraw, ok := present(f, "meta")
	if !ok {
		return nil
	}
	if _, err := protocol.ParseObject(mraw, nil); err != nil { // refuses repeated keys
		return fmt.Errorf("iacp x-weft.meta: %w", err)
	}
	if err := json.Unmarshal(mraw, &w.Meta); err != nil {
		return fieldErr("x-weft.meta", protocol.ErrMalformed, "must map names to strings")
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

// readString reads f[key] as a string. An absent, null or empty string is
// "" — an error if required.
func readString(f map[string]json.RawMessage, key, field string, required bool) (string, error) {
	raw, ok := present(f, key)
	var s string
	if ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fieldErr(field, protocol.ErrMalformed, "must be a string, not %s", jsonKind(raw))
		}
	}
	if s == "" && required {
		return "", fieldErr(field, protocol.ErrMalformed, "missing")
	}
	return s, nil
}

// readName reads an optional channel or intent name.
func readName(f map[string]json.RawMessage, key, field string) (string, error) {
	s, err := readString(f, key, field, false)
	if err != nil || s == "" {
		return "", err
	}
	if err := protocol.CheckName(s); err != nil {
		return "", fmt.Errorf("iacp %s: %w", field, err)
	}
	return s, nil
}

// readObject reads f[key], which must be there, as an object with the
// given known fields.
func readObject(f map[string]json.RawMessage, key, field string, known []string) (map[string]json.RawMessage, error) {
	raw, ok := present(f, key)
	if !ok {
		return nil, fieldErr(field, protocol.ErrMalformed, "missing")
	}
	if raw[0] != '{' {
		return nil, fieldErr(field, protocol.ErrMalformed, "must be a JSON object, not %s", jsonKind(raw))
	}
	obj, err := protocol.ParseObject(raw, known)
	if err != nil {
		return nil, fmt.Errorf("iacp %s: %w", field, err)
	}
	return obj, nil
}

// checkVersion accepts "1.MINOR".
func checkVersion(v string) error {
	major, minor, ok := strings.Cut(v, ".")
	if !ok || !isDigits(major) || !isDigits(minor) {
		return fieldErr("version", protocol.ErrMalformed, "%q is not MAJOR.MINOR", truncate(v, 40))
	}
	if strings.TrimLeft(major, "0") != "1" {
		return fieldErr("version", protocol.ErrVersion, "%q, this node speaks IACP 1.x", truncate(v, 40))
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
