// Package framejson encodes and decodes, without reflection, the small
// JSON objects a stream call passes once per delta on every hop: a frame
// {"seq":N,"kind":K,"data":D} (protocol.CallFrame on the wire, api.Frame on
// the local API) and a handler's answer line {"kind":K,"output":D}
// (api.Reply).
//
// The encoders write exactly the bytes encoding/json writes for the same
// values (fields in declaration order, empty data omitted, data compacted,
// no HTML escaping). The decoders accept exactly that form and nothing
// else: anything they do not recognize (other fields, whitespace, escapes
// in the kind) they report as not theirs, and the caller decodes it with
// encoding/json, which gives the same values for every input the decoders
// accept. Data is always checked to be one valid JSON value.
package framejson

import (
	"errors"
	"strconv"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/protocol/jsonvalid"
)

// ErrKind is returned for a kind that would need escaping in JSON: the
// caller encodes such a frame with encoding/json.
var ErrKind = errors.New("framejson: kind is not a plain word")

// AppendFrame appends {"seq":seq,"kind":kind,"data":data} to dst, without
// "data" when data is empty. data must be one JSON value (it is compacted,
// as encoding/json does); kind a plain word (see ErrKind).
func AppendFrame(dst []byte, seq uint64, kind string, data []byte) ([]byte, error) {
	if !plain(kind) {
		return dst, ErrKind
	}
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, kind...)
	dst = append(dst, '"')
	if len(data) > 0 {
		var err error
		dst = append(dst, `,"data":`...)
		if dst, err = appendValue(dst, data); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendReply appends {"kind":kind,"output":output} to dst, each left out
// when empty. output must be one JSON value; kind a plain word.
func AppendReply(dst []byte, kind string, output []byte) ([]byte, error) {
	if !plain(kind) {
		return dst, ErrKind
	}
	dst = append(dst, '{')
	sep := false
	if kind != "" {
		dst = append(dst, `"kind":"`...)
		dst = append(dst, kind...)
		dst = append(dst, '"')
		sep = true
	}
	if len(output) > 0 {
		if sep {
			dst = append(dst, ',')
		}
		var err error
		dst = append(dst, `"output":`...)
		if dst, err = appendValue(dst, output); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// ParseFrame decodes b if it is exactly {"seq":N,"kind":"K"} or
// {"seq":N,"kind":"K","data":D}, as AppendFrame writes it. data is a part
// of b. ok is false for anything else: decode that with encoding/json.
func ParseFrame(b []byte) (seq uint64, kind string, data []byte, ok bool) {
	p := parser{b: b}
	if !p.lit(`{"seq":`) {
		return 0, "", nil, false
	}
	if seq, ok = p.uint(); !ok || !p.lit(`,"kind":`) {
		return 0, "", nil, false
	}
	if kind, ok = p.str(); !ok {
		return 0, "", nil, false
	}
	if p.lit(`}`) {
		if !p.end() {
			return 0, "", nil, false
		}
		return seq, kind, nil, true
	}
	if !p.lit(`,"data":`) {
		return 0, "", nil, false
	}
	if data, ok = p.lastValue(); !ok {
		return 0, "", nil, false
	}
	return seq, kind, data, true
}

// ParseReply decodes b if it is exactly {"kind":"K","output":D} (as
// AppendReply writes it, with both fields). output is a part of b. ok is
// false for anything else: decode that with encoding/json.
func ParseReply(b []byte) (kind string, output []byte, ok bool) {
	p := parser{b: b}
	if !p.lit(`{"kind":`) {
		return "", nil, false
	}
	if kind, ok = p.str(); !ok || !p.lit(`,"output":`) {
		return "", nil, false
	}
	if output, ok = p.lastValue(); !ok {
		return "", nil, false
	}
	return kind, output, true
}

// appendValue appends the JSON value v, compacted as encoding/json
// compacts a json.RawMessage; it fails if v is not one valid JSON value.
func appendValue(dst, v []byte) ([]byte, error) {
	out, err := jsonx.AppendCompact(dst, v)
	if err != nil {
		return dst, errors.New("framejson: data is not valid JSON")
	}
	return out, nil
}

// plain reports whether s is written in JSON as it is: printable ASCII
// with no quote or backslash.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// The kinds of call frames and replies, returned without allocating.
var kinds = []string{"started", "delta", "final", "error"}

type parser struct {
	b []byte
	i int
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

func (p *parser) end() bool { return p.i == len(p.b) }

// uint reads a JSON number that is a uint64: digits, no leading zero.
func (p *parser) uint() (uint64, bool) {
	j := p.i
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	digits := p.b[p.i:j]
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return n, true
}

// str reads a JSON string of plain characters (no escapes, ASCII).
func (p *parser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	j := p.i
	for j < len(p.b) && p.b[j] != '"' {
		if c := p.b[j]; c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
		j++
	}
	if j == len(p.b) {
		return "", false
	}
	w := p.b[p.i:j]
	p.i = j + 1
	for _, k := range kinds {
		if string(w) == k {
			return k, true
		}
	}
	return string(w), true
}

// lastValue reads the rest of the object: one JSON value, then the closing
// brace that ends b.
func (p *parser) lastValue() ([]byte, bool) {
	if len(p.b)-p.i < 2 || p.b[len(p.b)-1] != '}' {
		return nil, false
	}
	v := p.b[p.i : len(p.b)-1]
	// jsonvalid.Valid allows whitespace around the value; encoding/json would
	// leave it out of a json.RawMessage.
	if isSpace(v[0]) || isSpace(v[len(v)-1]) || !jsonvalid.Valid(v) {
		return nil, false
	}
	p.i = len(p.b)
	return v, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
