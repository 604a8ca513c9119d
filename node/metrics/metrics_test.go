package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNil: a node without metrics calls them on a nil *Metrics.
func TestNil(t *testing.T) {
	var m *Metrics
	m.SpaceJoined("id", "name")
	m.MessageSent("id")
	m.MessageReceived("id")
	m.MessageRejected("id", "malformed")
	m.DMSent(true)
	m.DMReceived("accepted")
	m.Attempt(true)
	m.Delivered()
	m.DeadLettered(true)
	m.CallServed("x", true, "ok", time.Millisecond)
	m.CallMade("x", "ok", time.Millisecond)
	m.APIRequest("GET /v1/node", 200, time.Millisecond)
	m.WatchGauges(Gauges{})
	if m.SpaceName("id") != "" {
		t.Fatal("a nil Metrics names a space")
	}
}

// TestBounds: labels the network chooses are bounded.
func TestBounds(t *testing.T) {
	m := New()
	for i := range MaxCallNames + 10 {
		m.CallMade(fmt.Sprint("name", i), "ok", time.Millisecond)
	}
	if n := testutil.CollectAndCount(m.calls); n != MaxCallNames+1 {
		t.Errorf("%d call series, want %d and other", n, MaxCallNames)
	}
	if v := testutil.ToFloat64(m.calls.WithLabelValues("client", Other, "ok")); v != 10 {
		t.Errorf("other: %v, want 10", v)
	}
	m.CallServed("made-up", false, "no_handler", time.Millisecond)
	m.CallServed("served", true, "a-code-a-handler-made-up", time.Millisecond)
	if v := testutil.ToFloat64(m.calls.WithLabelValues("server", Other, "no_handler")); v != 1 {
		t.Errorf("a name no handler serves: %v, want 1 under other", v)
	}
	if v := testutil.ToFloat64(m.calls.WithLabelValues("server", "served", Other)); v != 1 {
		t.Errorf("a made-up code: %v, want 1 under other", v)
	}
	m.SpaceJoined("s1", "one")
	m.MessageRejected("s1", "bad_signature")
	m.MessageRejected("s2", "whatever a peer says")
	if v := testutil.ToFloat64(m.rejected.WithLabelValues("one", "bad_signature")); v != 1 {
		t.Errorf("rejected in a joined space: %v", v)
	}
	if v := testutil.ToFloat64(m.rejected.WithLabelValues(Other, Other)); v != 1 {
		t.Errorf("rejected in another space for an unknown reason: %v", v)
	}
	m.DMReceived("anything")
	if v := testutil.ToFloat64(m.dmReceived.WithLabelValues(Other)); v != 1 {
		t.Errorf("dm received with an unknown result: %v", v)
	}
	for code, want := range map[int]string{200: "200", 404: "404", 507: "507", 0: Other, 1000: Other} {
		if got := statusText(code); got != want {
			t.Errorf("statusText(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestHandler serves the registry in the text format.
func TestHandler(t *testing.T) {
	m := New()
	m.WatchGauges(Gauges{Peers: func() int { return 3 }})
	m.APIRequest("GET /v1/node", 200, time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"weft_peers_connected 3", `weft_api_requests_total{code="200",route="GET /v1/node"} 1`, "go_goroutines", "process_"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
}
