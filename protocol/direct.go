package protocol

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Direct messages (IACP semantics) are ordinary signed messages whose space
// is the recipient's inbox: Space = InboxSpace(recipient), refs.nodes =
// [recipient], type = one of the Kind constants. Binding the recipient into
// the signed bytes means a direct message cannot be replayed to anyone
// else. A response or error names the request it answers in refs.messages
// and carries the request's correlation ID in meta.
const (
	KindRequest   = "request"
	KindResponse  = "response"
	KindEvent     = "event"
	KindError     = "error"
	KindHeartbeat = "heartbeat"
)

// Kinds lists the direct message kinds.
var Kinds = []string{KindRequest, KindResponse, KindEvent, KindError, KindHeartbeat}

// Well-known meta keys. They flow from a request into its response and into
// the calls made while serving it (see Inherit).
const (
	MetaTraceparent = "traceparent" // W3C trace context
	MetaTracestate  = "tracestate"
	MetaSession     = "session"
	MetaCorrelation = "correlation"
)

// LocalMetaPrefix marks meta keys that never leave the daemon they were set
// on: StripLocal removes them before anything is signed or sent.
const LocalMetaPrefix = "local."

// inboxDomain separates inbox IDs from space IDs and every other hash.
const inboxDomain = "weft/inbox/v1\x00"

// InboxSpace returns the space ID direct messages to p are signed under. No
// open space name hashes to it.
func InboxSpace(p peer.ID) ID {
	h := sha256.New()
	h.Write([]byte(inboxDomain))
	h.Write([]byte(p))
	var id ID
	h.Sum(id[:0])
	return id
}

// IsKind reports whether k is a direct message kind.
func IsKind(k string) bool { return slices.Contains(Kinds, k) }

// CheckDirect checks that m, already validated, is a well-formed direct
// message to recipient: signed under recipient's inbox, addressed to it
// alone, of a known kind, with no causal parents, and answering at most one
// message.
func (m *Message) CheckDirect(recipient peer.ID) error {
	if m.Space != InboxSpace(recipient) {
		return errorf(ErrMalformed, "direct message is not signed for %s's inbox", recipient)
	}
	if len(m.Refs.Nodes) != 1 || m.Refs.Nodes[0] != recipient.String() {
		return errorf(ErrMalformed, "direct message must name its recipient %s alone in refs.nodes", recipient)
	}
	if !IsKind(m.Type) {
		return errorf(ErrMalformed, "direct message type %q is not one of %s", m.Type, strings.Join(Kinds, ", "))
	}
	if len(m.Prev) != 0 {
		return errorf(ErrMalformed, "direct message has prev")
	}
	if len(m.Refs.Messages) > 1 {
		return errorf(ErrMalformed, "direct message answers %d messages, at most 1", len(m.Refs.Messages))
	}
	for k := range m.Meta {
		if IsLocalMeta(k) {
			return errorf(ErrMalformed, "meta key %q is local and must not be sent", k)
		}
	}
	return nil
}

// IsLocalMeta reports whether meta key k stays on its daemon.
func IsLocalMeta(k string) bool { return strings.HasPrefix(k, LocalMetaPrefix) }

// StripLocal returns meta without its local keys (nil if nothing is left).
// meta itself is not modified.
func StripLocal(meta map[string]string) map[string]string {
	var out map[string]string
	for k, v := range meta {
		if IsLocalMeta(k) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(meta))
		}
		out[k] = v
	}
	return out
}

// Inherit returns the meta a response or a nested call carries, given the
// meta of the request it descends from: every key but the local ones, with
// the traceparent turned into a child span (same trace, new span ID) when
// child is true. Keys in own override inherited ones.
func Inherit(parent, own map[string]string, child bool) map[string]string {
	out := StripLocal(parent)
	if tp, ok := out[MetaTraceparent]; ok && child {
		t, err := ParseTraceparent(tp)
		if err != nil {
			delete(out, MetaTraceparent) // a broken parent trace is not passed on
			delete(out, MetaTracestate)
		} else {
			out[MetaTraceparent] = t.Child().String()
		}
	}
	for k, v := range own {
		if out == nil {
			out = make(map[string]string, len(own))
		}
		out[k] = v
	}
	return out
}

// ValidateMeta checks meta that an agent supplies against the limits a
// signed message has (DefaultLimits): at most 64 keys, keys non-empty and
// printable, keys and values at most 1 KiB.
func ValidateMeta(meta map[string]string) error {
	lim := DefaultLimits()
	if len(meta) > lim.MaxMeta {
		return fmt.Errorf("%w: %d meta keys, at most %d", ErrMalformed, len(meta), lim.MaxMeta)
	}
	for k, v := range meta {
		if k == "" || len(k) > lim.MaxMetaLen || strings.ContainsFunc(k, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
			return fmt.Errorf("%w: bad meta key %q", ErrMalformed, truncate(k, 80))
		}
		if len(v) > lim.MaxMetaLen {
			return fmt.Errorf("%w: meta %q is %d bytes, at most %d", ErrMalformed, truncate(k, 80), len(v), lim.MaxMetaLen)
		}
	}
	return nil
}
