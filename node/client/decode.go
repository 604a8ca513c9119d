package client

import (
	"bytes"
	"encoding/json"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/protocol/api"
)

// decodeAnswer decodes a JSON answer into out as json.Decoder reads it
// (its first value). A message in the plain form the daemon writes is
// read by hand (parseMessage), a tenth of a send's CPU in the client with
// encoding/json.
func decodeAnswer(b []byte, out any) error {
	switch out := out.(type) {
	case *api.Message:
		var fast api.Message
		if parseMessage(b, &fast) {
			*out = fast
			return nil
		}
	case *api.InvokeResult:
		var fast api.InvokeResult
		if parseInvokeResult(b, &fast) {
			*out = fast
			return nil
		}
	}
	return json.NewDecoder(bytes.NewReader(b)).Decode(out)
}

// parseInvokeResult reads b into r if b is a call's answer in the plain
// form the daemon writes for a call to a peer: {"output":…,"meta":{…}},
// output any JSON value but null, meta of plain strings, each once, and
// nothing after it but white space. It reports false for anything else,
// which encoding/json then reads; what it accepts it reads as
// encoding/json does (TestParseInvokeResultMatchesJSON).
func parseInvokeResult(b []byte, r *api.InvokeResult) bool {
	p := jsonx.Scanner{B: b}
	return p.Fields([]string{"output", "meta"}, func(i int) bool {
		var ok bool
		if i == 0 {
			var v []byte
			v, ok = p.Value()
			r.Output = bytes.Clone(v)
		} else {
			r.Meta, ok = p.PlainMap()
		}
		return ok
	})
}

// messageKeys are the keys parseMessage reads, each at most once.
var messageKeys = map[string]int{"id": 0, "v": 1, "space": 2, "from": 3, "created_at": 4, "prev": 5,
	"type": 6, "ttl": 7, "meta": 8, "content": 9, "sig": 10, "cursor": 11}

// parseMessage reads b into m if b is one message in the plain form: the
// keys of messageKeys spelled so, strings without escapes, and nothing
// after it but white space. It reports false for anything else (refs,
// raw, escapes, nulls, other keys), which encoding/json then reads; what
// it accepts it reads as encoding/json does (TestParseMessageMatchesJSON,
// FuzzParseMessage).
func parseMessage(b []byte, m *api.Message) bool {
	p := jsonx.Scanner{B: b}
	p.WS()
	var seen [12]bool
	ok := p.Members(func(key []byte) bool {
		i, known := messageKeys[string(key)]
		if !known || seen[i] {
			return false
		}
		seen[i] = true
		var ok bool
		var s []byte
		switch i {
		case 0, 2, 3, 6, 10, 11:
			if s, ok = p.PlainString(); !ok {
				return false
			}
			switch i {
			case 0:
				m.ID = string(s)
			case 2:
				m.Space = string(s)
			case 3:
				m.From = string(s)
			case 6:
				m.Type = string(s)
			case 10:
				m.Sig = string(s)
			case 11:
				m.Cursor = string(s)
			}
		case 1, 7:
			n, ok := p.Integer()
			if !ok || (i == 1 && int64(int(n)) != n) {
				return false
			}
			if i == 1 {
				m.V = int(n)
			} else {
				m.TTL = n
			}
		case 4:
			if !p.TimeTo(&m.CreatedAt) {
				return false
			}
		case 5:
			if m.Prev, ok = p.PlainStrings(); !ok {
				return false
			}
		case 8:
			if m.Meta, ok = p.PlainMap(); !ok {
				return false
			}
		case 9:
			if s, ok = p.Value(); !ok {
				return false
			}
			m.Content = json.RawMessage(s)
		}
		return true
	})
	return ok && p.End()
}

// parseHandlerEvent reads b into ev if b is a handler event in the plain
// form the daemon writes: an object of "type" and "call" (or "id"), each
// once, the call's keys IncomingCall's, each once, strings without
// escapes, input any JSON value but null, meta of plain strings, the
// deadline as time.Time reads it, and nothing after it but white space.
// It reports false for anything else (allow, nulls, other keys), which
// encoding/json then reads; what it accepts it reads as encoding/json
// does (TestParseHandlerEventMatchesJSON, FuzzParseHandlerEvent). Input
// is a copy: Handlers reads b from its scanner's buffer. encoding/json's
// reflection over every call's event was the largest item of a handler
// agent's CPU after the system calls.
func parseHandlerEvent(b []byte, ev *api.HandlerEvent) bool {
	p := jsonx.Scanner{B: b}
	return p.Fields(eventKeys, func(i int) bool {
		switch i {
		case 0:
			return p.StringTo(&ev.Type)
		case 1:
			ev.Call = new(api.IncomingCall)
			return parseIncomingCall(&p, ev.Call)
		default:
			return p.StringTo(&ev.ID)
		}
	})
}

// eventKeys and callKeys are the keys parseHandlerEvent reads.
var (
	eventKeys = []string{"type", "call", "id"}
	callKeys  = []string{"id", "name", "from", "input", "meta", "stream", "deadline"}
)

// parseIncomingCall reads a call of parseHandlerEvent's plain form at p.
func parseIncomingCall(p *jsonx.Scanner, c *api.IncomingCall) bool {
	return p.Object(callKeys, func(i int) bool {
		ok := true
		switch i {
		case 0:
			ok = p.StringTo(&c.ID)
		case 1:
			ok = p.StringTo(&c.Name)
		case 2:
			ok = p.StringTo(&c.From)
		case 3:
			var v []byte
			v, ok = p.Value()
			c.Input = bytes.Clone(v)
		case 4:
			c.Meta, ok = p.PlainMap()
		case 5:
			c.Stream, ok = p.Bool()
		default:
			ok = p.TimeTo(&c.Deadline)
		}
		return ok
	})
}
