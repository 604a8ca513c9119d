package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

var errEOF = io.EOF

// do sends one request to the API of f and returns the status and body.
func do(t *testing.T, f *fake, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	New(f, "/mcp", nil).ServeHTTP(w, req)
	return w.Code, w.Body.Bytes()
}

func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not an error answer: %s", b)
	}
	return e.Error.Code
}

// TestErrorsOneCodeEverywhere: each mistake has one code and status on
// every route, whatever the route's handler does with it.
func TestErrorsOneCodeEverywhere(t *testing.T) {
	f := newFake()
	m := f.add("hello")
	const badPeer = "not-a-peer"
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		// A bad peer ID is bad_peer wherever it appears.
		{"dm to", "POST", "/v1/dm", `{"to":"` + badPeer + `","content":{}}`, 400, api.CodeBadPeer},
		{"invoke peer", "POST", "/v1/invoke", `{"peer":"` + badPeer + `","name":"x"}`, 400, api.CodeBadPeer},
		{"card", "GET", "/v1/peers/" + badPeer + "/card", "", 400, api.CodeBadPeer},
		{"health", "GET", "/v1/peers/" + badPeer + "/health", "", 400, api.CodeBadPeer},
		// A bad message ID is bad_id.
		{"message", "GET", "/v1/messages/nope", "", 400, api.CodeBadID},
		{"thread", "GET", "/v1/messages/nope/thread", "", 400, api.CodeBadID},
		{"iacp", "GET", "/v1/messages/nope/iacp", "", 400, api.CodeBadID},
		{"dead letter", "DELETE", "/v1/deadletters/nope", "", 400, api.CodeBadID},
		{"reply_to", "POST", "/v1/dm", `{"to":"` + f.id.String() + `","content":{},"reply_to":"nope"}`, 422, api.CodeInvalid},
		{"refs.messages", "POST", "/v1/spaces/lab/messages", `{"content":{},"refs":{"messages":["nope"]}}`, 422, api.CodeInvalid},
		{"refs.nodes", "POST", "/v1/spaces/lab/messages", `{"content":{},"refs":{"nodes":["nope"]}}`, 422, api.CodeInvalid},
		// Unknown things.
		{"unknown space read", "GET", "/v1/spaces/nope/messages", "", 404, api.CodeUnknownSpace},
		{"unknown space send", "POST", "/v1/spaces/nope/messages", `{"content":{}}`, 404, api.CodeUnknownSpace},
		{"unknown space events", "GET", "/v1/spaces/nope/events", "", 404, api.CodeUnknownSpace},
		{"unknown space leave", "DELETE", "/v1/spaces/nope", "", 404, api.CodeUnknownSpace},
		{"unknown message", "GET", "/v1/messages/" + protocol.MessageID([]byte("x")).String(), "", 404, api.CodeNotFound},
		{"unknown call reply", "POST", "/v1/calls/zz/reply", `{"output":1}`, 404, api.CodeUnknownCall},
		{"unknown call frames", "POST", "/v1/calls/zz/frames", `{"kind":"final"}`, 404, api.CodeUnknownCall},
		{"no route", "GET", "/v2/x", "", 404, api.CodeNotFound},
		{"wrong method", "PUT", "/v1/spaces", "", 405, api.CodeMethod},
		// Bodies.
		{"malformed", "POST", "/v1/spaces", `{"name":`, 400, api.CodeBadRequest},
		{"empty", "POST", "/v1/spaces", ``, 400, api.CodeBadRequest},
		{"trailing data", "POST", "/v1/spaces", `{"name":"a"} {}`, 400, api.CodeBadRequest},
		{"too large", "POST", "/v1/spaces", `{"name":"` + strings.Repeat("a", maxSmallBody) + `"}`, 413, api.CodeTooLarge},
		{"bad space name", "POST", "/v1/spaces", `{"name":"a/b"}`, 400, api.CodeBadRequest},
		{"bad retention", "POST", "/v1/spaces", `{"name":"a","retention":{"max_age":"soon"}}`, 400, api.CodeBadRequest},
		{"bad cursor", "GET", "/v1/spaces/lab/messages?after=zz", "", 400, api.CodeBadCursor},
		{"bad limit", "GET", "/v1/spaces/lab/messages?limit=0", "", 400, api.CodeBadRequest},
		{"sent bad cursor", "GET", "/v1/sent?after=zz", "", 400, api.CodeBadCursor},
		{"sent bad limit", "GET", "/v1/sent?limit=-1", "", 400, api.CodeBadRequest},
		{"bad depth", "GET", "/v1/messages/" + m.ID.String() + "/thread?depth=x", "", 400, api.CodeBadRequest},
		{"bad direction", "GET", "/v1/messages/" + m.ID.String() + "/thread?direction=up", "", 400, api.CodeBadRequest},
		{"bad multiaddr", "POST", "/v1/peers", `{"addr":"nope"}`, 400, api.CodeBadAddr},
		{"bad timeout", "POST", "/v1/invoke", `{"peer":"` + f.id.String() + `","name":"x","timeout":"soon"}`, 400, api.CodeBadRequest},
		{"discover timeout", "GET", "/v1/discover?capability=x&timeout=1h", "", 400, api.CodeBadRequest},
		{"no names", "POST", "/v1/handlers", `{"names":[]}`, 400, api.CodeBadRequest},
		{"bad allow", "POST", "/v1/handlers", `{"names":["x"],"allow":["everyone"]}`, 400, api.CodeBadRequest},
		{"trust bad peer", "POST", "/v1/trust", `{"peer":"nope"}`, 400, api.CodeBadPeer},
		{"trust self", "POST", "/v1/trust", `{"peer":"` + f.id.String() + `"}`, 400, api.CodeBadPeer},
		{"untrust bad peer", "DELETE", "/v1/trust/nope", "", 400, api.CodeBadPeer},
		{"reply kind", "POST", "/v1/calls/c1/reply", `{"kind":"delta"}`, 400, api.CodeBadRequest},
		{"frames to unary", "POST", "/v1/calls/c1/frames", `{"kind":"final"}`, 400, api.CodeBadRequest},
		{"iacp envelope", "POST", "/v1/dm/iacp", `{}`, 422, api.CodeInvalid},
		{"browser", "GET", "/v1/node", "", 403, api.CodeForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.name == "browser" {
				hdr = []string{"Origin", "http://evil.example"}
			}
			status, body := do(t, f, tc.method, tc.path, tc.body, hdr...)
			if status != tc.status || errorCode(t, body) != tc.code {
				t.Fatalf("%s %s: %d %s, want %d %s", tc.method, tc.path, status, body, tc.status, tc.code)
			}
		})
	}
}

