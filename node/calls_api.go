package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// Call defaults.
const (
	defaultCallTimeout = 60 * time.Second
	ndjson             = "application/x-ndjson"
)

// handleRegister serves POST /v1/handlers: the connection becomes a handler
// for the names in the body, and the answer streams the calls it is given
// (NDJSON HandlerEvents) until it disconnects.
func (n *Node) handleRegister(w http.ResponseWriter, r *http.Request) {
	var req api.HandlerRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	if len(req.Names) == 0 {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "names is empty: give the names of the calls to serve")
		return
	}
	for _, name := range req.Names {
		if err := protocol.CheckName(name); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	for _, c := range req.Capabilities {
		if err := checkCapability(c); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	conc := req.Concurrency
	switch {
	case conc == 0:
		conc = defaultHandlerConcurrency
	case conc < 0 || conc > maxHandlerConcurrency:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("concurrency must be 1..%d", maxHandlerConcurrency))
		return
	}
	hc := &handlerConn{
		names:     req.Names,
		caps:      req.Capabilities,
		slots:     make(chan struct{}, conc),
		events:    make(chan api.HandlerEvent, handlerEventBuffer),
		done:      make(chan struct{}),
		cancelled: make(chan struct{}, 1),
	}
	n.handlers.register(hc)
	defer n.handlers.unregister(hc)

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	send := func(ev api.HandlerEvent) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		return enc.Encode(ev) == nil
	}
	flush := func() bool { return bw.Flush() == nil && rc.Flush() == nil }
	if !send(api.HandlerEvent{Type: "ready"}) || !flush() {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case ev := <-hc.events:
			if !send(ev) {
				return
			}
			for len(hc.events) > 0 { // batch what is queued into one flush
				if !send(<-hc.events) {
					return
				}
			}
			if !flush() {
				return
			}
		case <-hc.cancelled:
			for _, id := range hc.takeCancels() {
				if !send(api.HandlerEvent{Type: "cancel", ID: id}) {
					return
				}
			}
			if !flush() {
				return
			}
		case <-tick.C:
			if !send(api.HandlerEvent{Type: "ping"}) || !flush() {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// checkCapability checks a capability an agent describes.
func checkCapability(c api.Capability) error {
	if err := protocol.CheckName(c.Name); err != nil {
		return err
	}
	for _, s := range []json.RawMessage{c.InputSchema, c.OutputSchema} {
		if len(s) > 0 && (!json.Valid(s) || s[0] != '{') {
			return fmt.Errorf("capability %s: a schema must be a JSON object", c.Name)
		}
	}
	if len(c.Description) > 4096 {
		return fmt.Errorf("capability %s: description over 4096 bytes", c.Name)
	}
	return nil
}

// servedCallFor resolves {id} to a call being served here, or answers 404.
func (n *Node) servedCallFor(w http.ResponseWriter, r *http.Request) *servedCall {
	sc := n.handlers.call(r.PathValue("id"))
	if sc == nil {
		writeError(w, http.StatusNotFound, api.CodeUnknownCall, "no call "+r.PathValue("id")+" in flight: it was answered, cancelled or never existed")
	}
	return sc
}

// handleReply serves POST /v1/calls/{id}/reply: the call's answer.
func (n *Node) handleReply(w http.ResponseWriter, r *http.Request) {
	sc := n.servedCallFor(w, r)
	if sc == nil {
		return
	}
	var rep api.Reply
	if !decodeBody(w, r, int64(n.cfg.Limits.MaxSize)+maxSmallBody, &rep) {
		sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler's reply could not be read"))
		return
	}
	if rep.Kind == "" {
		rep.Kind = protocol.FrameFinal
		if rep.Error != nil {
			rep.Kind = protocol.FrameError
		}
	}
	if rep.Kind != protocol.FrameFinal && rep.Kind != protocol.FrameError {
		sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler sent a reply of kind %q", rep.Kind))
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "a reply is final or error; stream deltas with POST /v1/calls/{id}/frames")
		return
	}
	ok, err := n.writeReply(sc, rep)
	n.answerWrite(w, sc, 1, ok, err)
}

// handleFrames serves POST /v1/calls/{id}/frames: a stream call's answer as
// NDJSON Reply lines (delta…, then final or error), forwarded as they are
// read, under the caller's flow control.
func (n *Node) handleFrames(w http.ResponseWriter, r *http.Request) {
	sc := n.servedCallFor(w, r)
	if sc == nil {
		return
	}
	if !sc.c.Request.Stream {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "not a stream call: answer with POST /v1/calls/{id}/reply")
		return
	}
	br := bufio.NewReaderSize(r.Body, 64<<10)
	limit := n.cfg.Limits.MaxSize + maxSmallBody
	frames := 0
	for {
		line, err := readLine(br, limit)
		if err == io.EOF {
			sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler's frames ended without a final frame"))
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "frames ended without a final or error frame; the call failed")
			return
		}
		if err != nil {
			sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler's frames broke off: %v", err))
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
		var rep api.Reply
		if err := json.Unmarshal(line, &rep); err != nil {
			sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler sent a malformed frame"))
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("frame %d: malformed JSON: %v", frames, err))
			return
		}
		var ok bool
		switch rep.Kind {
		case protocol.FrameDelta:
			ok, err = sc.write(false, func(c *call.Call) error {
				if err := c.Delta(rep.Output); err != nil {
					return err
				}
				if br.Buffered() == 0 { // about to wait for the handler: send what we have
					return c.Flush()
				}
				return nil
			})
		case protocol.FrameFinal, protocol.FrameError:
			ok, err = n.writeReply(sc, rep)
			n.answerWrite(w, sc, frames+1, ok, err)
			return
		default:
			sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler sent a frame of unknown kind"))
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("frame %d: kind %q: want delta, final or error", frames, rep.Kind))
			return
		}
		frames++
		if !ok || err != nil {
			n.answerWrite(w, sc, frames, ok, err)
			return
		}
	}
}

