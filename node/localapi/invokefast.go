package localapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/protocol/api"
)

// The invoke route's fast path, as the send route's (sendfast.go): a call
// crosses the API twice on each side, and encoding/json's reflection over
// the request was the largest item of the calling daemon's CPU after the
// call itself. parseInvoke reads the plain form of a request by hand and
// leaves anything else to encoding/json (TestParseInvokeMatchesJSON,
// FuzzParseInvoke); appendInvokeResult writes a call's answer byte for
// byte as writeJSON does (TestAppendInvokeResultMatchesJSON).

// readInvoke reads the body of an invoke (at most limit bytes) into req,
// or answers 400 or 413 as decodeBody does.
func readInvoke(w http.ResponseWriter, r *http.Request, limit int64, req *api.InvokeRequest) bool {
	return readFast(w, r, limit, req, parseInvoke)
}

// parseInvoke reads b into req if b is an invoke request in the plain
// form: an object whose keys are InvokeRequest's, each once and spelled
// so, with strings without escapes, input any JSON value but null, and
// nothing after it but white space. It reports false for anything else,
// which encoding/json then reads; what it accepts it reads as
// encoding/json does.
func parseInvoke(b []byte, req *api.InvokeRequest) bool {
	p := jsonx.Scanner{B: b}
	return p.Fields(invokeFields, func(i int) bool {
		switch i {
		case 0:
			return p.StringTo(&req.Peer)
		case 1:
			return p.StringTo(&req.Capability)
		case 2:
			return p.StringTo(&req.Name)
		case 3:
			return p.StringTo(&req.Timeout)
		case 4:
			return p.StringTo(&req.Parent)
		case 5:
			v, ok := p.Value()
			req.Input = json.RawMessage(v)
			return ok
		case 6:
			var ok bool
			req.Meta, ok = p.PlainMap()
			return ok
		default:
			var ok bool
			req.Stream, ok = p.Bool()
			return ok
		}
	})
}

// invokeFields are the keys parseInvoke reads, in its order.
var invokeFields = []string{"peer", "capability", "name", "timeout", "parent", "input", "meta", "stream"}

// writeInvokeResult answers 200 with out as writeJSON does.
func writeInvokeResult(w http.ResponseWriter, out api.InvokeResult) {
	b, ok := appendInvokeResult(make([]byte, 0, 64+len(out.Output)), out)
	if !ok {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// appendInvokeResult appends out and a line end, as writeJSON's encoder
// writes it, for the answer of a call to a peer (no peer or attempts,
// which a call by capability has); false for any other, or an output that
// is not JSON (encoding/json fails on it).
func appendInvokeResult(b []byte, out api.InvokeResult) ([]byte, bool) {
	if out.Peer != "" || len(out.Attempts) > 0 {
		return b, false
	}
	b, err := jsonx.AppendRaw(append(b, `{"output":`...), out.Output)
	if err != nil {
		return b, false
	}
	if len(out.Meta) > 0 {
		b = jsonx.AppendStringMap(append(b, `,"meta":`...), out.Meta)
	}
	return append(b, "}\n"...), true
}

// parseIDReply reads b into rep if b is a line of POST /v1/calls/replies
// in the plain form the Go client writes: an object whose keys are
// among id, kind, output and meta, each once and spelled so, strings
// without escapes, output any JSON value but null, and nothing after it
// but white space (an error answer is left to encoding/json). It reports
// false for anything else, which encoding/json then reads; what it
// accepts it reads as encoding/json does (TestParseIDReplyMatchesJSON,
// FuzzParseIDReply). Output is a copy: the replies route reads b from its
// reader's buffer, which the next line overwrites.
func parseIDReply(b []byte, rep *idReply) bool {
	p := jsonx.Scanner{B: b}
	return p.Fields(idReplyFields, func(i int) bool {
		switch i {
		case 0:
			return p.StringTo(&rep.ID)
		case 1:
			return p.StringTo(&rep.Kind)
		case 2:
			v, ok := p.Value()
			rep.Output = json.RawMessage(bytes.Clone(v))
			return ok
		default:
			var ok bool
			rep.Meta, ok = p.PlainMap()
			return ok
		}
	})
}

// idReplyFields are the keys parseIDReply reads, in its order.
var idReplyFields = []string{"id", "kind", "output", "meta"}

// appendCallEvent appends the handler event of call c as marshal writes
// api.HandlerEvent{Type: "call", Call: c}, byte for byte
// (TestAppendCallEventMatchesMarshal); false, with dst's tail undefined,
// if marshal would fail (an input that is not JSON, a deadline
// time.Time cannot write). encoding/json's reflection over every call's
// event was a sixteenth of a callee daemon's CPU in weft bench's invoke
// scenario.
func appendCallEvent(dst []byte, c *api.IncomingCall) ([]byte, bool) {
	dst = append(dst, `{"type":"call","call":{"id":`...)
	dst = jsonx.AppendString(dst, c.ID)
	dst = append(dst, `,"name":`...)
	dst = jsonx.AppendString(dst, c.Name)
	dst = append(dst, `,"from":`...)
	dst = jsonx.AppendString(dst, c.From)
	if len(c.Input) > 0 {
		var err error
		dst = append(dst, `,"input":`...)
		if dst, err = jsonx.AppendRaw(dst, c.Input); err != nil {
			return dst, false
		}
	}
	if len(c.Meta) > 0 {
		dst = append(dst, `,"meta":`...)
		dst = jsonx.AppendStringMap(dst, c.Meta)
	}
	if c.Stream {
		dst = append(dst, `,"stream":true`...)
	}
	if !c.Deadline.IsZero() {
		b, err := c.Deadline.MarshalJSON()
		if err != nil {
			return dst, false
		}
		dst = append(dst, `,"deadline":`...)
		dst = append(dst, b...)
	}
	return append(dst, "}}"...), true
}