// TestBackendErrors: the backend's typed errors reach the client with the
// status of their code in the one table; an error of the node itself is
// 503, an agent's own call code 502.
func TestBackendErrors(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{&node.Error{Code: api.CodeUnknownSpace, Msg: "x"}, 404, api.CodeUnknownSpace},
		{protocol.Errorf(protocol.CodeForbidden, "not you"), 403, api.CodeForbidden},
		{fmt.Errorf("wrapped: %w", &node.Error{Code: api.CodeConnectFailed, Msg: "x"}), 502, api.CodeConnectFailed},
		{protocol.Errorf(protocol.CodeUnreachable, "gone"), 503, api.CodeUnreachable},
		{protocol.Errorf(protocol.CodeNoHandler, "none"), 404, api.CodeNoHandler},
		{protocol.Errorf(protocol.CodeDeadline, "late"), 504, api.CodeDeadline},
		{protocol.Errorf("my_own_code", "agent says no"), 502, "my_own_code"},
		{fmt.Errorf("sign: %w", protocol.ErrTooLarge), 413, api.CodeTooLarge},
		{fmt.Errorf("check: %w", protocol.ErrClockSkew), 422, api.CodeClockSkew},
		{errors.New("disk on fire"), 503, api.CodeUnavailable},
	}
	for _, tc := range tests {
		f := newFake()
		f.err = tc.err
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/v1/spaces/lab/messages", `{"content":{}}`},
			{"POST", "/v1/invoke", `{"peer":"` + f.id.String() + `","name":"x"}`},
			{"POST", "/v1/invoke", `{"peer":"` + f.id.String() + `","name":"x","stream":true}`},
			{"POST", "/v1/dm", `{"to":"` + f.id.String() + `","content":{}}`},
			{"GET", "/v1/spaces", ""},
		} {
			status, body := do(t, f, r.method, r.path, r.body)
			if status != tc.status || errorCode(t, body) != tc.code {
				t.Errorf("%v on %s %s: %d %s, want %d %s", tc.err, r.method, r.path, status, body, tc.status, tc.code)
			}
		}
	}
}

