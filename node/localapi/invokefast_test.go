package localapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/jsonx/jsonxtest"
	"github.com/weftmesh/weft/protocol/api"
)

// invokeBodies are invoke requests, plain and not, valid and not.
var invokeBodies = []string{
	`{"peer":"12D3KooWabc","name":"echo","input":{"ping":1}}`,
	`{"peer":"p","name":"n","input":[1,"a\"b",{"c":null}],"meta":{"k":"v","a":"b"},"timeout":"5s","stream":true,"parent":"x"}`,
	` { "capability" : "summarize" , "input" : "text" , "stream" : false } `,
	`{"name":"n","input":12}`, `{"name":"n","input":-0.5e3}`, `{"name":"n","input":true}`, `{}`, `{"meta":{}}`,
	`{"name":"é✓"}`, `{"input":{"a":"` + "\u00e9" + `"}}` + "\n",
	// Left to encoding/json:
	`{"input":null}`, `{"name":null}`, `{"stream":null}`, `{"meta":null}`, `{"Peer":"p"}`, `{"NAME":"n"}`,
	`{"name":"a","name":"b"}`, `{"stream":true,"stream":false}`, `{"name":"t\u00e9"}`, `{"name":"tab\there"}`,
	"{\"name\":\"\xff\"}", `{"other":1}`, `{"stream":1}`, `{"stream":"true"}`, `{"stream":tru}`, `{"stream":truex}`,
	`{"input":{"a":1}} {}`, `{"input":{"a":1}}x`, `{"input":{"a":1},}`, `{"input":{"a":}}`, `{"input":[1,2}`,
	`{"timeout":5}`, `{"meta":{"k":1}}`, `[]`, `null`, ``, ` `, `{`, `{"name"}`, `{"name":}`,
}

// checkParseInvoke fails t if parseInvoke accepts body differently from
// encoding/json.
func checkParseInvoke(t *testing.T, body []byte) {
	t.Helper()
	var fast api.InvokeRequest
	if !parseInvoke(body, &fast) {
		return
	}
	var slow api.InvokeRequest
	w := httptest.NewRecorder()
	if !decodeFrom(w, bytes.NewReader(body), 1<<20, &slow) {
		t.Fatalf("parseInvoke accepted %q, which encoding/json rejects (%d)", body, w.Code)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("parseInvoke(%q) = %#v, encoding/json reads %#v", body, fast, slow)
	}
}

func TestParseInvokeMatchesJSON(t *testing.T) {
	for i, b := range invokeBodies {
		checkParseInvoke(t, []byte(b))
		// The fast path is taken for the plain forms (the first 10), and
		// only for them.
		var req api.InvokeRequest
		if took := parseInvoke([]byte(b), &req); took != (i < 10) {
			t.Errorf("parseInvoke(%q) took it: %v", b, took)
		}
	}
}

func FuzzParseInvoke(f *testing.F) {
	for _, b := range invokeBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseInvoke(t, b) })
}

// TestAppendInvokeResultMatchesJSON holds writeInvokeResult to writeJSON's
// bytes for answers of every shape, outputs valid and not.
func TestAppendInvokeResultMatchesJSON(t *testing.T) {
	outputs := []json.RawMessage{nil, {}, json.RawMessage(`{"ping":1}`), json.RawMessage("{ \"a\" : [1, 2] ,\n \"b\": \"x y\" }"),
		json.RawMessage(`"<&> \u2028"`), json.RawMessage(`12`), json.RawMessage(`{"a":`), json.RawMessage(`nope`), json.RawMessage(` 1 `)}
	strs := []string{"", "k", "a\"b", "<tag>&", "é\u2028", "\x01\xff"}
	r := rand.New(rand.NewPCG(9, 10))
	for range 3000 {
		out := api.InvokeResult{Output: outputs[r.IntN(len(outputs))]}
		if r.IntN(2) == 0 {
			out.Meta = map[string]string{}
			for range r.IntN(4) {
				out.Meta[strs[r.IntN(len(strs))]] = strs[r.IntN(len(strs))]
			}
		}
		if r.IntN(5) == 0 {
			out.Peer = "12D3KooWpeer"
			out.Attempts = []api.Attempt{{Peer: "12D3KooWother"}}
		}
		fast, slow := httptest.NewRecorder(), httptest.NewRecorder()
		writeInvokeResult(fast, out)
		writeJSON(slow, 200, out)
		if fast.Code != slow.Code || fast.Body.String() != slow.Body.String() || fast.Header().Get("Content-Type") != slow.Header().Get("Content-Type") {
			t.Fatalf("writeInvokeResult(%+v) = %d %q, writeJSON %d %q", out, fast.Code, fast.Body, slow.Code, slow.Body)
		}
	}
}

