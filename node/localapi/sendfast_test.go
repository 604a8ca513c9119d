package localapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol/api"
)

// sendBodies are send requests, plain and not, valid and not.
var sendBodies = []string{
	`{"content":{"text":"hi"}}`,
	`{"content":{"text":"hi"},"type":"note","ttl":60,"meta":{"trace":"t1","k":"v"}}`,
	` { "content" : { "a" : [1, 2.5e3, true, false, null, "x\"y\\z\u00e9"] } , "type" : "t" } `,
	`{"type":"t","content":"just a string"}`,
	`{"content":12}`, `{"content":-0.5e-3}`, `{"content":true}`, `{"content":[]}`, `{"content":"a\\"}`,
	`{"content":{}}`, `{}`, `{"meta":{}}`, `{"ttl":0}`, `{"ttl":-5}`, `{"ttl":9223372036854775807}`,
	`{"content":{"x":1}}` + "\n\t ", `{"type":"é✓"}`, `{"meta":{"é":"✓"}}`, `{"ttl":-0}`,
	`{"content":{"a":"` + strings.Repeat("x", 300) + `"}}`,
	// Left to encoding/json:
	`{"content":null}`, `{"type":null}`, `{"meta":null}`, `{"refs":{"messages":["x"]}}`,
	`{"Content":{"a":1}}`, `{"CONTENT":{"a":1}}`, `{"content":{"a":1},"content":{"b":2}}`,
	`{"type":"a","type":"b"}`, `{"meta":{"k":"1","k":"2"}}`, `{"type":"t\u00e9"}`, `{"type":"tab\there"}`,
	`{"type":"\xff"}`, "{\"type\":\"\xff\"}", "{\"meta\":{\"k\":\"\xc3\"}}", `{"other":1}`, `{"content":{"a":1},"x":[]}`,
	`{"ttl":1.0}`, `{"ttl":1e3}`, `{"ttl":01}`, `{"ttl":-}`, `{"ttl":9223372036854775808}`, `{"ttl":"5"}`,
	`{"content":{"a":1}} {"content":{}}`, `{"content":{"a":1}}x`, `{"content":{"a":1},}`,
	`{"content":{"a":}}`, `{"content":{"a":1}`, `{"content":[1,2}`, `{"content":tru}`, `{"content":01}`,
	`{"content":"unterminated}`, `[]`, `"x"`, `null`, ``, ` `, `{`, `{"content"}`, `{"content":}`,
	`{,"content":{}}`, `{"meta":{"k":1}}`, `{"meta":{"k":"v",}}`, `{"meta":[]}`, `{"type":5}`,
}

// decodeJSON is the route's decoding by encoding/json alone.
func decodeJSON(body []byte) (api.SendRequest, int) {
	var req api.SendRequest
	w := httptest.NewRecorder()
	if !decodeFrom(w, bytes.NewReader(body), 1<<20, &req) {
		return req, w.Code
	}
	return req, 0
}

// checkParseSend fails t if parseSend accepts body differently from
// encoding/json.
func checkParseSend(t *testing.T, body []byte) {
	t.Helper()
	var fast api.SendRequest
	ok := parseSend(body, &fast)
	slow, code := decodeJSON(body)
	if !ok {
		return
	}
	if code != 0 {
		t.Fatalf("parseSend accepted %q, which encoding/json rejects (%d)", body, code)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("parseSend(%q) = %#v, encoding/json reads %#v", body, fast, slow)
	}
}

func TestParseSendMatchesJSON(t *testing.T) {
	for i, b := range sendBodies {
		checkParseSend(t, []byte(b))
		// The fast path is taken for the plain forms (the first 20), and
		// only for them.
		var req api.SendRequest
		if took := parseSend([]byte(b), &req); took != (i < 20) {
			t.Errorf("parseSend(%q) took it: %v", b, took)
		}
	}
}

func FuzzParseSend(f *testing.F) {
	for _, b := range sendBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseSend(t, b) })
}

// TestReadSendAnswersAsDecodeBody: the route answers bad bodies (and
// bodies over the limit) with the status and message decodeBody gives.
func TestReadSendAnswersAsDecodeBody(t *testing.T) {
	const limit = 64
	bodies := append([]string{strings.Repeat(" ", 100), `{"content":{}}` + strings.Repeat(" ", 100),
		`{"content":"` + strings.Repeat("x", 100) + `"}`, `{"content":{}}x` + strings.Repeat(" ", 100)}, sendBodies...)
	for _, b := range bodies {
		for _, chunked := range []bool{false, true} {
			answer := func(read func(http.ResponseWriter, *http.Request, int64, *api.SendRequest) bool) (bool, int, string, api.SendRequest) {
				r := httptest.NewRequest(http.MethodPost, "/v1/spaces/x/messages", strings.NewReader(b))
				if chunked {
					r.ContentLength = -1
				}
				w := httptest.NewRecorder()
				var req api.SendRequest
				ok := read(w, r, limit, &req)
				return ok, w.Code, w.Body.String(), req
			}
			ok1, code1, body1, req1 := answer(readSend)
			ok2, code2, body2, req2 := answer(func(w http.ResponseWriter, r *http.Request, limit int64, req *api.SendRequest) bool {
				return decodeBody(w, r, limit, req)
			})
			if ok1 != ok2 || code1 != code2 || body1 != body2 || (ok1 && !reflect.DeepEqual(req1, req2)) {
				t.Errorf("body %q: readSend %v %d %s %#v; decodeBody %v %d %s %#v", b, ok1, code1, body1, req1, ok2, code2, body2, req2)
			}
		}
	}
}