// TestCodesInStep: the API's codes are the protocol's, where both name a
// failure, and every code the API defines has a status in the table.
func TestCodesInStep(t *testing.T) {
	validation := map[error]string{
		protocol.ErrTooLarge: api.CodeTooLarge, protocol.ErrMalformed: api.CodeMalformed,
		protocol.ErrVersion: api.CodeUnsupportedVersion, protocol.ErrBadSender: api.CodeBadSender,
		protocol.ErrBadSignature: api.CodeBadSignature, protocol.ErrIDMismatch: api.CodeIDMismatch,
		protocol.ErrClockSkew: api.CodeClockSkew, protocol.ErrExpired: api.CodeExpired,
		protocol.ErrBadID: api.CodeBadID,
	}
	for err, code := range validation {
		if got := protocol.Code(err); got != code {
			t.Errorf("protocol.Code(%v) = %q, api says %q", err, got, code)
		}
	}
	calls := map[string]string{
		protocol.CodeNoHandler: api.CodeNoHandler, protocol.CodeUnreachable: api.CodeUnreachable,
		protocol.CodeDeadline: api.CodeDeadline, protocol.CodeCancelled: api.CodeCancelled,
		protocol.CodeHandlerFailed: api.CodeHandlerFailed, protocol.CodeBadRequest: api.CodeBadRequest,
		protocol.CodeOverloaded: api.CodeOverloaded, protocol.CodeRefused: api.CodeRefused,
		protocol.CodeInternal: api.CodeInternal, protocol.CodeForbidden: api.CodeForbidden,
	}
	for p, a := range calls {
		if p != a {
			t.Errorf("protocol call code %q, api %q", p, a)
		}
	}
	for _, code := range []string{
		api.CodeBadRequest, api.CodeBadCursor, api.CodeBadAddr, api.CodeBadID, api.CodeMethod, api.CodeForbidden,
		api.CodeUnauthorized, api.CodeNotFound, api.CodeUnknownSpace, api.CodeInvalid, api.CodeTooLarge,
		api.CodeMalformed, api.CodeUnsupportedVersion, api.CodeBadSender, api.CodeBadSignature, api.CodeIDMismatch,
		api.CodeClockSkew, api.CodeExpired, api.CodeUnavailable, api.CodeConnectFailed, api.CodeNoHandler,
		api.CodeUnreachable, api.CodeDeadline, api.CodeCancelled, api.CodeHandlerFailed, api.CodeOverloaded,
		api.CodeBadPeer, api.CodeUnknownCall, api.CodeRefused, api.CodeInternal,
		api.CodeQuotaExceeded, api.CodeRateLimited,
	} {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("code %q has no status in the table", code)
		}
	}
}

// TestTrustRoutes: trust (201 new, 200 again with a new name), list with
// the DM policy, untrust (removed, then not).
func TestTrustRoutes(t *testing.T) {
	f := newFake()
	other := newFake().id
	body := `{"peer":"` + other.String() + `","name":"bob"}`
	if status, b := do(t, f, "POST", "/v1/trust", body); status != 201 {
		t.Fatalf("trust: %d %s", status, b)
	}
	status, b := do(t, f, "POST", "/v1/trust", `{"peer":"`+other.String()+`","name":"robert"}`)
	var tp api.TrustedPeer
	if err := json.Unmarshal(b, &tp); status != 200 || err != nil || tp.Peer != other.String() || tp.Name != "robert" {
		t.Fatalf("trust again: %d %s", status, b)
	}
	status, b = do(t, f, "GET", "/v1/trust", "")
	var list api.TrustList
	if err := json.Unmarshal(b, &list); status != 200 || err != nil || len(list.Peers) != 1 || list.Peers[0].Name != "robert" ||
		list.DM == nil || list.DM.Policy != "anyone" || list.DM.Quota != 1000 {
		t.Fatalf("list: %d %s", status, b)
	}
	for _, want := range []bool{true, false} {
		status, b = do(t, f, "DELETE", "/v1/trust/"+other.String(), "")
		var u api.Untrusted
		if err := json.Unmarshal(b, &u); status != 200 || err != nil || u.Removed != want {
			t.Fatalf("untrust: %d %s, want removed %v", status, b, want)
		}
	}
	if status, b = do(t, f, "GET", "/v1/trust", ""); status != 200 || !strings.Contains(string(b), `"peers":[]`) {
		t.Fatalf("list after untrust: %d %s", status, b)
	}
}

