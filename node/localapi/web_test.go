package localapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/weftmesh/weft/protocol/api"
)

// TestCallsInFlight: GET /v1/calls shows the handlers and the calls in
// flight with how long they have run.
func TestCallsInFlight(t *testing.T) {
	f := newFake()
	status, b := do(t, f, "GET", "/v1/calls", "")
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var c api.Calls
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Handlers) != 1 || c.Handlers[0].Names[0] != "echo" || c.Handlers[0].InFlight != 1 || c.Handlers[0].Capacity != 64 {
		t.Fatalf("handlers %+v", c.Handlers)
	}
	if len(c.Serving) != 1 || c.Serving[0].ID != "c1" || c.Serving[0].Peer != f.id.String() || c.Serving[0].ElapsedMS < 1000 {
		t.Fatalf("serving %+v", c.Serving)
	}
	if c.Calling == nil {
		t.Fatal("calling is null, want []")
	}
}

// TestForBrowsers: the API refuses requests with Origin or Referer, but
// ForBrowsers (for a listener that checks Origin itself) serves them; GET
// /v1/node tells the web listener's URL when WithWebURL is given.
func TestForBrowsers(t *testing.T) {
	f := newFake()
	a := New(f, "/mcp", nil, WithWebURL(func() string { return "http://127.0.0.1:1234" }))
	for _, c := range []struct {
		h    string
		want int
	}{{"api", 403}, {"browsers", 200}} {
		req := httptest.NewRequest("GET", "/v1/node", nil)
		req.Header.Set("Origin", "http://127.0.0.1:1234")
		w := httptest.NewRecorder()
		if c.h == "api" {
			a.ServeHTTP(w, req)
		} else {
			a.ForBrowsers().ServeHTTP(w, req)
		}
		if w.Code != c.want {
			t.Fatalf("%s: status %d, want %d", c.h, w.Code, c.want)
		}
		if c.want == 200 {
			var n api.Node
			if err := json.Unmarshal(w.Body.Bytes(), &n); err != nil || n.Web != "http://127.0.0.1:1234" || n.Sync == nil {
				t.Fatalf("node %s (%v)", w.Body.Bytes(), err)
			}
		}
	}
}
