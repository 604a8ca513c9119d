// Package localapi is the daemon's local API: JSON over HTTP under /v1,
// served on the Unix socket by node/daemon. It turns requests into calls
// of the backend (node.Node, or any Backend) and the backend's typed
// errors into answers, through one table from code to status (statusOf).
// It holds no state of its own; it can be tested against a fake backend
// with no libp2p or Badger.
package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// Bounds of the local API.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
	maxSmallBody    = 64 << 10 // bodies other than a message
)

// Backend is what the API serves: *node.Node's methods (through
// FromNode), or a fake in tests. Errors are *node.Error,
// *protocol.CallError, protocol's validation errors, or failures of the
// node itself.
type Backend interface {
	Config() node.Config
	Info() node.Info
	Status() (node.Status, error)
	Peers() []mesh.PeerInfo
	Connect(ctx context.Context, addr ma.Multiaddr) (peer.ID, error)

	Spaces() ([]node.Space, error)
	Space(ref string) (node.Space, error)
	SpaceID(ref string) (protocol.ID, error)
	Join(name string, keep *store.Retention) (node.Space, bool, error)
	SetSpaceLimits(ref string, l store.SpaceLimits) (node.Space, error)
	Leave(ctx context.Context, ref string) error
	Send(ctx context.Context, space protocol.ID, p node.Post) (node.Message, error)
	ReadWithin(space protocol.ID, after store.Cursor, limit, maxBytes int) ([]node.Message, store.Cursor, bool, error)
	ReadTail(space protocol.ID, t store.Tail, limit, maxBytes int) ([]node.Message, store.Tail, bool, error)
	End(space protocol.ID) (store.Cursor, error)
	Changed(space protocol.ID) <-chan struct{}
	Get(id protocol.ID) (node.Message, error)
	Thread(id protocol.ID, up bool, depth int) (node.Thread, error)

	Inbox() protocol.ID
	DM(ctx context.Context, dm node.DM) (node.Sent, error)
	DMIACP(ctx context.Context, envelope []byte) (node.Sent, error)
	ExportIACP(id protocol.ID) ([]byte, error)
	Outbox(to string, limit int) ([]store.Outgoing, error)
	DeadLetters(after store.Cursor, limit int) ([]store.DeadLetter, store.Cursor, error)
	Sent(after store.Cursor, limit int) ([]store.SentMessage, store.Cursor, error)
	DeleteDeadLetter(id protocol.ID) error
	CancelOutgoing(id protocol.ID) error

	RegisterHandler(spec node.HandlerSpec) (Handler, error)
	CallIsStream(id string) (bool, error)
	// Delta and Finish use data (r.Output) before they return, and do not
	// keep it: it may be the request's read buffer.
	Delta(id string, data json.RawMessage, flush bool) error
	Finish(id string, r node.Reply) error
	FailCall(id, msg string)
	Invoke(ctx context.Context, inv node.Invocation) (node.Result, error)
	StreamInvoke(ctx context.Context, inv node.Invocation) (CallStream, error)
	InvokeAny(ctx context.Context, inv node.Invocation) (node.Result, node.AnyResult, error)
	StreamInvokeAny(ctx context.Context, inv node.Invocation) (CallStream, node.AnyResult, error)

	Trust(p peer.ID, name string) (policy.Trusted, bool, error)
	Untrust(p peer.ID) (bool, error)
	Trusted() []policy.Trusted
	DMPolicy() policy.DMConfig

	Card() protocol.Card
	SetCard(u node.CardUpdate) (protocol.Card, error)
	PeerCard(ctx context.Context, p peer.ID) (protocol.Card, error)
	PeerHealth(ctx context.Context, p peer.ID) (protocol.Health, time.Duration, error)
	Discover(ctx context.Context, capability string, limit int) ([]agent.Provider, error)

	Serving() node.Serving
	CreatePrivate(ctx context.Context, name string, sealed bool) (node.Space, error)
	Invite(ref string, o node.InviteOptions) (member.Invite, string, error)
	JoinInvite(ctx context.Context, token string) (node.Space, error)
	Members(ref string) (node.Space, []node.Member, error)
	Remove(ctx context.Context, ref string, p peer.ID) (node.Message, error)
}

// Handler is a registered handler (*node.Handler).
type Handler interface {
	Allow() []string
	Calls() <-chan node.IncomingCall
	Cancelled() <-chan struct{}
	TakeCancels() []string
	Close()
}