// TestSendAndRead: a send is decoded into a post (refs, ttl, meta as
// given) and answered with the stored message; pages follow cursors.
func TestSendAndRead(t *testing.T) {
	f := newFake()
	ref := f.add("first")
	status, body := do(t, f, "POST", "/v1/spaces/lab/messages",
		`{"content":{"text":"<b>&"},"type":"note","ttl":60,"meta":{"k":"v"},"refs":{"messages":["`+ref.ID.String()+`"],"nodes":["`+f.id.String()+`"]}}`)
	if status != http.StatusCreated {
		t.Fatalf("send: %d %s", status, body)
	}
	p := f.posts[0]
	if string(p.Content) != `{"text":"<b>&"}` || p.Type != "note" || p.TTL != time.Minute || p.Meta["k"] != "v" ||
		len(p.Refs.Messages) != 1 || p.Refs.Messages[0] != ref.ID || p.Refs.Nodes[0] != f.id.String() {
		t.Fatalf("post %+v", p)
	}
	var m api.Message
	if err := json.Unmarshal(body, &m); err != nil || m.ID == "" || m.Cursor == "" {
		t.Fatalf("answer %s: %v", body, err)
	}
	for range 3 {
		f.add("more")
	}
	var page api.Page
	status, body = do(t, f, "GET", "/v1/spaces/lab/messages?limit=2", "")
	if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Messages) != 2 || page.Messages[0].ID != ref.ID.String() {
		t.Fatalf("page: %d %s", status, body)
	}
	status, body = do(t, f, "GET", "/v1/spaces/lab/messages?limit=10&after="+page.Next, "")
	if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Messages) != 3 {
		t.Fatalf("second page: %d %s", status, body)
	}
	status, body = do(t, f, "GET", "/v1/spaces/lab/messages?after=end", "")
	if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Messages) != 0 {
		t.Fatalf("page after end: %d %s", status, body)
	}
}

// TestEventsReplayThenFollow: the shared stream writer replays from the
// cursor, then follows what the backend stores, each event's id its cursor.
func TestEventsReplayThenFollow(t *testing.T) {
	f := newFake()
	f.add("one")
	second := f.add("two")
	srv := httptest.NewServer(New(f, "/mcp", nil))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/spaces/lab/events", nil)
	req.Header.Set("Last-Event-ID", "1") // not a cursor: refused
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("bad Last-Event-ID: %d", resp.StatusCode)
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/spaces/lab/events?after="+f.msgs[0].Cursor.String(), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	next := func() (id, data string) {
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			case line == "" && data != "":
				return id, data
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return
	}
	id, data := next()
	if id != second.Cursor.String() || !strings.Contains(data, second.ID.String()) {
		t.Fatalf("replayed %s %s, want the second message", id, data)
	}
	third := f.add("three")
	if id, data = next(); id != third.Cursor.String() || !strings.Contains(data, `"text":"three"`) {
		t.Fatalf("followed %s %s, want the third message", id, data)
	}
}

