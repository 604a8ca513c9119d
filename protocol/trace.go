package protocol

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Traceparent is a W3C trace context (version 00): the trace a call belongs
// to and the span that made it.
type Traceparent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// NewTrace starts a new, sampled trace.
func NewTrace() Traceparent {
	var t Traceparent
	for t.TraceID == [16]byte{} {
		rand.Read(t.TraceID[:])
	}
	t.SpanID = newSpanID()
	t.Flags = 0x01
	return t
}

// Child returns a span of the same trace with a new span ID.
func (t Traceparent) Child() Traceparent {
	t.SpanID = newSpanID()
	return t
}

func newSpanID() [8]byte {
	var s [8]byte
	for s == [8]byte{} {
		rand.Read(s[:])
	}
	return s
}

// String returns the traceparent header value.
func (t Traceparent) String() string {
	return fmt.Sprintf("00-%x-%x-%02x", t.TraceID, t.SpanID, t.Flags)
}

// ParseTraceparent parses a version-00 traceparent header value
// ("00-<32 hex>-<16 hex>-<2 hex>", lower case, IDs not all zero).
func ParseTraceparent(s string) (Traceparent, error) {
	var t Traceparent
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return t, fmt.Errorf("%w: traceparent %q is not 00-<trace id>-<span id>-<flags>", ErrMalformed, truncate(s, 80))
	}
	if s[:2] != "00" {
		return t, fmt.Errorf("%w: traceparent version %q, want 00", ErrMalformed, s[:2])
	}
	var flags [1]byte
	for _, f := range []struct {
		dst []byte
		src string
	}{{t.TraceID[:], s[3:35]}, {t.SpanID[:], s[36:52]}, {flags[:], s[53:55]}} {
		if !isLowerHex(f.src) {
			return Traceparent{}, fmt.Errorf("%w: traceparent %q is not lower-case hex", ErrMalformed, truncate(s, 80))
		}
		hex.Decode(f.dst, []byte(f.src))
	}
	t.Flags = flags[0]
	if t.TraceID == [16]byte{} || t.SpanID == [8]byte{} {
		return Traceparent{}, fmt.Errorf("%w: traceparent %q has a zero id", ErrMalformed, s)
	}
	return t, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
