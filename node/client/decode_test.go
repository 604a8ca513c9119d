package client

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/weftmesh/weft/protocol/api"
)

// answerBodies are answers of a send, plain and not, valid and not.
var answerBodies = []string{
	// The plain form (the daemon's):
	`{"id":"bafy","v":1,"space":"sp","from":"12D3","created_at":"2026-11-26T00:01:02.3456789Z","type":"text","content":{"text":"hi"},"sig":"c2ln+/==","cursor":"42"}` + "\n",
	`{"id":"b","v":1,"space":"s","from":"f","created_at":"2026-11-26T00:01:02Z","prev":["a","b"],"type":"t","ttl":60,"meta":{"k":"v","é":"✓"},"content":[1,"x\"y",{"a":null}],"sig":"s"}`,
	` { "id" : "b" , "content" : 5 , "prev" : [ ] , "meta" : { } } `, `{}`, `{"created_at":"2026-11-26T00:01:02+05:30"}`,
	`{"v":-3}`, `{"content":"s\\u00e9"}`,
	// Left to encoding/json:
	`{"refs":{"messages":["m"]}}`, `{"raw":"cmF3"}`, `{"ID":"x"}`, `{"id":"a","id":"b"}`, `{"other":1}`, `{"id":null}`,
	`{"content":null}`, `{"id":"a\"b"}`, `{"v":1.0}`, `{"v":9223372036854775808}`, `{"created_at":"yesterday"}`,
	`{"created_at":"2026-11-26T00:01:02.Z"}`, `{"prev":["a",1]}`, `{"prev":["a",]}`, `{"meta":{"k":1}}`,
	`{"id":"x"} trailing`, `{"id":"x"}{"id":"y"}`, `{"id":"x"`, `{"id":}`, `[]`, `null`, ``, `{"content":{"a":}}`,
	"{\"id\":\"\xff\"}",
}

// checkParseMessage fails t if parseMessage accepts b differently from
// encoding/json's Decoder.
func checkParseMessage(t *testing.T, b []byte) {
	t.Helper()
	var fast, slow api.Message
	ok := parseMessage(b, &fast)
	err := json.NewDecoder(bytes.NewReader(b)).Decode(&slow)
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("parseMessage accepted %q, which encoding/json rejects: %v", b, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("parseMessage(%q) = %#v, encoding/json reads %#v", b, fast, slow)
	}
}

func TestParseMessageMatchesJSON(t *testing.T) {
	for i, b := range answerBodies {
		checkParseMessage(t, []byte(b))
		var m api.Message
		if took := parseMessage([]byte(b), &m); took != (i < 7) {
			t.Errorf("parseMessage(%q) took it: %v", b, took)
		}
		// decodeAnswer gives what encoding/json gives, by either path.
		var got, want api.Message
		gerr := decodeAnswer([]byte(b), &got)
		werr := json.NewDecoder(bytes.NewReader([]byte(b))).Decode(&want)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeAnswer(%q) = %#v, %v; want %#v, %v", b, got, gerr, want, werr)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	for _, b := range answerBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseMessage(t, b) })
}

// TestParseInvokeResultMatchesJSON holds parseInvokeResult to
// encoding/json on answers plain and not; it takes the plain ones.
func TestParseInvokeResultMatchesJSON(t *testing.T) {
	answers := []struct {
		b    string
		fast bool
	}{
		{`{"output":{"ping":1}}` + "\n", true}, {`{"output":[1,"a\"b"],"meta":{"k":"v"}}`, true},
		{`{"output":12}`, true}, {`{"output":"x"}`, true}, {`{"meta":{}}`, true}, {`{}`, true},
		{`{"output":null}`, false}, {`{"output":1,"peer":"p"}`, false}, {`{"Output":1}`, false},
		{`{"output":1,"output":2}`, false}, {`{"output":1}x`, false}, {`{"meta":{"k":1}}`, false},
		{`{"output":{"a":}}`, false}, {`[]`, false},
	}
	for _, a := range answers {
		var fast api.InvokeResult
		took := parseInvokeResult([]byte(a.b), &fast)
		if took != a.fast {
			t.Errorf("parseInvokeResult(%q) took it: %v", a.b, took)
		}
		if !took {
			continue
		}
		var slow api.InvokeResult
		if err := json.Unmarshal([]byte(a.b), &slow); err != nil {
			t.Fatalf("parseInvokeResult accepted %q, which encoding/json rejects: %v", a.b, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("parseInvokeResult(%q) = %#v, encoding/json reads %#v", a.b, fast, slow)
		}
	}
}
