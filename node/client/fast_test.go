package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// sendServer is a fake daemon of the send route on a Unix socket: it
// answers each send with a message whose content is the request's, and
// counts the requests and connections it took.
type sendServer struct {
	path     string
	srv      *http.Server
	requests atomic.Int64
	conns    atomic.Int64
	handle   func(w http.ResponseWriter, r *http.Request) bool // true: answered
}

func newSendServer(t *testing.T) *sendServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "wfast") // short: a socket path is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &sendServer{path: filepath.Join(dir, "s.sock")}
	s.start(t)
	return s
}

func (s *sendServer) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/spaces/{space}/messages", func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.handle != nil && s.handle(w, r) {
			return
		}
		var req api.SendRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.Message{ID: "id-" + r.PathValue("space"), Type: req.Type, Content: req.Content})
	})
	s.srv = &http.Server{Handler: mux, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
}

// TestSendFastReusesConnections: sends one after another take one
// connection, and each answer is the daemon's.
func TestSendFastReusesConnections(t *testing.T) {
	s := newSendServer(t)
	c := &client.Client{Socket: s.path}
	for i := range 50 {
		m, err := c.Send(t.Context(), "a b/c", api.SendRequest{Content: json.RawMessage(`{"n":1}`), Type: "t"})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if m.ID != "id-a b/c" || m.Type != "t" || string(m.Content) != `{"n":1}` {
			t.Fatalf("send %d: answer %+v", i, m)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("50 sends took %d connections, want 1", n)
	}
}

// TestSendFastAfterDaemonClosed: a connection the daemon closed while it
// was idle (a restart, its idle timeout) is not used again: the next send
// succeeds on a new one, and reaches the daemon once.
func TestSendFastAfterDaemonClosed(t *testing.T) {
	s := newSendServer(t)
	c := &client.Client{Socket: s.path}
	send := func() {
		t.Helper()
		if _, err := c.Send(t.Context(), "s", api.SendRequest{Content: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	send()
	s.srv.Close() // closes the idle connection
	os.Remove(s.path)
	s.start(t)
	before := s.requests.Load()
	send()
	if n := s.requests.Load() - before; n != 1 {
		t.Fatalf("the send reached the daemon %d times", n)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestSendFastErrors: an error answer is an *Error with its code, and a
// daemon that is not there is ErrNotRunning.
func TestSendFastErrors(t *testing.T) {
	s := newSendServer(t)
	s.handle = func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"unknown_space","message":"unknown space \"x\": join it first"}}`)
		return true
	}
	c := &client.Client{Socket: s.path}
	for range 2 { // on a new connection, then on the one kept
		_, err := c.Send(t.Context(), "x", api.SendRequest{Content: json.RawMessage(`{}`)})
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 404 || e.Code != "unknown_space" || e.Message != `unknown space "x": join it first` {
			t.Fatalf("got %v (%#v)", err, err)
		}
	}
	s.srv.Close()
	os.Remove(s.path)
	if _, err := c.Send(t.Context(), "x", api.SendRequest{Content: json.RawMessage(`{}`)}); !errors.Is(err, client.ErrNotRunning) {
		t.Fatalf("no daemon: got %v", err)
	}
}

// TestSendFastCancel: a send whose ctx ends while the daemon is slow
// returns the ctx's error at once, and the next send works.
func TestSendFastCancel(t *testing.T) {
	s := newSendServer(t)
	release := make(chan struct{})
	var once sync.Once
	s.handle = func(w http.ResponseWriter, r *http.Request) bool {
		hold := false
		once.Do(func() { hold = true })
		if hold {
			<-release
		}
		return false
	}
	defer close(release)
	c := &client.Client{Socket: s.path}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Send(ctx, "s", api.SendRequest{Content: json.RawMessage(`{}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v", d)
	}
	if _, err := c.Send(t.Context(), "s", api.SendRequest{Content: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSend sends through the fast path and through net/http's (a
// Client with Dial takes net/http's) to a fake daemon in the same process.
func BenchmarkSend(b *testing.B) {
	dir, err := os.MkdirTemp("", "wfast")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"id":"x","v":1,"space":"s","from":"f","created_at":"2026-11-26T00:00:00Z","type":"text","content":{"text":"hi"},"sig":"c2ln","cursor":"1"}` + "\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(answer)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	for _, c := range []struct {
		name string
		c    *client.Client
	}{
		{"fast", &client.Client{Socket: path}},
		{"nethttp", &client.Client{Socket: path, Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.c.Send(context.Background(), "s", api.SendRequest{Content: json.RawMessage(`{"text":"hi"}`)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
