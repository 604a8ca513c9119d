package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

// callsOf reads GET /v1/calls through the socket.
func callsOf(t testing.TB, hc *http.Client) api.Calls {
	t.Helper()
	resp, err := hc.Get("http://weft/v1/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c api.Calls
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCallsInFlight: while a call is being served, the callee lists it
// among the calls it serves and the caller among those it makes, both
// with the handler's name and the other side; once answered, neither does.
// Unary and stream calls alike.
func TestCallsInFlight(t *testing.T) {
	a, ca, b, cb := pair(t)
	trust(t, cb, a)
	release := make(chan struct{})
	serveReq(t, cb, api.HandlerRequest{Names: []string{"slow"}, Concurrency: 3}, func(ctx context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{"ok":true}`), nil, nil
	})
	ha, hb := rawHTTP(a.cfg.SocketPath()), rawHTTP(b.cfg.SocketPath())
	if c := callsOf(t, hb); len(c.Handlers) != 1 || c.Handlers[0].Names[0] != "slow" || c.Handlers[0].Capacity != 3 || len(c.Serving) != 0 {
		t.Fatalf("callee before the calls: %+v", c)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 2)
	go func() {
		_, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "slow"})
		done <- err
	}()
	go func() {
		err := ca.InvokeStream(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "slow"}, func(api.Frame) error { return nil })
		done <- err
	}()
	eventually(t, 20*time.Second, "both calls in flight on both sides", func() bool {
		ac, bc := callsOf(t, ha), callsOf(t, hb)
		if len(ac.Calling) != 2 || len(bc.Serving) != 2 || bc.Handlers[0].InFlight != 2 {
			return false
		}
		streams := 0
		for i := range 2 {
			out, in := ac.Calling[i], bc.Serving[i]
			if out.Name != "slow" || out.Peer != b.ID().String() || in.Name != "slow" || in.Peer != a.ID().String() || in.ID == "" {
				t.Fatalf("calling %+v, serving %+v", out, in)
			}
			if out.Stream {
				streams++
			}
		}
		return streams == 1
	})
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "no calls in flight", func() bool {
		return len(callsOf(t, ha).Calling) == 0 && len(callsOf(t, hb).Serving) == 0
	})
}