// readLine reads one non-empty line of at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	for {
		var line []byte
		for {
			chunk, err := br.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > limit {
				return nil, fmt.Errorf("frame over %d bytes", limit)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && (err != io.EOF || len(line) == 0) {
				return nil, err
			}
			break
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// writeReply writes a final or error frame; the response meta inherits
// the request's.
func (n *Node) writeReply(sc *servedCall, rep api.Reply) (bool, error) {
	return sc.write(true, func(c *call.Call) error {
		if rep.Error != nil || rep.Kind == protocol.FrameError {
			e := protocol.Errorf(protocol.CodeHandlerFailed, "the handler failed")
			if rep.Error != nil {
				if rep.Error.Code != "" {
					e.Code = rep.Error.Code
				}
				e.Message = rep.Error.Message
			}
			return c.Fail(e)
		}
		meta := protocol.Inherit(c.Request.Meta, protocol.StripLocal(rep.Meta), false)
		return c.Final(rep.Output, meta)
	})
}

// answerWrite answers a handler's reply request.
func (n *Node) answerWrite(w http.ResponseWriter, sc *servedCall, frames int, ok bool, err error) {
	switch {
	case !ok:
		writeError(w, http.StatusConflict, api.CodeCancelled, "the call is over (cancelled by the caller, past its deadline, or answered)")
	case err != nil:
		writeError(w, http.StatusConflict, api.CodeCancelled, "the caller is gone: "+err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]int{"frames": frames})
	}
}

// handleInvoke serves POST /v1/invoke: a call to a peer's handler, unary
// (one JSON answer) or streamed (NDJSON frames).
func (n *Node) handleInvoke(w http.ResponseWriter, r *http.Request) {
	var req api.InvokeRequest
	if !decodeBody(w, r, int64(n.cfg.Limits.MaxSize)+maxSmallBody, &req) {
		return
	}
	to, creq, local, timeout, cerr := n.callRequest(req)
	if cerr != nil {
		writeCallError(w, cerr)
		return
	}
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if cerr := n.reach(ctx, to); cerr != nil {
		writeCallError(w, cerr)
		return
	}
	if !req.Stream {
		f, err := n.calls.Invoke(ctx, to, creq)
		if err != nil {
			writeCallError(w, call.ErrorOf(err))
			return
		}
		writeJSON(w, http.StatusOK, api.InvokeResult{Output: orNull(f.Data), Meta: withLocal(f.Meta, local)})
		return
	}
	cs, err := n.calls.Call(ctx, to, creq)
	if err != nil {
		writeCallError(w, call.ErrorOf(err))
		return
	}
	defer cs.Close()
	// The first frame decides the status: a call refused at once (no
	// handler, overloaded, …) is an error answer like a unary call's, not a
	// 200 whose first line is the error.
	first, err := cs.Next()
	if err == nil && first.Kind == protocol.FrameError && first.Error != nil {
		err = first.Error
	}
	if err != nil {
		writeCallError(w, call.ErrorOf(err))
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for f := first; ; {
		out := api.Frame{}
		if err != nil {
			e := call.ErrorOf(err)
			out = api.Frame{Kind: protocol.FrameError, Error: &api.ErrorBody{Code: e.Code, Message: e.Message}}
		} else {
			out = api.Frame{Seq: f.Seq, Kind: f.Kind, Data: f.Data, Meta: f.Meta}
			if f.Kind == protocol.FrameFinal {
				out.Meta = withLocal(f.Meta, local)
			}
			if f.Error != nil {
				out.Error = &api.ErrorBody{Code: f.Error.Code, Message: f.Error.Message}
			}
		}
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if enc.Encode(out) != nil {
			return // the client left: Close cancels the call
		}
		if err != nil || !cs.Buffered() {
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
		if f, err = cs.Next(); err == io.EOF {
			return
		}
	}
}

// callRequest checks an API invoke request and builds the wire request:
// meta inherited from the parent call (trace as a child span), local keys
// kept aside, a trace started when there is none.
func (n *Node) callRequest(req api.InvokeRequest) (peer.ID, protocol.CallRequest, map[string]string, time.Duration, *protocol.CallError) {
	bad := func(format string, args ...any) (peer.ID, protocol.CallRequest, map[string]string, time.Duration, *protocol.CallError) {
		return "", protocol.CallRequest{}, nil, 0, protocol.Errorf(protocol.CodeBadRequest, format, args...)
	}
	to, err := peer.Decode(req.Peer)
	if err != nil {
		return bad("peer: %q is not a peer ID", req.Peer)
	}
	if err := protocol.CheckName(req.Name); err != nil {
		return bad("%v", err)
	}
	if len(req.Input) > 0 && !json.Valid(req.Input) {
		return bad("input is not valid JSON")
	}
	if err := protocol.ValidateMeta(req.Meta); err != nil {
		return bad("%v", err)
	}
	timeout := time.Duration(0)
	if !req.Stream {
		timeout = defaultCallTimeout
	}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 {
			return bad("timeout %q is not a positive duration such as \"30s\"", req.Timeout)
		}
		timeout = d
	}
	var parent map[string]string
	if req.Parent != "" {
		sc := n.handlers.call(req.Parent)
		if sc == nil {
			return "", protocol.CallRequest{}, nil, 0, protocol.Errorf(api.CodeUnknownCall, "parent call %q is not being served here", req.Parent)
		}
		parent = sc.c.Request.Meta
	}
	meta := protocol.Inherit(parent, protocol.StripLocal(req.Meta), true)
	if _, err := protocol.ParseTraceparent(meta[protocol.MetaTraceparent]); err != nil {
		meta = cloneMeta(meta)
		meta[protocol.MetaTraceparent] = protocol.NewTrace().String()
		delete(meta, protocol.MetaTracestate)
	}
	local := make(map[string]string)
	for k, v := range req.Meta {
		if protocol.IsLocalMeta(k) {
			local[k] = v
		}
	}
	return to, protocol.CallRequest{Name: req.Name, Input: req.Input, Meta: meta, Stream: req.Stream}, local, timeout, nil
}

// reach connects to p, failing fast with unreachable.
func (n *Node) reach(ctx context.Context, p peer.ID) *protocol.CallError {
	if p == n.mesh.ID() {
		return protocol.Errorf(protocol.CodeBadRequest, "peer %s is this node", p)
	}
	dctx, cancel := context.WithTimeout(ctx, dialWait)
	defer cancel()
	if err := n.mesh.Dial(dctx, p); err != nil {
		if ctx.Err() != nil {
			return protocol.Errorf(protocol.CodeDeadline, "deadline exceeded reaching %s", p)
		}
		return protocol.Errorf(protocol.CodeUnreachable, "cannot reach %s: %v", p, err)
	}
	return nil
}

// withLocal adds the caller's local meta back to a response's meta.
func withLocal(meta, local map[string]string) map[string]string {
	if len(local) == 0 {
		return meta
	}
	out := cloneMeta(meta)
	for k, v := range local {
		out[k] = v
	}
	return out
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// callStatus maps a call error code to an HTTP status.
func callStatus(code string) int {
	switch code {
	case protocol.CodeBadRequest:
		return http.StatusBadRequest
	case protocol.CodeNoHandler, api.CodeUnknownCall:
		return http.StatusNotFound
	case protocol.CodeUnreachable, protocol.CodeOverloaded:
		return http.StatusServiceUnavailable
	case protocol.CodeDeadline:
		return http.StatusGatewayTimeout
	case protocol.CodeCancelled:
		return http.StatusConflict
	case protocol.CodeInternal:
		return http.StatusInternalServerError
	}
	return http.StatusBadGateway // handler_failed and agents' own codes
}

func writeCallError(w http.ResponseWriter, e *protocol.CallError) {
	writeError(w, callStatus(e.Code), e.Code, e.Message)
}