// TestHandlerStream: a registered handler's calls and cancellations reach
// it as NDJSON events; the stream ends the registration when it closes.
func TestHandlerStream(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, "/mcp", nil))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/handlers",
		strings.NewReader(`{"names":["echo"],"allow":["trusted","`+f.id.String()+`"]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var ev api.HandlerEvent
	wantAllow := []string{"trusted", "peer:" + f.id.String()}
	if err := dec.Decode(&ev); err != nil || ev.Type != "ready" || !slices.Equal(ev.Allow, wantAllow) {
		t.Fatalf("first event %+v, %v; want ready allowing %q", ev, err, wantAllow)
	}
	f.mu.Lock()
	h, spec := f.handler, f.spec
	f.mu.Unlock()
	if !slices.Equal(spec.Allow, []string{"trusted", f.id.String()}) {
		t.Fatalf("the backend got allow %q", spec.Allow)
	}
	h.calls <- node.IncomingCall{ID: "c1", Name: "echo", From: f.id, Input: json.RawMessage(`{"x":1}`)}
	if err := dec.Decode(&ev); err != nil || ev.Type != "call" || ev.Call.ID != "c1" || ev.Call.From != f.id.String() || string(ev.Call.Input) != `{"x":1}` {
		t.Fatalf("call event %+v, %v", ev, err)
	}
	h.cancelled <- struct{}{}
	if err := dec.Decode(&ev); err != nil || ev.Type != "cancel" || ev.ID != "c1" {
		t.Fatalf("cancel event %+v, %v", ev, err)
	}
	cancel()
	select {
	case <-h.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not closed when its stream ended")
	}
}

// TestRepliesAndFrames: a reply finishes the call; frames are deltas then
// a final; a broken frame stream fails the call.
func TestRepliesAndFrames(t *testing.T) {
	f := newFake()
	if status, body := do(t, f, "POST", "/v1/calls/c1/reply", `{"output":{"y":2},"meta":{"m":"1"}}`); status != 200 {
		t.Fatalf("reply: %d %s", status, body)
	}
	if r := f.replies[0]; string(r.Output) != `{"y":2}` || r.Meta["m"] != "1" || r.Error != nil {
		t.Fatalf("reply %+v", r)
	}
	if status, body := do(t, f, "POST", "/v1/calls/c1/reply", `{"error":{"code":"nope","message":"no"}}`); status != 200 {
		t.Fatalf("error reply: %d %s", status, body)
	}
	if r := f.replies[1]; r.Error == nil || r.Error.Code != "nope" {
		t.Fatalf("error reply %+v", r)
	}
	f.replies = nil
	// Lines as the Go client writes them, and in any other valid form.
	status, body := do(t, f, "POST", "/v1/calls/s1/frames", `{"kind":"delta","output":1}`+"\n\n"+`{"kind":"delta","output":{"a":[2]}}`+"\r\n"+
		` { "output" : "three", "kind":"delta"}`+"\n"+`{"kind":"delta","output":4,"meta":{}}`+"\n"+`{"kind":"final","output":5}`)
	if status != 200 || !strings.Contains(string(body), `"frames":5`) || len(f.replies) != 5 {
		t.Fatalf("frames: %d %s, %d replies", status, body, len(f.replies))
	}
	for i, want := range []string{`1`, `{"a":[2]}`, `"three"`, `4`, `5`} {
		if got := string(f.replies[i].Output); got != want {
			t.Errorf("frame %d: output %s, want %s", i, got, want)
		}
	}
	f.replies = nil
	status, _ = do(t, f, "POST", "/v1/calls/s1/frames", `{"kind":"delta","output":1}`+"\n")
	if status != 400 || len(f.replies) != 2 || f.replies[1].Error == nil {
		t.Fatalf("frames without a final: %d, replies %+v", status, f.replies)
	}
	f.err = node.ErrCallOver
	if status, body := do(t, f, "POST", "/v1/calls/c1/reply", `{"output":1}`); status != 409 || errorCode(t, body) != api.CodeCancelled {
		t.Fatalf("reply after the call ended: %d %s", status, body)
	}
}

// TestInvoke: unary answers are JSON; stream answers NDJSON frames in
// order, ending with the final one.
func TestInvoke(t *testing.T) {
	f := newFake()
	status, body := do(t, f, "POST", "/v1/invoke", `{"peer":"`+f.id.String()+`","name":"echo","input":{"a":1},"timeout":"2s","parent":"p1"}`)
	if status != 200 || !strings.Contains(string(body), `"output":{"ok":true}`) {
		t.Fatalf("invoke: %d %s", status, body)
	}
	if inv := f.invs[0]; inv.Peer != f.id || inv.Name != "echo" || inv.Timeout != 2*time.Second || inv.Parent != "p1" {
		t.Fatalf("invocation %+v", inv)
	}
	f.frames = []protocol.CallFrame{{Seq: 0, Kind: "started"}, {Seq: 1, Kind: "delta", Data: json.RawMessage(`"a"`)}, {Seq: 2, Kind: "final", Data: json.RawMessage(`"b"`)}}
	status, body = do(t, f, "POST", "/v1/invoke", `{"peer":"`+f.id.String()+`","name":"echo","stream":true}`)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if status != 200 || len(lines) != 3 || !strings.Contains(lines[2], `"kind":"final"`) || lines[1] != `{"seq":1,"kind":"delta","data":"a"}` {
		t.Fatalf("stream invoke: %d %q", status, lines)
	}
}
