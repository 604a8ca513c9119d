package localapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol/api"
)

// The send route's fast path. A send is the API's hottest route, and
// encoding/json's reflection over its request and answer was a tenth of
// the daemon's CPU per send. parseSend reads the plain form of a request
// (what clients send) by hand and leaves anything else to encoding/json,
// so the route accepts and rejects exactly what decodeBody does
// (TestParseSendMatchesJSON, FuzzParseSend); appendMessage writes the
// answer byte for byte as writeJSON does (TestAppendMessageMatchesJSON).

// readSend reads the body of a send (at most limit bytes) into req, or
// answers 400 or 413 as decodeBody does.
func readSend(w http.ResponseWriter, r *http.Request, limit int64, req *api.SendRequest) bool {
	return readFast(w, r, limit, req, parseSend)
}

// readFast reads a request's body (at most limit bytes) into req with
// parse, which reads the plain form of such a request by hand and reports
// false for anything else; anything else is read by encoding/json, which
// answers 400 or 413 as decodeBody does.
func readFast[T any](w http.ResponseWriter, r *http.Request, limit int64, req *T, parse func([]byte, *T) bool) bool {
	body, err := readBody(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err == nil {
		if ok := parse(body, req); ok {
			return true
		}
		var zero T
		*req = zero
	}
	// encoding/json reads the same bytes and meets the same error at the
	// same place as it would have reading the body itself.
	var rd io.Reader = bytes.NewReader(body)
	if err != nil {
		rd = io.MultiReader(rd, errReader{err})
	}
	return decodeFrom(w, rd, limit, req)
}

// readBody reads rd to its end; size is the length the request declared
// (-1: unknown), used to size the buffer.
func readBody(rd io.Reader, size, limit int64) ([]byte, error) {
	n := 512
	if size > 0 && size <= limit {
		n = int(size) + 1 // +1: reading EOF needs no growth
	}
	b := make([]byte, 0, n)
	for {
		m, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseSend reads b into req if b is a send request in the plain form:
// one object with the keys content, type, ttl and meta each at most once,
// spelled so, strings without escapes, ttl an integer, content any JSON
// value but null. It reports false for anything else (req then holds
// garbage): refs, escapes, other keys, nulls, bad JSON, which
// encoding/json then reads or rejects. What it accepts it reads as
// encoding/json does.
func parseSend(b []byte, req *api.SendRequest) bool {
	p := jsonx.Scanner{B: b}
	return p.Fields([]string{"content", "type", "ttl", "meta"}, func(i int) bool {
		var ok bool
		switch i {
		case 0:
			var v []byte
			v, ok = p.Value()
			req.Content = json.RawMessage(v)
		case 1:
			ok = p.StringTo(&req.Type)
		case 2:
			req.TTL, ok = p.Integer()
		default:
			req.Meta, ok = p.PlainMap()
		}
		return ok
	})
}

// writeMessage answers with m as writeJSON does.
func writeMessage(w http.ResponseWriter, status int, m api.Message) {
	b, ok := appendMessage(make([]byte, 0, 512+len(m.Content)), m)
	if !ok {
		writeJSON(w, status, m)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeStored answers with m as writeMessage(w, status, apiStored(m))
// does, without building the api.Message (appendStored).
func writeStored(w http.ResponseWriter, status int, m node.Message) {
	b, ok := appendStored(make([]byte, 0, 512+len(m.Content)), m)
	if !ok {
		writeMessage(w, status, apiStored(m))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// appendMessage appends m's JSON as encoding/json (without HTML escaping)
// writes it. It reports false, for encoding/json to do it, for what it
// does not write by hand: a time outside years 0–9999 (an error there) or
// content that is not valid JSON.
func appendMessage(b []byte, m api.Message) ([]byte, bool) {
	if y := m.CreatedAt.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, m.ID)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(m.V), 10)
	b = append(b, `,"space":`...)
	b = jsonx.AppendString(b, m.Space)
	b = append(b, `,"from":`...)
	b = jsonx.AppendString(b, m.From)
	b = append(b, `,"created_at":"`...)
	b = m.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(m.Prev) > 0 {
		b = appendStrings(append(b, `,"prev":`...), m.Prev)
	}
	if r := m.Refs; r != nil {
		b = appendRefs(b, r.Messages, appendStrings, r.Nodes)
	}
	b, ok := appendTail(b, m.Type, m.TTL, m.Meta, m.Content)
	if !ok {
		return b, false
	}
	b = append(b, `,"sig":`...)
	b = jsonx.AppendString(b, m.Sig)
	if m.Cursor != "" {
		b = append(b, `,"cursor":`...)
		b = jsonx.AppendString(b, m.Cursor)
	}
	if len(m.Raw) > 0 {
		b = append(b, `,"raw":"`...)
		b = base64.StdEncoding.AppendEncode(b, m.Raw)
		b = append(b, '"')
	}
	return append(b, '}'), true
}

// appendTail appends a message's type, ttl, meta and content fields, as
// appendMessage writes them; false for content that is not valid JSON.
func appendTail(b []byte, typ string, ttl int64, meta map[string]string, content json.RawMessage) ([]byte, bool) {
	b = append(b, `,"type":`...)
	b = jsonx.AppendString(b, typ)
	if ttl != 0 {
		b = strconv.AppendInt(append(b, `,"ttl":`...), ttl, 10)
	}
	if len(meta) > 0 {
		b = jsonx.AppendStringMap(append(b, `,"meta":`...), meta)
	}
	b, err := jsonx.AppendRaw(append(b, `,"content":`...), content)
	return b, err == nil
}

// appendStrings appends a JSON array of strings.
// appendRefs writes a message's refs, `,"refs":{"messages":…,"nodes":…}`
// with the lists that are not empty; appendMsgs writes the messages' IDs,
// whichever type holds them.
func appendRefs[T any](b []byte, msgs []T, appendMsgs func([]byte, []T) []byte, nodes []string) []byte {
	b = append(b, `,"refs":{`...)
	if len(msgs) > 0 {
		b = appendMsgs(append(b, `"messages":`...), msgs)
	}
	if len(nodes) > 0 {
		if len(msgs) > 0 {
			b = append(b, ',')
		}
		b = appendStrings(append(b, `"nodes":`...), nodes)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonx.AppendString(b, s)
	}
	return append(b, ']')
}
