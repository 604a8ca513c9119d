package call

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weftmesh/weft/internal/jsonx/jsonxtest"
	"github.com/weftmesh/weft/protocol"
)

// requestBodies are call requests, plain and not, valid and not.
var requestBodies = []string{
	`{"name":"echo","input":{"ping":1},"meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"deadline":1764201600000}`,
	`{"name":"n","input":[1,"a\"b",{"c":null}],"meta":{"k":"v","a":"b"},"deadline":-5,"stream":true}`,
	` { "name" : "summarize" , "input" : "text" , "stream" : false } `,
	`{"name":"n","input":12}`, `{"name":"n","input":-0.5e3}`, `{"name":"n","input":true}`, `{}`, `{"meta":{}}`,
	`{"name":"é✓"}`, `{"input":{"a":"` + "\u00e9" + `"}}` + "\n", `{"deadline":0}`, `{"deadline":-0}`,
	// Left to encoding/json:
	`{"input":null}`, `{"name":null}`, `{"stream":null}`, `{"meta":null}`, `{"deadline":null}`, `{"Name":"p"}`,
	`{"NAME":"n"}`, `{"name":"a","name":"b"}`, `{"stream":true,"stream":false}`, `{"name":"t\u00e9"}`,
	`{"name":"tab\there"}`, "{\"name\":\"\xff\"}", `{"other":1}`, `{"stream":1}`, `{"stream":"true"}`,
	`{"stream":tru}`, `{"stream":truex}`, `{"input":{"a":1}} {}`, `{"input":{"a":1}}x`, `{"input":{"a":1},}`,
	`{"input":{"a":}}`, `{"input":[1,2}`, `{"deadline":5.0}`, `{"deadline":1e3}`, `{"deadline":"5"}`,
	`{"deadline":99999999999999999999}`, `{"deadline":01}`, `{"meta":{"k":1}}`,
	`{"meta":{"k":"a","k":"b"}}`, `[]`, `null`, ``, ` `, `{`, `{"name"}`, `{"name":}`,
	// encoding/json's bound on nesting counts the enclosing object.
	`{"name":"n","input":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

// checkParseRequest fails t if parseRequest accepts b differently from
// encoding/json.
func checkParseRequest(t *testing.T, b []byte) {
	t.Helper()
	jsonxtest.MatchesJSON(t, b, parseRequest)
}

func TestParseRequestMatchesJSON(t *testing.T) {
	// The fast path is taken for the plain forms (the first 12), and only
	// for them.
	jsonxtest.Table(t, requestBodies, 12, parseRequest)
	// Requests as callers write them, with every field's values of every
	// kind, and pieces cut out or swapped in.
	names := []string{"", "echo", "a b", "é", `q"uote`, "<tag>&", "\u2028"}
	inputs := []string{"", `{"ping":1}`, `[1,2]`, `"s"`, `12`, `true`, `{"a":"\u00e9\n"}`}
	metas := []map[string]string{nil, {}, {"traceparent": "00-ab-cd-01"}, {"k": "v\"w", "a": ""}, {"é": "\t"}}
	r := rand.New(rand.NewPCG(16, 17))
	for range 5000 {
		req := protocol.CallRequest{Name: names[r.IntN(len(names))], Meta: metas[r.IntN(len(metas))], Stream: r.IntN(2) == 0}
		if in := inputs[r.IntN(len(inputs))]; in != "" {
			req.Input = json.RawMessage(in)
		}
		if r.IntN(2) == 0 {
			req.Deadline = r.Int64N(1<<50) - 1<<40
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		checkParseRequest(t, b)
		var got protocol.CallRequest
		plain := !strings.ContainsAny(req.Name, "\"<>&\u2028\\")
		for k, v := range req.Meta {
			plain = plain && !strings.ContainsAny(k+v, "\"\t\\")
		}
		if parseRequest(b, &got) != plain {
			t.Errorf("parseRequest(%s) took it: %v, want %v", b, !plain, plain)
		}
		cut := r.IntN(len(b))
		checkParseRequest(t, append(append([]byte{}, b[:cut]...), b[cut+1:]...))
		mut := append([]byte{}, b...)
		mut[r.IntN(len(mut))] = `{}[]",:0 e\n`[r.IntN(12)]
		checkParseRequest(t, mut)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, b := range requestBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseRequest(t, b) })
}