// answerMessages are answers of a send, plain and not.
func answerMessages() []api.Message {
	at := time.Date(2026, 11, 26, 0, 1, 2, 345678900, time.UTC)
	base := api.Message{ID: "bafyid", V: 1, Space: "space", From: "12D3KooW", CreatedAt: at, Type: "text",
		Content: json.RawMessage(`{"text":"hi"}`), Sig: "c2ln+/==", Cursor: "42"}
	ms := []api.Message{base}
	add := func(f func(m *api.Message)) {
		m := base
		f(&m)
		ms = append(ms, m)
	}
	add(func(m *api.Message) { m.Prev = []string{"a", "b"} })
	add(func(m *api.Message) { m.Prev = []string{} })
	add(func(m *api.Message) { m.Refs = &api.Refs{} })
	add(func(m *api.Message) { m.Refs = &api.Refs{Messages: []string{"m1"}} })
	add(func(m *api.Message) { m.Refs = &api.Refs{Nodes: []string{"n1", "n2"}} })
	add(func(m *api.Message) { m.Refs = &api.Refs{Messages: []string{"m1"}, Nodes: []string{"n<1>"}} })
	add(func(m *api.Message) { m.TTL = 3600 })
	add(func(m *api.Message) { m.TTL = -1 })
	add(func(m *api.Message) { m.Meta = map[string]string{"z": "1", "a": "<&>", "é\n": "\u2028\xff"} })
	add(func(m *api.Message) { m.Meta = map[string]string{} })
	add(func(m *api.Message) { m.Content = json.RawMessage(" {\n \"a\" : [ 1 , \"<b>\" ] }\t") })
	add(func(m *api.Message) { m.Content = nil })
	add(func(m *api.Message) { m.Content = json.RawMessage(`{"a":`) }) // invalid: encoding/json's error
	add(func(m *api.Message) { m.Content = json.RawMessage(``) })
	add(func(m *api.Message) { m.Cursor = "" })
	add(func(m *api.Message) { m.Raw = []byte("raw \x00 bytes") })
	add(func(m *api.Message) { m.Type = "ty\"pe\\ \x01" })
	add(func(m *api.Message) { m.CreatedAt = time.Time{} })
	add(func(m *api.Message) { m.CreatedAt = at.Truncate(time.Second) })
	add(func(m *api.Message) { m.CreatedAt = at.In(time.FixedZone("x", -3*3600-1800)) })
	add(func(m *api.Message) { m.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })
	add(func(m *api.Message) { m.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) })
	add(func(m *api.Message) { m.V = -7; m.ID = ""; m.From = "\xc3" })
	return ms
}

func TestAppendMessageMatchesJSON(t *testing.T) {
	for _, m := range answerMessages() {
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusCreated, m)
		got := httptest.NewRecorder()
		writeMessage(got, http.StatusCreated, m)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Errorf("message %#v:\n got %d %v %q\nwant %d %v %q", m, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}

// TestWriteStoredMatchesJSON: the send's answer is written, without
// building an api.Message, byte for byte as writeJSON writes it.
func TestWriteStoredMatchesJSON(t *testing.T) {
	for i, m := range storedMessages(t) {
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusCreated, apiStored(m))
		got := httptest.NewRecorder()
		writeStored(got, http.StatusCreated, m)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Errorf("message %d:\n got %d %v %q\nwant %d %v %q", i, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}

// BenchmarkSendCodec decodes a send's body and encodes its answer, by
// the fast path and by encoding/json.
func BenchmarkSendCodec(b *testing.B) {
	body := `{"content":{"text":"bench message 12345","n":12345,"at":"2026-11-26T00:00:00.000000001Z"}}`
	m := answerMessages()[1]
	for _, c := range []struct {
		name   string
		read   func(http.ResponseWriter, *http.Request, int64, *api.SendRequest) bool
		answer func(http.ResponseWriter, int, api.Message)
	}{
		{"fast", readSend, writeMessage},
		{"json", func(w http.ResponseWriter, r *http.Request, limit int64, req *api.SendRequest) bool {
			return decodeBody(w, r, limit, req)
		}, func(w http.ResponseWriter, status int, m api.Message) { writeJSON(w, status, m) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/spaces/x/messages", strings.NewReader(body))
				w := httptest.NewRecorder()
				var req api.SendRequest
				if !c.read(w, r, 1<<20, &req) {
					b.Fatal(w.Body)
				}
				c.answer(w, http.StatusCreated, m)
			}
		})
	}
}

// BenchmarkWriteStored writes a send's answer from the stored message, by
// hand and through an api.Message.
func BenchmarkWriteStored(b *testing.B) {
	m := newFake().add("a message of a few words, as agents send them")
	for _, c := range []struct {
		name  string
		write func(http.ResponseWriter, int, node.Message)
	}{
		{"stored", writeStored},
		{"api", func(w http.ResponseWriter, status int, m node.Message) { writeMessage(w, status, apiStored(m)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.write(httptest.NewRecorder(), http.StatusCreated, m)
			}
		})
	}
}
