package node

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/jsonvalid"
)

// Call defaults.
const (
	// DefaultCallTimeout bounds a unary call that sets no timeout.
	DefaultCallTimeout = 60 * time.Second
	// MaxHandlerConcurrency bounds the calls one handler takes at once.
	MaxHandlerConcurrency = 4096
)

// HandlerSpec says what a handler serves.
type HandlerSpec struct {
	Names        []string              // call names served
	Capabilities []protocol.Capability // descriptions of (some of) those names, for the card
	Concurrency  int                   // calls at once (0: 64)
	// Allow says who may call: "trusted", "anyone", peer IDs (see
	// policy.ParseCallPolicy). Empty means trusted peers only.
	Allow []string
}

// RegisterHandler makes an agent's connection a handler of spec's names:
// calls to them are handed to it (Handler.Calls) until Handler.Close.
func (n *Node) RegisterHandler(spec HandlerSpec) (*Handler, error) {
	if len(spec.Names) == 0 {
		return nil, errorf(api.CodeBadRequest, "names is empty: give the names of the calls to serve")
	}
	for _, name := range spec.Names {
		if err := protocol.CheckName(name); err != nil {
			return nil, wrap(api.CodeBadRequest, err)
		}
	}
	for _, c := range spec.Capabilities {
		if err := checkCapability(c); err != nil {
			return nil, err
		}
	}
	allow, err := policy.ParseCallPolicy(spec.Allow)
	if err != nil {
		return nil, wrap(api.CodeBadRequest, err)
	}
	conc := spec.Concurrency
	switch {
	case conc == 0:
		conc = defaultHandlerConcurrency
	case conc < 0 || conc > MaxHandlerConcurrency:
		return nil, errorf(api.CodeBadRequest, "concurrency must be 1..%d", MaxHandlerConcurrency)
	}
	hc := &Handler{
		hs:        n.handlers,
		names:     spec.Names,
		caps:      spec.Capabilities,
		allow:     allow,
		slots:     make(chan struct{}, conc),
		events:    make(chan IncomingCall, handlerEventBuffer),
		done:      make(chan struct{}),
		cancelled: make(chan struct{}, 1),
	}
	n.handlers.register(hc)
	return hc, nil
}

// checkCapability checks a capability an agent describes.
func checkCapability(c protocol.Capability) error {
	if err := protocol.CheckName(c.Name); err != nil {
		return wrap(api.CodeBadRequest, err)
	}
	for _, s := range []json.RawMessage{c.InputSchema, c.OutputSchema} {
		if len(s) > 0 && (!jsonvalid.Valid(s) || s[0] != '{') {
			return errorf(api.CodeBadRequest, "capability %s: a schema must be a JSON object", c.Name)
		}
	}
	if len(c.Description) > 4096 {
		return errorf(api.CodeBadRequest, "capability %s: description over 4096 bytes", c.Name)
	}
	return nil
}

// served returns the call with id being served here; one that is not
// (answered, cancelled, never existed) is an *Error with
// api.CodeUnknownCall.
func (n *Node) served(id string) (*servedCall, error) {
	sc := n.handlers.call(id)
	if sc == nil {
		return nil, errorf(api.CodeUnknownCall, "no call %s in flight: it was answered, cancelled or never existed", id)
	}
	return sc, nil
}

// CallIsStream reports whether the call with id, being served here, asks
// for a stream of deltas.
func (n *Node) CallIsStream(id string) (bool, error) {
	sc, err := n.served(id)
	if err != nil {
		return false, err
	}
	return sc.c.Request.Stream, nil
}

// ErrCallOver is returned when an answer comes after its call ended: the
// caller cancelled, the deadline passed, or it was answered already.
var ErrCallOver = errorf(api.CodeCancelled, "the call is over (cancelled by the caller, past its deadline, or answered)")

// Delta sends one delta of the stream call with id; flush sends what is
// buffered now (do so before waiting for the next delta).
func (n *Node) Delta(id string, data json.RawMessage, flush bool) error {
	sc, err := n.served(id)
	if err != nil {
		return err
	}
	return callResult(sc.write(false, func(c *call.Call) error {
		if err := c.Delta(data); err != nil {
			return err
		}
		if flush {
			return c.Flush()
		}
		return nil
	}))
}

// Reply is a handler's answer: an output, or an error.
type Reply struct {
	Output json.RawMessage
	Meta   map[string]string   // added to the request's (inherited) meta
	Error  *protocol.CallError // the call failed (Code "" means handler_failed)
}

// Finish answers the call with id, ending it.
func (n *Node) Finish(id string, r Reply) error {
	sc, err := n.served(id)
	if err != nil {
		return err
	}
	return callResult(sc.write(true, func(c *call.Call) error {
		if r.Error != nil {
			e := *r.Error
			if e.Code == "" {
				e.Code = protocol.CodeHandlerFailed
			}
			sc.status = e.Code // under sc.mu, held by write
			return c.Fail(&e)
		}
		meta := protocol.Inherit(c.Request.Meta, protocol.StripLocal(r.Meta), false)
		return c.Final(r.Output, meta)
	}))
}

