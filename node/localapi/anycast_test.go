package localapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestInvokeByCapability: a call by capability calls the capability's
// name on no given peer and says which provider answered (unary, and on
// the first frame of a stream); a peer and a capability together, or a
// different name, are refused before anything is called.
func TestInvokeByCapability(t *testing.T) {
	f := newFake()
	status, body := do(t, f, "POST", "/v1/invoke", `{"capability":"summarize","input":1}`)
	if status != 200 || !strings.Contains(string(body), `"peer":"`+anyPeer+`"`) || !strings.Contains(string(body), `"attempts":[{"peer":"`+f.id.String()+`","code":"unreachable"}]`) {
		t.Fatalf("invoke by capability: %d %s", status, body)
	}
	if inv := f.invs[0]; inv.Peer != "" || inv.Name != "summarize" {
		t.Fatalf("invocation %+v", inv)
	}
	f.frames = []protocol.CallFrame{{Seq: 0, Kind: "started"}, {Seq: 1, Kind: "final", Data: json.RawMessage(`"b"`)}}
	status, body = do(t, f, "POST", "/v1/invoke", `{"capability":"summarize","stream":true}`)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if status != 200 || len(lines) != 2 || !strings.Contains(lines[0], `"peer":"`+anyPeer+`"`) || strings.Contains(lines[1], `"peer"`) {
		t.Fatalf("stream invoke by capability: %d %q", status, lines)
	}
	for _, bad := range []string{
		`{"capability":"summarize","peer":"` + f.id.String() + `"}`,
		`{"capability":"summarize","name":"other"}`,
	} {
		status, body := do(t, f, "POST", "/v1/invoke", bad)
		if status != 400 || errorCode(t, body) != "bad_request" {
			t.Fatalf("%s: %d %s", bad, status, body)
		}
	}
	if len(f.invs) != 1 {
		t.Fatalf("a refused request reached the backend: %d invocations", len(f.invs))
	}
}
