package iacp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Export writes m, a validated direct message, as an IACP 1.x envelope
// (compact JSON). The same message always gives the same bytes. The mapping
// is described in the package documentation. Errors wrap
// protocol.ErrMalformed or protocol.ErrBadSignature.
func Export(m *protocol.Message) ([]byte, error) {
	if len(m.Refs.Nodes) != 1 {
		return nil, errorf(protocol.ErrMalformed, "iacp export: a direct message names one recipient in refs.nodes, this one %d", len(m.Refs.Nodes))
	}
	rcpt, err := peer.Decode(m.Refs.Nodes[0])
	if err != nil {
		return nil, errorf(protocol.ErrMalformed, "iacp export: refs.nodes: %q is not a peer ID", truncate(m.Refs.Nodes[0], 80))
	}
	if err := m.CheckDirect(rcpt); err != nil {
		return nil, fmt.Errorf("iacp export: %w", err)
	}
	if len(m.Sig) != protocol.SignatureSize {
		return nil, errorf(protocol.ErrBadSignature, "iacp export: signature is %d bytes", len(m.Sig))
	}
	if m.CreatedAt <= 0 || m.CreatedAt > maxTime {
		return nil, errorf(protocol.ErrMalformed, "iacp export: created_at %d is outside what RFC 3339 can write", m.CreatedAt)
	}

	rest := maps.Clone(m.Meta)
	take := func(k string) (string, bool) {
		v, ok := rest[k]
		delete(rest, k)
		return v, ok
	}
	env := Envelope{
		Version:    Version,
		Sender:     Sender{AgentID: m.From, IdentitySig: hex.EncodeToString(m.Sig)},
		Recipient:  Recipient{AgentID: rcpt.String()},
		Timestamp:  formatTime(m.CreatedAt),
		TTLSeconds: m.TTL,
		Message:    Message{Type: m.Type, Payload: m.Content},
		Weft:       &Weft{ID: m.ID.String(), From: m.From, Body: string(m.Body)},
	}
	if v, ok := take(MetaID); ok {
		if env.MessageID, err = checkUUIDv7(v); err != nil {
			return nil, fmt.Errorf("iacp export: meta %q: %w", MetaID, err)
		}
	} else {
		env.MessageID = deriveMessageID(m.CreatedAt, m.ID)
	}
	if v, ok := rest[protocol.MetaCorrelation]; ok {
		if u, err := parseUUID(v); err == nil && formatUUID(u) == v {
			env.CorrelationID = v
			delete(rest, protocol.MetaCorrelation)
		}
	}
	if v, ok := take(MetaSender); ok {
		if v == "" || len(v) > maxAgentID {
			return nil, errorf(protocol.ErrMalformed, "iacp export: meta %q must be 1..%d bytes", MetaSender, maxAgentID)
		}
		env.Sender.AgentID = v
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{MetaChannel, &env.Recipient.Channel}, {MetaIntent, &env.Message.Intent}} {
		if v, ok := take(f.key); ok {
			if err := protocol.CheckName(v); err != nil {
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
		return nil, errorf(protocol.ErrMalformed, "iacp export: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// formatTime writes ms as an RFC 3339 UTC time. It adds milliseconds only
// when they are not zero.
func formatTime(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	if ms%1000 == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04:05.000Z")
}