// FailCall ends the call with id with a handler failure (its handler's
// answer could not be read); a call already over is left alone.
func (n *Node) FailCall(id, msg string) {
	if sc := n.handlers.call(id); sc != nil {
		sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "%s", msg))
	}
}

func callResult(ok bool, err error) error {
	switch {
	case !ok:
		return ErrCallOver
	case err != nil:
		return &Error{Code: api.CodeCancelled, Msg: "the caller is gone: " + err.Error(), Err: err}
	}
	return nil
}

// Invocation is a call to a peer's handler.
type Invocation struct {
	Peer    peer.ID
	Name    string
	Input   json.RawMessage // any JSON, or empty
	Meta    map[string]string
	Timeout time.Duration // 0: DefaultCallTimeout for unary calls, none for streams
	// Parent is the ID of a call this node is serving that this call is
	// made for: the new call inherits its trace (as a child span), session
	// and correlation.
	Parent string
}

// Result is a unary call's answer.
type Result struct {
	Output json.RawMessage // JSON null when the handler gave none
	Meta   map[string]string
}

// Invoke calls a peer's handler and waits for its answer. Failures are
// *protocol.CallError (unreachable, no_handler, deadline_exceeded, an
// agent's own code, …).
func (n *Node) Invoke(ctx context.Context, inv Invocation) (_ Result, err error) {
	req, local, err := n.callRequest(inv, false)
	if err != nil {
		return Result{}, err
	}
	ctx, done := n.startCall(ctx, inv, &req)
	defer func() { done(err) }()
	ctx, cancel := context.WithTimeout(ctx, cmpDuration(inv.Timeout, DefaultCallTimeout))
	defer cancel()
	defer n.outgoing.track(inv.Peer, inv.Name, false)()
	if err := n.reach(ctx, inv.Peer); err != nil {
		return Result{}, err
	}
	f, err := n.calls.Invoke(ctx, inv.Peer, req)
	if err != nil {
		return Result{}, call.ErrorOf(err)
	}
	out := f.Data
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return Result{Output: out, Meta: withLocal(f.Meta, local)}, nil
}

// CallStream is the answer of a stream call: started, deltas, then a
// final or error frame. Close it when done (before the end it cancels the
// call, which reaches the remote handler).
type CallStream struct {
	cs     *call.Stream
	cancel context.CancelFunc
	first  *protocol.CallFrame
	local  map[string]string
	done   bool
	end    func(error) // ends the call's span and counts it, once
	err    error       // how it ended (nil: final, or not yet)
}

// StreamInvoke calls a peer's handler for a stream of frames. A call
// refused at once (no handler, overloaded, …) is an error here, not a
// stream whose first frame is the error.
func (n *Node) StreamInvoke(ctx context.Context, inv Invocation) (_ *CallStream, err error) {
	req, local, err := n.callRequest(inv, true)
	if err != nil {
		return nil, err
	}
	ctx, end := n.startCall(ctx, inv, &req)
	defer func() {
		if err != nil {
			end(err)
		}
	}()
	untrack := n.outgoing.track(inv.Peer, inv.Name, true)
	cancel := context.CancelFunc(untrack)
	if inv.Timeout > 0 {
		var cancelCtx context.CancelFunc
		ctx, cancelCtx = context.WithTimeout(ctx, inv.Timeout)
		cancel = func() { cancelCtx(); untrack() }
	}
	if err := n.reach(ctx, inv.Peer); err != nil {
		cancel()
		return nil, err
	}
	cs, err := n.calls.Call(ctx, inv.Peer, req)
	if err != nil {
		cancel()
		return nil, call.ErrorOf(err)
	}
	first, err := cs.Next()
	if err == nil && first.Kind == protocol.FrameError && first.Error != nil {
		err = first.Error
	}
	if err != nil {
		cs.Close()
		cancel()
		return nil, call.ErrorOf(err)
	}
	var once sync.Once
	s := &CallStream{cs: cs, cancel: cancel, first: first, local: local}
	s.end = func(err error) { once.Do(func() { end(err) }) }
	return s, nil
}