// CallStream is the answer of a stream call (*node.CallStream).
type CallStream interface {
	Next() (protocol.CallFrame, error)
	Buffered() bool
	Close() error
}

// API serves the local API of one backend.
type API struct {
	b           Backend
	mux         *http.ServeMux
	maxBody     int64 // a body carrying a message
	bodyTimeout time.Duration
	webURL      func() string                                   // the web listener's base URL, or ""
	metrics     http.Handler                                    // GET /v1/metrics, when set
	observe     func(route string, status int, d time.Duration) // told of every request, when set
	h           http.Handler                                    // mux behind RefuseBrowsers and BoundBodies
}

// Option configures an API.
type Option func(*API)

// WithBodyTimeout bounds how long a client may take to send a request body
// (default DefaultBodyTimeout; 0: no bound): see BoundBodies. The frames
// of a stream call may take as long as the call lasts.
func WithBodyTimeout(d time.Duration) Option { return func(a *API) { a.bodyTimeout = d } }

// WithWebURL makes GET /v1/node tell the base URL of the daemon's
// loopback web listener, as url returns it when asked ("" for none), so
// that `weft ui` can find it.
func WithWebURL(url func() string) Option { return func(a *API) { a.webURL = url } }

// WithMetrics serves h (a Prometheus handler) at GET /v1/metrics.
func WithMetrics(h http.Handler) Option { return func(a *API) { a.metrics = h } }

// WithObserver has f told of every request when it is answered (a stream
// when it ends): route is the pattern it matched ("GET /v1/node"), or
// "other" when it matched none; status is the answer's HTTP status.
func WithObserver(f func(route string, status int, d time.Duration)) Option {
	return func(a *API) { a.observe = f }
}

// New returns the API of b; mcp, if not nil, is served at mcpPath.
func New(b Backend, mcpPath string, mcp http.Handler, opts ...Option) *API {
	a := &API{b: b, mux: http.NewServeMux(), maxBody: int64(b.Config().Limits.MaxSize) + maxSmallBody, bodyTimeout: DefaultBodyTimeout}
	for _, o := range opts {
		o(a)
	}
	routes := []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET /v1/node", a.node},
		{"GET /v1/status", a.status},
		{"GET /v1/peers", a.peers},
		{"POST /v1/peers", a.connect},
		{"GET /v1/spaces", a.spaces},
		{"POST /v1/spaces", a.join},
		{"DELETE /v1/spaces/{space}", a.leave},
		{"GET /v1/spaces/{space}", a.space},
		{"POST /v1/spaces/{space}/messages", a.send},
		{"GET /v1/spaces/{space}/messages", a.read},
		{"GET /v1/spaces/{space}/events", a.events},
		{"GET /v1/messages/{id}", a.message},
		{"GET /v1/messages/{id}/thread", a.thread},
		{"POST /v1/dm", a.dm},
		{"POST /v1/dm/iacp", a.dmIACP},
		{"GET /v1/messages/{id}/iacp", a.messageIACP},
		{"GET /v1/inbox", a.inbox},
		{"GET /v1/inbox/events", a.inboxEvents},
		{"GET /v1/outbox", a.outbox},
		{"DELETE /v1/outbox/{id}", a.cancelOutgoing},
		{"GET /v1/deadletters", a.deadLetters},
		{"GET /v1/sent", a.sent},
		{"DELETE /v1/deadletters/{id}", a.deleteDeadLetter},
		{"POST /v1/handlers", a.register},
		{"GET /v1/calls", a.callsInFlight},
		{"POST /v1/calls/{id}/reply", a.reply},
		{"POST /v1/calls/replies", a.replies},
		{"POST /v1/calls/{id}/frames", a.frames},
		{"POST /v1/invoke", a.invoke},
		{"GET /v1/trust", a.trustList},
		{"POST /v1/trust", a.trust},
		{"DELETE /v1/trust/{peer}", a.untrust},
		{"GET /v1/card", a.card},
		{"PUT /v1/card", a.setCard},
		{"GET /v1/peers/{peer}/card", a.peerCard},
		{"GET /v1/peers/{peer}/health", a.peerHealth},
		{"GET /v1/discover", a.discover},
		{"POST /v1/private", a.createPrivate},
		{"POST /v1/join", a.joinInvite},
		{"POST /v1/spaces/{space}/invites", a.invite},
		{"GET /v1/spaces/{space}/members", a.members},
		{"DELETE /v1/spaces/{space}/members/{peer}", a.removeMember},
	}
	for _, r := range routes {
		a.mux.HandleFunc(r.pattern, r.h)
	}
	if mcp != nil {
		a.mux.Handle(mcpPath, mcp)
	}
	if a.metrics != nil {
		a.mux.Handle("GET /v1/metrics", a.metrics)
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if a.knownPath(r) {
			writeError(w, api.CodeMethod, r.Method+" is not supported on "+r.URL.Path)
			return
		}
		writeError(w, api.CodeNotFound, "no route "+r.Method+" "+r.URL.Path)
	})
	a.h = BoundBodies(a.bodyTimeout, RefuseBrowsers(a.mux))
	return a
}

