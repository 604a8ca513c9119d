package client

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/internal/jsonx/jsonxtest"
	"github.com/weftmesh/weft/protocol/api"
)

// handlerEvents are handler events, plain and not, valid and not.
var handlerEvents = []string{
	`{"type":"call","call":{"id":"c1","name":"echo","from":"12D3KooWabc","input":{"ping":1},"meta":{"traceparent":"00-ab-cd-01"},"deadline":"2026-11-27T04:40:00.123456789Z"}}`,
	`{"type":"call","call":{"id":"c2","name":"count","from":"p","input":3,"stream":true}}`,
	`{"type":"cancel","id":"c1"}`, ` { "type" : "call" , "call" : { } } `, `{"type":"ready"}`,
	`{"type":"call","call":{"id":"c","deadline":"2026-11-27T05:40:00+01:00"}}`, `{}`,
	// Left to encoding/json:
	`{"type":"ready","allow":["trusted"]}`, `{"type":"call","call":null}`, `{"type":"call","call":{"input":null}}`,
	`{"type":"call","call":{"deadline":null}}`, `{"type":"call","call":{"deadline":"yesterday"}}`,
	`{"type":"call","call":{"deadline":"2026-11-27T04:40:00Z","deadline":"2026-11-27T04:40:01Z"}}`,
	`{"type":"call","call":{"ID":"c"}}`, `{"Type":"call"}`, `{"type":"t\u00e9"}`, `{"type":"call","call":{"meta":{"k":1}}}`,
	`{"type":"call","call":{"other":1}}`, `{"type":"call","call":{"stream":1}}`, `{"type":"call"} x`,
	`{"type":"call","call":{"id":"c"}`, `{"type":"call","call":{"id":"c",}}`, `[]`, `null`, ``, `{`,
	`{"type":"call","call":{"input":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}}`,
}

// checkParseHandlerEvent fails t if parseHandlerEvent accepts b
// differently from encoding/json.
func checkParseHandlerEvent(t *testing.T, b []byte) {
	t.Helper()
	jsonxtest.MatchesJSON(t, b, parseHandlerEvent)
}

func TestParseHandlerEventMatchesJSON(t *testing.T) {
	jsonxtest.Table(t, handlerEvents, 7, parseHandlerEvent)
	// Events as the daemon writes them (jsonx.Marshal), of every shape,
	// with pieces cut out or swapped in. The input is the line's bytes
	// copied: the reader reuses its buffer.
	strs := []string{"", "echo", "a b", "é", `q"uote`, "<tag>&", "\u2028", "\x01"}
	inputs := []string{"", `{"ping":1}`, `[1,2]`, `"s"`, `12`, `true`, `{"a":"\u00e9\n"}`}
	metas := []map[string]string{nil, {}, {"traceparent": "00-ab-cd-01"}, {"k": "v\"w", "a": ""}, {"é": "\t"}}
	r := rand.New(rand.NewPCG(21, 22))
	took := 0
	for range 5000 {
		c := &api.IncomingCall{ID: strs[r.IntN(len(strs))], Name: strs[r.IntN(len(strs))], From: strs[r.IntN(len(strs))],
			Meta: metas[r.IntN(len(metas))], Stream: r.IntN(2) == 0}
		if in := inputs[r.IntN(len(inputs))]; in != "" {
			c.Input = json.RawMessage(in)
		}
		if r.IntN(2) == 0 {
			c.Deadline = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("", 3600*(r.IntN(25)-12)))
		}
		b, err := jsonx.Marshal(api.HandlerEvent{Type: "call", Call: c})
		if err != nil {
			t.Fatal(err)
		}
		checkParseHandlerEvent(t, b)
		var ev api.HandlerEvent
		if line := append([]byte{}, b...); parseHandlerEvent(line, &ev) {
			took++
			if len(c.Input) > 0 {
				in := string(ev.Call.Input)
				clear(line)
				if string(ev.Call.Input) != in {
					t.Fatalf("the input changed with the line's buffer")
				}
			}
		}
		cut := r.IntN(len(b))
		checkParseHandlerEvent(t, append(append([]byte{}, b[:cut]...), b[cut+1:]...))
		mut := append([]byte{}, b...)
		mut[r.IntN(len(mut))] = `{}[]",:0 e\n`[r.IntN(12)]
		checkParseHandlerEvent(t, mut)
	}
	if took < 500 {
		t.Errorf("the fast path took %d of 5,000 generated events", took)
	}
}

func FuzzParseHandlerEvent(f *testing.F) {
	for _, b := range handlerEvents {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseHandlerEvent(t, b) })
}
