package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// gatedConn counts the writes that carry a delta and holds them until
// release is closed.
type gatedConn struct {
	net.Conn
	release <-chan struct{}
	deltas  *atomic.Int64
}

func (c gatedConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"kind":"delta"`)) {
		c.deltas.Add(1)
		<-c.release
	}
	return c.Conn.Write(b)
}

// TestServeBatchesDeltas: a handler that makes deltas faster than they
// can be written sends them in a few writes, not one each, and every one
// reaches the daemon in order, the final answer last. The daemon here is
// a fake of its two routes (this tests the client alone); the client's
// first write of a delta is held until the handler has made them all
// (or 5 s passed), so they queue behind it.
func TestServeBatchesDeltas(t *testing.T) {
	const n = 100
	var (
		mu    sync.Mutex
		lines []api.Reply
		got   = make(chan struct{})
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/handlers", func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		enc.Encode(api.HandlerEvent{Type: "ready"})
		enc.Encode(api.HandlerEvent{Type: "call", Call: &api.IncomingCall{ID: "c1", Name: "count", Stream: true}})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /v1/calls/c1/frames", func(w http.ResponseWriter, r *http.Request) {
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			var rep api.Reply
			if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
				t.Errorf("line %q: %v", sc.Bytes(), err)
			}
			mu.Lock()
			lines = append(lines, rep)
			mu.Unlock()
			if rep.Kind == "final" {
				break
			}
		}
		fmt.Fprintln(w, `{"frames":1}`)
		close(got)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	timer := time.AfterFunc(5*time.Second, open)
	defer timer.Stop()
	var deltaWrites atomic.Int64
	c := &client.Client{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		return gatedConn{conn, release, &deltaWrites}, err
	}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- c.Serve(ctx, api.HandlerRequest{Names: []string{"count"}},
			func(ctx context.Context, call api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
				for i := range n {
					if err := send(json.RawMessage(strconv.Itoa(i))); err != nil {
						return nil, nil, err
					}
				}
				open()
				return json.RawMessage(`"done"`), nil, nil
			}, nil)
	}()
	select {
	case <-got:
	case err := <-served:
		t.Fatalf("Serve ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the frames did not arrive")
	}
	cancel()
	<-served

	mu.Lock()
	defer mu.Unlock()
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want %d deltas and a final", len(lines), n)
	}
	for i, l := range lines[:n] {
		if l.Kind != "delta" || string(l.Output) != strconv.Itoa(i) {
			t.Fatalf("line %d = %+v, want delta %d", i, l, i)
		}
	}
	if l := lines[n]; l.Kind != "final" || string(l.Output) != `"done"` {
		t.Errorf("last line = %+v, want the final answer", l)
	}
	if w := deltaWrites.Load(); w > 5 {
		t.Errorf("%d deltas took %d writes, want a few batches", n, w)
	}
}

// TestInvokeStreamFrames: every frame reaches fn as the daemon wrote it,
// whatever its form, and a frame's data stays intact after fn returns (fn
// may keep it) while the client reads on through far more than its read
// buffer. The daemon is a fake of POST /v1/invoke.
func TestInvokeStreamFrames(t *testing.T) {
	const deltas = 2000
	pad := strings.Repeat("x", 100)
	want := []api.Frame{{Seq: 0, Kind: "started"}}
	for i := 1; i <= deltas; i++ {
		want = append(want, api.Frame{Seq: uint64(i), Kind: "delta", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, pad))})
	}
	want = append(want,
		api.Frame{Seq: deltas + 1, Kind: "delta", Data: json.RawMessage(`[2]`)},
		api.Frame{Seq: deltas + 2, Kind: "delta", Data: json.RawMessage(`"three"`), Meta: map[string]string{"k": "v"}},
		api.Frame{Seq: deltas + 3, Kind: "final", Data: json.RawMessage(`4`), Meta: map[string]string{"m": "1"}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i, f := range want {
			if i == deltas+1 { // not as the daemon writes it: the client reads it all the same
				fmt.Fprintf(w, "{ \"seq\": %d, \"kind\": \"delta\", \"data\": [2] }\n", f.Seq)
				continue
			}
			b, _ := json.Marshal(f)
			fmt.Fprintf(w, "%s\n", b)
		}
	}))
	defer srv.Close()
	c := &client.Client{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}}
	var got []api.Frame
	err := c.InvokeStream(t.Context(), api.InvokeRequest{Peer: "p", Name: "n"}, func(f api.Frame) error {
		got = append(got, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || string(g.Data) != string(w.Data) || fmt.Sprint(g.Meta) != fmt.Sprint(w.Meta) {
			t.Fatalf("frame %d = %+v (data %s), want %+v (data %s)", i, g, g.Data, w, w.Data)
		}
	}
}

// TestServeRepliesStream: Serve answers unary calls on one stream of
// answers when the daemon has the route, and with a request each when it
// has not (an older daemon); either way every call is answered, and Serve
// ends when its ctx does. The daemon is a fake of the routes.
func TestServeRepliesStream(t *testing.T) {
	const maxWarmup = 50
	for _, withRoute := range []bool{true, false} {
		t.Run(fmt.Sprintf("route=%v", withRoute), func(t *testing.T) {
			const calls = 5
			var (
				mu        sync.Mutex
				streamed  []string // ids answered on the stream
				requested []string // ids answered with a request each
				up        = make(chan struct{})
				answered  = make(chan struct{}, 2*calls+maxWarmup)
				// by the warm-up calls: one is streamed, or one requested
				warmStreamed = make(chan struct{}, maxWarmup)
				warmReq      = make(chan struct{}, maxWarmup)
				warmup       atomic.Bool
				warm         int // warm-up calls made
			)
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/handlers", func(w http.ResponseWriter, r *http.Request) {
				enc := json.NewEncoder(w)
				enc.Encode(api.HandlerEvent{Type: "ready"})
				w.(http.Flusher).Flush()
				call := func(i int) {
					enc.Encode(api.HandlerEvent{Type: "call", Call: &api.IncomingCall{ID: fmt.Sprintf("c%d", i), Name: "echo", Input: json.RawMessage(strconv.Itoa(i))}})
					w.(http.Flusher).Flush()
				}
				if withRoute {
					// The daemon has answered the stream's request, but the
					// client answers by request until it has read that
					// answer: warm-up calls, one at a time, until one comes
					// on the stream. From then on every one must.
					<-up
					warmup.Store(true)
				warming:
					for warm < maxWarmup {
						call(100 + warm)
						warm++
						select {
						case <-warmStreamed:
							break warming
						case <-warmReq:
						case <-time.After(10 * time.Second):
							t.Error("a warm-up call not answered")
							return
						}
					}
					warmup.Store(false)
				}
				for i := range calls {
					call(i)
				}
				<-r.Context().Done()
			})
			if withRoute {
				mux.HandleFunc("POST /v1/calls/replies", func(w http.ResponseWriter, r *http.Request) {
					if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
						t.Error(err)
						return
					}
					w.WriteHeader(200)
					w.(http.Flusher).Flush()
					close(up)
					sc := bufio.NewScanner(r.Body)
					for sc.Scan() {
						var l struct {
							ID     string          `json:"id"`
							Output json.RawMessage `json:"output"`
						}
						if err := json.Unmarshal(sc.Bytes(), &l); err != nil || fmt.Sprintf("c%s", l.Output) != l.ID {
							t.Errorf("line %s: %v", sc.Bytes(), err)
						}
						if warmup.Load() {
							warmStreamed <- struct{}{}
							continue
						}
						mu.Lock()
						streamed = append(streamed, l.ID)
						mu.Unlock()
						answered <- struct{}{}
					}
				})
			}
			mux.HandleFunc("POST /v1/calls/{id}/reply", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, `{"frames":1}`)
				if warmup.Load() {
					warmReq <- struct{}{}
					return
				}
				mu.Lock()
				requested = append(requested, r.PathValue("id"))
				mu.Unlock()
				answered <- struct{}{}
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c := &client.Client{Dial: func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
			}}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			served := make(chan error, 1)
			go func() {
				served <- c.Serve(ctx, api.HandlerRequest{Names: []string{"echo"}},
					func(ctx context.Context, call api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
						return call.Input, nil, nil
					}, nil)
			}()
			for range calls {
				select {
				case <-answered:
				case err := <-served:
					t.Fatalf("Serve ended: %v", err)
				case <-time.After(10 * time.Second):
					t.Fatal("calls not answered")
				}
			}
			cancel()
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not end with its ctx")
			}
			mu.Lock()
			defer mu.Unlock()
			if withRoute && (len(streamed) != calls || len(requested) != 0) {
				t.Fatalf("%d answers streamed and %d requested after %d warm-up calls, want all %d streamed", len(streamed), len(requested), warm, calls)
			}
			if !withRoute && len(requested) != calls {
				t.Fatalf("%d answers requested, want all %d", len(requested), calls)
			}
		})
	}
}
