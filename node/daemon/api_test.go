package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// TestAPIBadInput: every kind of bad request gets a 4xx JSON error with a
// stable code, and the daemon keeps serving and loses nothing.
func TestAPIBadInput(t *testing.T) {
	n, c := startNode(t, func(c *Config) { c.Limits.MaxSize = 32 << 10 })
	ctx := context.Background()
	if _, err := c.Join(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	kept, err := c.SendText(ctx, "lab", "keep me")
	if err != nil {
		t.Fatal(err)
	}
	hc := rawHTTP(n.cfg.SocketPath())
	big := `{"content":{"text":"` + strings.Repeat("x", 200<<10) + `"}}`
	justOver := `{"content":{"text":"` + strings.Repeat("x", 33<<10) + `"}}`
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/v1/spaces/lab/messages", `{"content": {`, nil, 400, api.CodeBadRequest},
		{"empty body", "POST", "/v1/spaces/lab/messages", ``, nil, 400, api.CodeBadRequest},
		{"trailing data", "POST", "/v1/spaces", `{"name":"x"} {}`, nil, 400, api.CodeBadRequest},
		{"oversized body", "POST", "/v1/spaces/lab/messages", big, nil, 413, api.CodeTooLarge},
		{"message over the limit", "POST", "/v1/spaces/lab/messages", justOver, nil, 413, "too_large"},
		{"content missing", "POST", "/v1/spaces/lab/messages", `{"type":"text"}`, nil, 422, api.CodeInvalid},
		{"content not an object", "POST", "/v1/spaces/lab/messages", `{"content":[1,2]}`, nil, 422, "malformed"},
		{"bad ref", "POST", "/v1/spaces/lab/messages", `{"content":{},"refs":{"messages":["nope"]}}`, nil, 422, api.CodeInvalid},
		{"bad peer ref", "POST", "/v1/spaces/lab/messages", `{"content":{},"refs":{"nodes":["nope"]}}`, nil, 422, api.CodeInvalid},
		{"negative ttl", "POST", "/v1/spaces/lab/messages", `{"content":{},"ttl":-1}`, nil, 422, api.CodeInvalid},
		{"unknown space send", "POST", "/v1/spaces/nowhere/messages", `{"content":{}}`, nil, 404, api.CodeUnknownSpace},
		{"unknown space read", "GET", "/v1/spaces/nowhere/messages", ``, nil, 404, api.CodeUnknownSpace},
		{"unknown space events", "GET", "/v1/spaces/nowhere/events", ``, nil, 404, api.CodeUnknownSpace},
		{"unknown space leave", "DELETE", "/v1/spaces/nowhere", ``, nil, 404, api.CodeUnknownSpace},
		{"bad cursor", "GET", "/v1/spaces/lab/messages?after=%21%21", ``, nil, 400, api.CodeBadCursor},
		{"bad cursor events", "GET", "/v1/spaces/lab/events", ``, map[string]string{"Last-Event-ID": "zzz"}, 400, api.CodeBadCursor},
		{"bad limit", "GET", "/v1/spaces/lab/messages?limit=0", ``, nil, 400, api.CodeBadRequest},
		{"huge limit", "GET", "/v1/spaces/lab/messages?limit=100000", ``, nil, 400, api.CodeBadRequest},
		{"bad message id", "GET", "/v1/messages/xyz", ``, nil, 400, "bad_id"},
		{"unknown message", "GET", "/v1/messages/" + protocol.MessageID([]byte("never sent")).String(), ``, nil, 404, api.CodeNotFound},
		{"empty space name", "POST", "/v1/spaces", `{"name":""}`, nil, 400, api.CodeBadRequest},
		{"slash in space name", "POST", "/v1/spaces", `{"name":"a/b"}`, nil, 400, api.CodeBadRequest},
		{"bad multiaddr", "POST", "/v1/peers", `{"addr":"/ip4/999.1.1.1/tcp/1"}`, nil, 400, api.CodeBadAddr},
		{"multiaddr without peer", "POST", "/v1/peers", `{"addr":"/ip4/127.0.0.1/tcp/1"}`, nil, 400, api.CodeBadAddr},
		{"bad peer id", "POST", "/v1/peers", `{"addr":"/ip4/127.0.0.1/tcp/1/p2p/notapeer"}`, nil, 400, api.CodeBadAddr},
		{"browser origin", "GET", "/v1/node", ``, map[string]string{"Origin": "https://evil.example"}, 403, api.CodeForbidden},
		{"browser referer", "POST", "/v1/spaces", `{"name":"x"}`, map[string]string{"Referer": "https://evil.example/"}, 403, api.CodeForbidden},
		{"wrong method", "PUT", "/v1/node", ``, nil, 405, api.CodeMethod},
		{"unknown route", "GET", "/v2/whatever", ``, nil, 404, api.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://weft"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e api.Error
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("status %d, body not a JSON error: %q", resp.StatusCode, b)
			}
			if resp.StatusCode != tt.status || e.Error.Code != tt.code || e.Error.Message == "" {
				t.Errorf("got %d %+v, want %d code %q", resp.StatusCode, e.Error, tt.status, tt.code)
			}
		})
	}
	// Still serving, nothing lost, nothing extra stored.
	page, err := c.Read(ctx, "lab", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].ID != kept.ID {
		t.Errorf("space holds %v after bad input, want only %s", ids(page.Messages), kept.ID)
	}
}

func TestSocketModesAndStaleSocket(t *testing.T) {
	n, c := startNode(t, nil)
	fi, err := os.Stat(n.cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want a 0600 socket", fi.Mode())
	}
	di, err := os.Stat(n.cfg.Home)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("home mode %v, want 0700", di.Mode().Perm())
	}
	// A second daemon on the same home is refused while the first lives.
	cfg := n.cfg
	if _, err := New(context.Background(), cfg); err == nil {
		t.Fatal("second daemon on a live home started")
	}
	if _, err := c.Node(context.Background()); err != nil {
		t.Fatalf("first daemon stopped serving: %v", err)
	}
}

func TestClientDaemonNotRunning(t *testing.T) {
	c := &client.Client{Home: tempHome(t)}
	_, err := c.Node(context.Background())
	if !errors.Is(err, client.ErrNotRunning) || !strings.Contains(err.Error(), "no socket at") {
		t.Fatalf("err = %v, want daemon not running (no socket at …)", err)
	}
}
