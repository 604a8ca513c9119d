package webui_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weftmesh/weft/node/web"
	"github.com/weftmesh/weft/node/webui"
)

// TestMount: the page, its files and the API are served behind the token;
// the API sees its own paths (/v1/…) and only those; the page's URL with
// the token sets the cookie the page's requests then carry.
func TestMount(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := web.New(ln.Addr(), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	webui.Mount(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "api "+r.Method+" "+r.URL.Path)
	}))
	srv := httptest.NewUnstartedServer(s)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	base := s.BaseURL()

	get := func(method, path, cookie, origin string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if site, ok := strings.CutPrefix(origin, "site:"); ok {
			req.Header.Set("Sec-Fetch-Site", site)
			origin = ""
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: web.CookieName, Value: cookie})
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		method, path, cookie, origin string
		status                       int
		body                         string
	}{
		{"GET", "/", token, "", 200, `<script src="/ui/app.js"`},
		{"GET", "/ui/app.js", token, "", 200, "EventSource"},
		{"GET", "/ui/app.css", token, "", 200, "--accent"},
		{"GET", "/api/v1/node", token, "", 200, "api GET /v1/node"},
		{"POST", "/api/v1/spaces", token, base, 200, "api POST /v1/spaces"},
		{"GET", "/api/mcp", token, "", 404, ""},
		{"GET", "/", "", "", 401, ""},
		{"GET", "/ui/app.js", "", "", 401, ""},
		{"GET", "/api/v1/node", "", "", 401, ""},
		{"GET", "/api/v1/node", "wrong", "", 401, ""},
		{"POST", "/api/v1/spaces", token, "http://127.0.0.1:1", 403, ""},
		{"POST", "/api/v1/spaces", token, "null", 403, ""},
		// What a browser says of who made the request.
		{"GET", "/api/v1/node", token, "site:same-origin", 200, "api GET /v1/node"},
		{"GET", "/api/v1/node", token, "site:same-site", 403, ""},
		{"GET", "/api/v1/node", token, "site:cross-site", 403, ""},
		{"GET", "/ui/app.js", token, "site:cross-site", 403, ""},
		{"GET", "/", token, "site:none", 200, "app.js"},
	} {
		status, body := get(c.method, c.path, c.cookie, c.origin)
		if status != c.status || !strings.Contains(body, c.body) {
			t.Errorf("%s %s (cookie %q, origin %q): %d %.80q, want %d with %q", c.method, c.path, c.cookie, c.origin, status, body, c.status, c.body)
		}
	}
	// The URL with the token sets the cookie and moves on without the token.
	resp, err := http.DefaultTransport.RoundTrip(must(http.NewRequest("GET", s.URL(webui.Page), nil)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Refresh") != "0; url=/" || len(resp.Cookies()) != 1 || resp.Cookies()[0].Value != token {
		t.Fatalf("token URL: %d, refresh %q, cookies %v", resp.StatusCode, resp.Header.Get("Refresh"), resp.Cookies())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
