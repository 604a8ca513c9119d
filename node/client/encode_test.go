package client

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/weftmesh/weft/protocol/api"
)

// TestEncodeSendMatchesMarshal holds encodeRequest to marshal's bytes and
// errors for sends of every shape, contents valid and not.
func TestEncodeSendMatchesMarshal(t *testing.T) {
	contents := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"text":"hi"}`),
		json.RawMessage("{ \"text\" : \"a b\",\n \"n\": [1, 2] }"), json.RawMessage(`{"t":"<&> \u2028 é \" \\"}`),
		json.RawMessage(`{"a":`), json.RawMessage(`not json`), json.RawMessage(`[1,2]`), json.RawMessage(` {"x":1} `)}
	strs := []string{"", "text", "a\"b", "<tag>&", "é\u2028", "\x01\xff", "line\nend"}
	r := rand.New(rand.NewPCG(7, 8))
	check := func(req any) {
		t.Helper()
		got, gerr := encodeRequest(req)
		want, werr := marshal(req)
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("encodeRequest(%+v) = %q, %v; marshal %q, %v", req, got, gerr, want, werr)
		}
	}
	for range 5000 {
		req := api.SendRequest{Content: contents[r.IntN(len(contents))], Type: strs[r.IntN(len(strs))]}
		if r.IntN(3) == 0 {
			req.TTL = int64(r.IntN(7) - 3)
		}
		if r.IntN(2) == 0 {
			req.Meta = map[string]string{}
			for range r.IntN(4) {
				req.Meta[strs[r.IntN(len(strs))]] = strs[r.IntN(len(strs))]
			}
		}
		check(req)
	}
	check(api.SendRequest{Content: json.RawMessage(`{}`), Refs: &api.Refs{Messages: []string{"x"}}})
	check(api.JoinRequest{Name: "general"})
}

// TestEncodeInvokeMatchesMarshal holds encodeRequest to marshal's bytes
// and errors for invoke requests of every shape.
func TestEncodeInvokeMatchesMarshal(t *testing.T) {
	inputs := []json.RawMessage{nil, {}, json.RawMessage(`{"ping":1}`), json.RawMessage("{ \"a\" : [1, 2] }"),
		json.RawMessage(`"<&> \u2028"`), json.RawMessage(`12`), json.RawMessage(`{"a":`), json.RawMessage(`null`)}
	strs := []string{"", "echo", "a\"b", "<tag>&", "é\u2028", "\x01\xff", "12D3KooWpeer"}
	r := rand.New(rand.NewPCG(11, 12))
	pick := func() string { return strs[r.IntN(len(strs))] }
	for range 5000 {
		inv := api.InvokeRequest{Peer: pick(), Capability: pick(), Name: pick(), Input: inputs[r.IntN(len(inputs))],
			Timeout: pick(), Stream: r.IntN(2) == 0, Parent: pick()}
		if r.IntN(2) == 0 {
			inv.Meta = map[string]string{pick(): pick(), pick(): pick()}
		}
		got, gerr := encodeRequest(inv)
		want, werr := marshal(inv)
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("encodeRequest(%+v) = %q, %v; marshal %q, %v", inv, got, gerr, want, werr)
		}
	}
}
