// Package web is the daemon's loopback HTTP listener: the one place where
// the daemon serves what a browser or a local HTTP-only tool must reach
// (a Unix socket is out of their reach): the web view, metrics, pprof, the
// A2A endpoints. Other packages mount their handlers on it.
//
// It is protected the way Syncthing's GUI and Tailscale's web client
// protect theirs:
//   - it listens on loopback only;
//   - every request must carry the daemon's token, which only the local
//     user can read (<home>/web.token, mode 0600): as a session cookie set
//     by opening the URL that carries it (Browser routes), or as
//     "Authorization: Bearer TOKEN" (any route);
//   - the Host header must name the listener (127.0.0.1:PORT,
//     localhost:PORT or [::1]:PORT), so a DNS-rebinding page cannot reach
//     it under a name of its own;
//   - a request with an Origin must come from the listener's own origin;
//   - every answer carries a strict Content-Security-Policy,
//     X-Frame-Options: DENY, nosniff and no-referrer.
package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// TokenFile is the file in the daemon's home that holds the listener's
// token (mode 0600), rewritten at every start.
const TokenFile = "web.token"

// CookieName is the session cookie a browser gets from the token URL.
const CookieName = "weft_session"

// TokenParam is the query parameter of the URL that sets the cookie.
const TokenParam = "token"

// Auth says how a mounted handler's requests prove they come from the
// local user.
type Auth int

const (
	// Bearer routes take only "Authorization: Bearer TOKEN" (or the
	// session cookie): for programs (metrics scrapers, A2A clients).
	Bearer Auth = iota
	// Browser routes also take the token once in the URL (?token=…): the
	// answer sets the session cookie and moves on to the same URL without
	// it, so the token leaves the address bar and the history.
	Browser
)

// Server is the loopback listener's handler. Mount handlers with Handle
// before serving; it is an http.Handler.
type Server struct {
	log   *slog.Logger
	token []byte
	port  string

	mu  sync.Mutex
	mux *http.ServeMux
}

// NewToken returns a new random token.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// CheckLoopback reports whether addr (host:port) names a loopback host.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: only loopback addresses (127.0.0.1, [::1], localhost) are allowed", addr)
	}
	return nil
}

// New returns the handler of a listener at addr (the listener's actual
// address, with its port) that admits token.
func New(addr net.Addr, token string, log *slog.Logger) (*Server, error) {
	if len(token) < 16 {
		return nil, errors.New("web: token shorter than 16 characters")
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return nil, fmt.Errorf("web: %s is not a loopback TCP address", addr)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{log: log, token: []byte(token), port: fmt.Sprint(ta.Port), mux: http.NewServeMux()}, nil
}

// Handle mounts h at pattern (http.ServeMux syntax) behind auth.
func (s *Server) Handle(pattern string, h http.Handler, auth Auth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mux.Handle(pattern, s.guard(h, auth))
}

// URL returns the listener's URL of path with the token in it: the
// address a person opens (Browser routes).
func (s *Server) URL(path string) string {
	u := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", s.port), Path: path}
	u.RawQuery = url.Values{TokenParam: {string(s.token)}}.Encode()
	return u.String()
}

// BaseURL returns the listener's URL without a token.
func (s *Server) BaseURL() string { return "http://" + net.JoinHostPort("127.0.0.1", s.port) }

// ServeHTTP checks the Host and Origin of every request and sets the
// security headers, then serves the mounted routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !s.hostOK(r.Host) {
		s.log.Debug("web: refused a foreign Host", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "forbidden: this listener answers only to 127.0.0.1, localhost or [::1] on its own port", http.StatusForbidden)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originOK(o) {
		s.log.Debug("web: refused a foreign Origin", "origin", o, "remote", r.RemoteAddr)
		http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	mux := s.mux
	s.mu.Unlock()
	mux.ServeHTTP(w, r)
}

// hostOK reports whether host (a Host header) names this listener.
func (s *Server) hostOK(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil || port != s.port {
		return false
	}
	switch name {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}

// originOK reports whether origin is this listener's own.
func (s *Server) originOK(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.Path != "" && u.Path != "/" {
		return false
	}
	return s.hostOK(u.Host)
}

// guard lets through requests that carry the token.
func (s *Server) guard(h http.Handler, auth Auth) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth == Browser && r.Method == http.MethodGet && r.URL.Query().Has(TokenParam) {
			if !s.tokenOK(r.URL.Query().Get(TokenParam)) {
				s.refuse(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: string(s.token), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del(TokenParam)
			u := *r.URL
			u.RawQuery = q.Encode()
			moveOn(w, u.RequestURI())
			return
		}
		if !s.authorized(r) {
			s.refuse(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// moveOn answers the token URL with a page that goes on to clean (the
// same URL without the token) by itself. Not with a redirect: the session
// cookie is SameSite=Strict, so the browser sends it only on navigations
// this site starts, and a redirect keeps the initiator of the token URL's
// navigation (a local file, a chat, another page), which would make the
// page arrive without the cookie. The page's refresh is a navigation of
// this site's own, and replaces the token URL in the history.
func moveOn(w http.ResponseWriter, clean string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Refresh", "0; url="+clean)
	w.WriteHeader(http.StatusOK)
	e := html.EscapeString(clean)
	fmt.Fprintf(w, "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; url=%s\"><title>weft</title><a href=\"%s\">continue</a>\n", e, e)
}

// authorized reports whether r carries the token as a bearer token or as
// the session cookie.
func (s *Server) authorized(r *http.Request) bool {
	if scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return s.tokenOK(strings.TrimSpace(got))
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return s.tokenOK(c.Value)
	}
	return false
}

func (s *Server) tokenOK(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), s.token) == 1
}

func (s *Server) refuse(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="weft"`)
	http.Error(w, "unauthorized: open the URL `weft ui` prints, or send Authorization: Bearer <the token in "+TokenFile+" in the daemon's home>", http.StatusUnauthorized)
}