// ServeHTTP serves the API. Requests a web page could make (a browser
// sets Origin or Referer, a local agent does not) are refused; request
// bodies are bounded in time (WithBodyTimeout).
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := a.h
	if a.observe == nil {
		h.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	h.ServeHTTP(sw, r)
	route := r.Pattern // set by the mux on r itself
	if route == "" || route == "/" {
		route = "other"
	}
	a.observe(route, sw.status(), time.Since(start))
}

// statusWriter remembers the status of an answer. It unwraps to the
// ResponseWriter it wraps (http.ResponseController) and flushes.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// ForBrowsers returns the API without the refusal of requests that carry
// Origin or Referer and without the bound on bodies: for a listener that
// checks the Origin of every request itself, admits only requests that
// carry its token, and bounds bodies (node/web with BoundBodies), where
// the web view uses the same API as every other client.
func (a *API) ForBrowsers() http.Handler { return a.mux }

// RefuseBrowsers turns away requests that carry Origin or Referer.
func RefuseBrowsers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
			writeError(w, api.CodeForbidden, "requests from browsers (Origin or Referer set) are refused")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// WriteError answers with an API error of code and msg, at the status the
// API gives that code.
func WriteError(w http.ResponseWriter, code, msg string) { writeError(w, code, msg) }

// knownPath reports whether r's path has a route for another method. It
// runs only in the catch-all route, so matched requests pay nothing for it.
func (a *API) knownPath(r *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := a.mux.Handler(probe); p != "" && p != "/" {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // agents' JSON is shown as it was signed
	_ = enc.Encode(v)
}

// decodeBody reads one JSON value of at most limit bytes into v, or
// answers 400 or 413.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	return decodeFrom(w, http.MaxBytesReader(w, r.Body, limit), limit, v)
}

// decodeFrom is decodeBody of a body read through rd.
func decodeFrom(w http.ResponseWriter, rd io.Reader, limit int64, v any) bool {
	dec := json.NewDecoder(rd)
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		writeError(w, api.CodeTooLarge, fmt.Sprintf("request body over %d bytes", limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, api.CodeBadRequest, "the request body did not arrive in time")
	case errors.Is(err, io.EOF):
		writeError(w, api.CodeBadRequest, "empty request body: want a JSON object")
	default:
		writeError(w, api.CodeBadRequest, "malformed JSON: "+err.Error())
	}
	return false
}

// pathID reads the {id} path value as a message ID, or answers 400.
func pathID(w http.ResponseWriter, r *http.Request) (protocol.ID, bool) {
	id, err := protocol.ParseID(r.PathValue("id"))
	if err != nil {
		writeError(w, api.CodeBadID, err.Error())
		return protocol.ID{}, false
	}
	return id, true
}

// pathPeer reads the {peer} path value, or answers 400.
func pathPeer(w http.ResponseWriter, r *http.Request) (peer.ID, bool) {
	p, err := peer.Decode(r.PathValue("peer"))
	if err != nil {
		writeError(w, api.CodeBadPeer, strconv.Quote(r.PathValue("peer"))+" is not a peer ID")
		return "", false
	}
	return p, true
}

// parsePeer reads a peer ID from a body field.
func parsePeer(field, s string) (peer.ID, error) {
	p, err := peer.Decode(s)
	if err != nil {
		return "", &node.Error{Code: api.CodeBadPeer, Msg: fmt.Sprintf("%s: %q is not a peer ID", field, s)}
	}
	return p, nil
}

// pageLimit reads ?limit= (default defaultPageSize).
func pageLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return defaultPageSize, true
	}
	limit, err := strconv.Atoi(s)
	if err != nil || limit < 1 || limit > maxPageSize {
		writeError(w, api.CodeBadRequest, "limit must be 1.."+strconv.Itoa(maxPageSize))
		return 0, false
	}
	return limit, true
}