// Next returns the next frame; io.EOF after the final or error frame. A
// broken call ends with an error frame carrying its code.
func (s *CallStream) Next() (protocol.CallFrame, error) {
	if s.done {
		return protocol.CallFrame{}, io.EOF
	}
	var fp *protocol.CallFrame
	var err error
	if s.first != nil {
		fp, s.first = s.first, nil
	} else if fp, err = s.cs.Next(); err == io.EOF {
		s.done = true
		return protocol.CallFrame{}, io.EOF
	}
	if err != nil {
		s.done = true
		ce := call.ErrorOf(err)
		s.err = ce
		s.end(ce)
		return protocol.CallFrame{Kind: protocol.FrameError, Error: ce}, nil
	}
	f := *fp
	if f.Kind == protocol.FrameFinal {
		f.Meta = withLocal(f.Meta, s.local)
	}
	if f.Kind == protocol.FrameFinal || f.Kind == protocol.FrameError {
		// The call is over when its last frame is read, not when the
		// caller gets round to Close: count it now, so whoever sees the
		// final frame also sees the call in the metrics.
		s.done = true
		if f.Error != nil {
			s.err = f.Error
		}
		s.end(s.err)
	}
	return f, nil
}

// Buffered reports whether another frame can be read without waiting.
func (s *CallStream) Buffered() bool { return s.first != nil || s.cs.Buffered() }

// Close ends the stream, cancelling the call if it is not over.
func (s *CallStream) Close() error {
	err := s.cs.Close()
	s.cancel()
	switch {
	case s.err != nil:
		s.end(s.err)
	case !s.done:
		s.end(protocol.Errorf(protocol.CodeCancelled, "closed by the caller before the end"))
	default:
		s.end(nil)
	}
	return err
}

// startCall starts the client span of a call and returns the function
// that ends it and counts the call. The span is the child of the trace
// context the agent put in the call's meta or, for a call nested in one
// served here, of that call's server span; req's meta then carries the
// span's context to the callee.
func (n *Node) startCall(ctx context.Context, inv Invocation, req *protocol.CallRequest) (context.Context, func(error)) {
	start := time.Now()
	if n.cfg.Tracer == nil {
		return ctx, func(err error) { n.cfg.Metrics.CallMade(inv.Name, endSpan(noop.Span{}, err), time.Since(start)) }
	}
	pctx := fromMeta(ctx, inv.Meta)
	if _, err := protocol.ParseTraceparent(inv.Meta[protocol.MetaTraceparent]); err != nil && inv.Parent != "" {
		if sc := n.handlers.call(inv.Parent); sc != nil && sc.span.IsValid() {
			pctx = trace.ContextWithSpanContext(ctx, sc.span)
		}
	}
	ctx, span := n.tracer.Start(pctx, "invoke_agent "+inv.Name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(callAttrs(inv.Name, inv.Peer, inv.Peer, req.Meta, req.Stream)...))
	req.Meta = intoMeta(ctx, span, req.Meta)
	return ctx, func(err error) {
		n.cfg.Metrics.CallMade(inv.Name, endSpan(span, err), time.Since(start))
	}
}

// callRequest checks an invocation and builds the wire request: meta
// inherited from the parent call (trace as a child span), local keys kept
// aside, a trace started when there is none.
func (n *Node) callRequest(inv Invocation, stream bool) (protocol.CallRequest, map[string]string, error) {
	if inv.Peer == "" || inv.Peer.Validate() != nil {
		return protocol.CallRequest{}, nil, errorf(api.CodeBadPeer, "peer: %q is not a peer ID", inv.Peer)
	}
	if err := protocol.CheckName(inv.Name); err != nil {
		return protocol.CallRequest{}, nil, wrap(api.CodeBadRequest, err)
	}
	if len(inv.Input) > 0 && !jsonvalid.Valid(inv.Input) {
		return protocol.CallRequest{}, nil, errorf(api.CodeBadRequest, "input is not valid JSON")
	}
	if err := protocol.ValidateMeta(inv.Meta); err != nil {
		return protocol.CallRequest{}, nil, wrap(api.CodeBadRequest, err)
	}
	if inv.Timeout < 0 {
		return protocol.CallRequest{}, nil, errorf(api.CodeBadRequest, "timeout must not be negative")
	}
	var parent map[string]string
	if inv.Parent != "" {
		sc := n.handlers.call(inv.Parent)
		if sc == nil {
			return protocol.CallRequest{}, nil, errorf(api.CodeUnknownCall, "parent call %q is not being served here", inv.Parent)
		}
		parent = sc.c.Request.Meta
	}
	meta := protocol.Inherit(parent, protocol.StripLocal(inv.Meta), true)
	if _, err := protocol.ParseTraceparent(meta[protocol.MetaTraceparent]); err != nil {
		meta = cloneMeta(meta)
		meta[protocol.MetaTraceparent] = protocol.NewTrace().String()
		delete(meta, protocol.MetaTracestate)
	}
	local := make(map[string]string)
	for k, v := range inv.Meta {
		if protocol.IsLocalMeta(k) {
			local[k] = v
		}
	}
	return protocol.CallRequest{Name: inv.Name, Input: inv.Input, Meta: meta, Stream: stream}, local, nil
}

// reach connects to p, failing fast with unreachable.
func (n *Node) reach(ctx context.Context, p peer.ID) error {
	if p == n.mesh.ID() {
		return errorf(api.CodeBadPeer, "peer %s is this node", p)
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

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
