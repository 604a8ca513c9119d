package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// serve runs fn as a handler of names on c until the test ends.
func serve(t *testing.T, c *client.Client, fn client.HandlerFunc, names ...string) {
	t.Helper()
	serveReq(t, c, api.HandlerRequest{Names: names}, fn)
}

// serveReq registers fn with req on c, waits until the daemon has it, and
// unregisters it when the test ends.
func serveReq(t testing.TB, c *client.Client, req api.HandlerRequest, fn client.HandlerFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c.Serve(ctx, req, fn, func() { close(ready) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("handler not registered")
	}
}

// TestInvokeEscapableContent: JSON full of '<', '>' and '&' goes through
// both daemons and both agents unchanged (no HTML escaping that would
// make it six times larger than the limits checked), and the handler
// stays registered.
func TestInvokeEscapableContent(t *testing.T) {
	a, ca, b, cb := pair(t)
	trust(t, cb, a)
	serve(t, cb, func(_ context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		return c.Input, nil, nil
	}, "echo")
	input := json.RawMessage(`{"html":"` + strings.Repeat("<a&b>", 160_000) + `"}`) // 800 KB
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for range 2 {
		res, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "echo", Input: input})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Output) != string(input) {
			t.Fatalf("output of %d bytes differs from the input of %d", len(res.Output), len(input))
		}
	}
}

// TestRefusedAnswerFailsTheCall: an answer the daemon cannot take (over the
// size limit) fails the call at once with handler_failed instead of
// leaving the caller waiting for its deadline.
func TestRefusedAnswerFailsTheCall(t *testing.T) {
	a, ca, b, cb := pair(t)
	trust(t, cb, a)
	serve(t, cb, func(context.Context, api.IncomingCall, func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		return json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`), nil, nil
	}, "big")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "big", Timeout: "60s"})
	if !client.IsCode(err, "handler_failed") {
		t.Fatalf("err %v, want handler_failed before the test's 10 s deadline", err)
	}
}

// TestStreamInvokeRefusedStatus: a stream call refused at once answers an
// honest status with the error body, like a unary call, not a 200 stream
// whose first line is the error.
func TestStreamInvokeRefusedStatus(t *testing.T) {
	a, _, b, _ := pair(t)
	hc := rawHTTP(a.cfg.SocketPath())
	body := fmt.Sprintf(`{"peer":%q,"name":"nobody_home","stream":true}`, b.ID())
	resp, err := hc.Post("http://weft/v1/invoke", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNotFound || e.Error.Code != api.CodeNoHandler {
		t.Fatalf("stream invoke of a missing handler: %d %+v, want 404 %s", resp.StatusCode, e, api.CodeNoHandler)
	}
}
