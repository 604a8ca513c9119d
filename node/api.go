package node

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	weftmcp "github.com/weftmesh/weft/node/mcp"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// Bounds of the local API.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
	maxSmallBody    = 64 << 10 // bodies other than a message send
	maxSpaceName    = 128
)

// Handler returns the local API: JSON over HTTP under /v1.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node", n.handleNode)
	mux.HandleFunc("GET /v1/peers", n.handlePeers)
	mux.HandleFunc("POST /v1/peers", n.handleConnect)
	mux.HandleFunc("GET /v1/spaces", n.handleSpaces)
	mux.HandleFunc("POST /v1/spaces", n.handleJoin)
	mux.HandleFunc("DELETE /v1/spaces/{space}", n.handleLeave)
	mux.HandleFunc("GET /v1/spaces/{space}", n.handleSpace)
	mux.HandleFunc("POST /v1/spaces/{space}/messages", n.handleSend)
	mux.HandleFunc("GET /v1/spaces/{space}/messages", n.handleRead)
	mux.HandleFunc("GET /v1/spaces/{space}/events", n.handleEvents)
	mux.HandleFunc("GET /v1/messages/{id}", n.handleMessage)
	mux.HandleFunc("GET /v1/messages/{id}/thread", n.handleThread)
	mux.HandleFunc("POST /v1/dm", n.handleDM)
	mux.HandleFunc("POST /v1/dm/iacp", n.handleDMIACP)
	mux.HandleFunc("GET /v1/messages/{id}/iacp", n.handleMessageIACP)
	mux.HandleFunc("GET /v1/inbox", n.handleInbox)
	mux.HandleFunc("GET /v1/inbox/events", n.handleInboxEvents)
	mux.HandleFunc("GET /v1/outbox", n.handleOutbox)
	mux.HandleFunc("GET /v1/deadletters", n.handleDeadLetters)
	mux.HandleFunc("DELETE /v1/deadletters/{id}", n.handleDeleteDeadLetter)
	mux.HandleFunc("POST /v1/handlers", n.handleRegister)
	mux.HandleFunc("POST /v1/calls/{id}/reply", n.handleReply)
	mux.HandleFunc("POST /v1/calls/{id}/frames", n.handleFrames)
	mux.HandleFunc("POST /v1/invoke", n.handleInvoke)
	mux.HandleFunc("GET /v1/card", n.handleCard)
	mux.HandleFunc("PUT /v1/card", n.handleSetCard)
	mux.HandleFunc("GET /v1/peers/{peer}/card", n.handlePeerCard)
	mux.HandleFunc("GET /v1/peers/{peer}/health", n.handlePeerHealth)
	mux.HandleFunc("GET /v1/discover", n.handleDiscover)
	mux.Handle(weftmcp.Path, n.mcpHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if knownPath(mux, r) {
			writeError(w, http.StatusMethodNotAllowed, api.CodeMethod, r.Method+" is not supported on "+r.URL.Path)
			return
		}
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no route "+r.Method+" "+r.URL.Path)
	})
	return refuseBrowsers(mux)
}

// refuseBrowsers turns away requests a web page could make: a browser sets
// Origin or Referer, a local agent does not.
func refuseBrowsers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
			writeError(w, http.StatusForbidden, api.CodeForbidden, "requests from browsers (Origin or Referer set) are refused")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// knownPath reports whether r's path has a route for another method. It
// runs only in the catch-all route, so matched requests pay nothing for it.
func knownPath(mux *http.ServeMux, r *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := mux.Handler(probe); p != "" && p != "/" {
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

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: code, Message: msg}})
}

// writeProtocolError answers a validation failure of a message.
func writeProtocolError(w http.ResponseWriter, err error) {
	status := http.StatusUnprocessableEntity
	if errors.Is(err, protocol.ErrTooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	writeError(w, status, protocol.Code(err), err.Error())
}

// decodeBody reads one JSON value of at most limit bytes into v.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
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
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("request body over %d bytes", limit))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "empty request body: want a JSON object")
	default:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "malformed JSON: "+err.Error())
	}
	return false
}

// checkSpaceName reports whether name can name a space.
func checkSpaceName(name string) error {
	switch {
	case name == "":
		return errors.New("space name is empty")
	case len(name) > maxSpaceName:
		return fmt.Errorf("space name is over %d bytes", maxSpaceName)
	case strings.ContainsAny(name, "/\\") || strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return errors.New("space name must not contain '/', '\\' or control characters")
	}
	return nil
}

// space resolves the {space} path value (a joined space's name or ID) or
// answers 404.
func (n *Node) space(w http.ResponseWriter, r *http.Request) (store.Space, bool) {
	s := r.PathValue("space")
	if id, err := protocol.ParseID(s); err == nil {
		if sp, err := n.store.Space(id); err == nil {
			return sp, true
		}
	}
	sp, err := n.store.Space(protocol.SpaceID(s))
	switch {
	case err == nil:
		return sp, true
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeUnknownSpace, fmt.Sprintf("unknown space %q: join it first", s))
	default:
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
	}
	return store.Space{}, false
}

// apiMessage shows a stored message.
func apiMessage(m *protocol.Message, cur store.Cursor) api.Message {
	out := api.Message{
		ID:        m.ID.String(),
		V:         m.V,
		Space:     m.Space.String(),
		From:      m.From,
		CreatedAt: m.Created().UTC(),
		Type:      m.Type,
		TTL:       m.TTL,
		Meta:      m.Meta,
		Content:   m.Content,
		Sig:       base64.StdEncoding.EncodeToString(m.Sig),
		Cursor:    cur.String(),
	}
	for _, p := range m.Prev {
		out.Prev = append(out.Prev, p.String())
	}
	if !m.Refs.IsZero() {
		out.Refs = &api.Refs{Nodes: m.Refs.Nodes}
		for _, id := range m.Refs.Messages {
			out.Refs.Messages = append(out.Refs.Messages, id.String())
		}
	}
	return out
}

// entryMessage decodes a stored entry for the API.
func (n *Node) entryMessage(e store.Entry) (api.Message, error) {
	m, err := protocol.Decode(e.Raw, protocol.DefaultLimits())
	if err != nil {
		return api.Message{}, fmt.Errorf("stored message %s: %w", e.ID, err)
	}
	return apiMessage(m, e.Cursor), nil
}

// marshal is json.Marshal without HTML escaping: agents' JSON stays as it
// was signed.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeSendError answers a failed send: a request the daemon cannot turn
// into a message (badRequest) with badStatus and badCode, a message that
// fails validation with its protocol code, anything else with 503.
func writeSendError(w http.ResponseWriter, err error, badStatus int, badCode string) {
	var bad badRequest
	switch {
	case errors.As(err, &bad):
		writeError(w, badStatus, badCode, err.Error())
	case protocol.IsInvalid(err):
		writeProtocolError(w, err)
	default:
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
	}
}
