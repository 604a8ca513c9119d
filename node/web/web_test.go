package web

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const testToken = "0123456789abcdef0123456789abcdef"

// newTest serves a Server with one Browser route and one Bearer route on
// a real loopback listener.
func newTest(t *testing.T) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ln.Addr(), testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok "+r.URL.Path) })
	s.Handle("/ui/", ok, Browser)
	s.Handle("/metrics", ok, Bearer)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: s}}
	srv.Start()
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func TestGuards(t *testing.T) {
	s, base := newTest(t)
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name   string
		path   string
		header map[string]string
		host   string
		want   int
	}{
		{"no token", "/ui/", nil, "", 401},
		{"wrong bearer", "/metrics", map[string]string{"Authorization": "Bearer nope"}, "", 401},
		{"bearer", "/metrics", map[string]string{"Authorization": "Bearer " + testToken}, "", 200},
		{"bearer on a browser route", "/ui/x", map[string]string{"Authorization": "bearer " + testToken}, "", 200},
		{"cookie", "/ui/", map[string]string{"Cookie": CookieName + "=" + testToken}, "", 200},
		{"wrong cookie", "/ui/", map[string]string{"Cookie": CookieName + "=x"}, "", 401},
		{"token URL sets the cookie", "/ui/?token=" + testToken + "&x=1", nil, "", 200},
		{"wrong token URL", "/ui/?token=nope", nil, "", 401},
		{"token URL on a bearer route", "/metrics?token=" + testToken, nil, "", 401},
		{"rebinding host", "/metrics", map[string]string{"Authorization": "Bearer " + testToken}, "evil.example:" + port, 403},
		{"other port", "/metrics", map[string]string{"Authorization": "Bearer " + testToken}, "127.0.0.1:1", 403},
		{"localhost", "/metrics", map[string]string{"Authorization": "Bearer " + testToken}, "localhost:" + port, 200},
		{"foreign origin", "/metrics", map[string]string{"Authorization": "Bearer " + testToken, "Origin": "http://evil.example"}, "", 403},
		{"own origin", "/metrics", map[string]string{"Authorization": "Bearer " + testToken, "Origin": base}, "", 200},
		{"unmounted", "/nothing", map[string]string{"Authorization": "Bearer " + testToken}, "", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", base+c.path, nil)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
			if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Fatalf("security headers missing: %v", resp.Header)
			}
			if strings.Contains(c.path, "?token="+testToken) && c.want == 200 {
				if ref := resp.Header.Get("Refresh"); ref != "0; url=/ui/?x=1" || !strings.Contains(string(body), `content="0; url=/ui/?x=1"`) {
					t.Fatalf("the page moves on to %q (%s), want the URL without the token", ref, body)
				}
				var set bool
				for _, ck := range resp.Cookies() {
					set = set || ck.Name == CookieName && ck.Value == testToken && ck.HttpOnly
				}
				if !set {
					t.Fatal("no session cookie set")
				}
			}
		})
	}
	if u := s.URL("/ui/"); !strings.Contains(u, "token="+testToken) || !strings.HasPrefix(u, base) {
		t.Fatalf("URL %s", u)
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "short", nil); err == nil {
		t.Fatal("short token accepted")
	}
	if _, err := New(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}, testToken, nil); err == nil {
		t.Fatal("non-loopback address accepted")
	}
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "localhost:8384": true, "[::1]:1": true, "0.0.0.0:80": false, "example.com:1": false, "nope": false} {
		if err := CheckLoopback(addr); (err == nil) != ok {
			t.Fatalf("CheckLoopback(%q) = %v", addr, err)
		}
	}
}