// idReplyLines are lines of POST /v1/calls/replies, plain and not.
var idReplyLines = []string{
	`{"id":"c1","kind":"final","output":{"ping":1}}`,
	`{"id":"c1","output":[1,"a\"b"],"meta":{"k":"v"}}`,
	` { "kind" : "final" , "id" : "x" } `, `{"id":"c","output":12}`, `{}`, `{"id":"é"}`,
	// Left to encoding/json:
	`{"id":"c","error":{"code":"x","message":"m"}}`, `{"id":"c","output":null}`, `{"ID":"c"}`,
	`{"id":"a","id":"b"}`, `{"id":"t\u00e9"}`, `{"id":"c","meta":{"k":1}}`, `{"id":"c"} x`, `{"id":"c",}`,
	`{"id":1}`, `[]`, `null`, ``, `{`, `{"id"}`,
	`{"id":"c","output":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

// checkParseIDReply fails t if parseIDReply accepts b differently from
// encoding/json.
func checkParseIDReply(t *testing.T, b []byte) {
	t.Helper()
	jsonxtest.MatchesJSON(t, b, parseIDReply)
}

func TestParseIDReplyMatchesJSON(t *testing.T) {
	jsonxtest.Table(t, idReplyLines, 6, parseIDReply)
	// The output is the line's bytes copied: the route's reader reuses
	// its buffer for the next line.
	line := []byte(`{"id":"c","output":{"a":1}}`)
	var rep idReply
	if !parseIDReply(line, &rep) {
		t.Fatal("plain line not taken")
	}
	copy(line, bytes.Repeat([]byte{'x'}, len(line)))
	if string(rep.Output) != `{"a":1}` {
		t.Fatalf("output %q changed with the line's buffer", rep.Output)
	}
	// Lines as the Go client writes them, of every shape.
	strs := []string{"", "c1", "final", "é", `q"uote`, "<tag>&", "\u2028"}
	outputs := []string{"", `{"ping":1}`, `[1,2]`, `"s"`, `12`, `{"a":"\u00e9\n"}`}
	metas := []map[string]string{nil, {}, {"k": "v"}, {"k": "v\"w"}, {"é": "\t"}}
	r := rand.New(rand.NewPCG(11, 12))
	took := 0
	for range 3000 {
		rep := idReply{ID: strs[r.IntN(len(strs))], Reply: api.Reply{Kind: strs[r.IntN(len(strs))], Meta: metas[r.IntN(len(metas))]}}
		if o := outputs[r.IntN(len(outputs))]; o != "" {
			rep.Output = json.RawMessage(o)
		}
		if r.IntN(8) == 0 {
			rep.Error = &api.ErrorBody{Code: "x", Message: "m"}
		}
		b, err := marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		checkParseIDReply(t, b)
		var got idReply
		if parseIDReply(b, &got) {
			took++
		}
	}
	if took < 500 {
		t.Errorf("the fast path took %d of 3,000 generated lines", took)
	}
	for range 3000 {
		b := []byte(idReplyLines[r.IntN(len(idReplyLines))])
		if len(b) > 0 {
			b = append([]byte{}, b...)
			b[r.IntN(len(b))] = `{}[]",:0 e\n`[r.IntN(12)]
		}
		checkParseIDReply(t, b)
	}
}

func FuzzParseIDReply(f *testing.F) {
	for _, b := range idReplyLines {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseIDReply(t, b) })
}

// TestAppendCallEventMatchesMarshal holds the handler stream's call
// events to marshal's bytes, for calls of every shape, inputs valid and
// not, deadlines time.Time can and cannot write.
func TestAppendCallEventMatchesMarshal(t *testing.T) {
	strs := []string{"", "echo", "a\"b", "<tag>&", "é\u2028", "\x01\xff", "12D3KooWabc"}
	inputs := []json.RawMessage{nil, {}, json.RawMessage(`{"ping":1}`), json.RawMessage("{ \"a\" : [1, 2] ,\n \"b\": \"x y\" }"),
		json.RawMessage(`"<&> \u2028"`), json.RawMessage(`12`), json.RawMessage(`{"a":`), json.RawMessage(`nope`), json.RawMessage(` 1 `)}
	deadlines := []time.Time{{}, time.Unix(1764218400, 123456789).UTC(), time.Unix(1764218400, 0).In(time.FixedZone("", -5*3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := rand.New(rand.NewPCG(13, 14))
	for range 3000 {
		c := &api.IncomingCall{ID: strs[r.IntN(len(strs))], Name: strs[r.IntN(len(strs))], From: strs[r.IntN(len(strs))],
			Input: inputs[r.IntN(len(inputs))], Stream: r.IntN(2) == 0, Deadline: deadlines[r.IntN(len(deadlines))]}
		if r.IntN(2) == 0 {
			c.Meta = map[string]string{}
			for range r.IntN(4) {
				c.Meta[strs[r.IntN(len(strs))]] = strs[r.IntN(len(strs))]
			}
		}
		want, err := marshal(api.HandlerEvent{Type: "call", Call: c})
		got, ok := appendCallEvent(nil, c)
		if ok != (err == nil) || ok && string(got) != string(want) {
			t.Fatalf("appendCallEvent(%+v) = %q, %v; marshal %q, %v", c, got, ok, want, err)
		}
	}
}
