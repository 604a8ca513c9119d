package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/node/metrics"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
)

// Handler connections.
const (
	defaultHandlerConcurrency = 64
	maxHandlerConcurrency     = 4096
	handlerEventBuffer        = 256
)

// handlers routes calls that reach this node to the agents that registered
// to serve them (RegisterHandler). It is the node's call.Handler.
type handlers struct {
	rel     policy.Relations // who the caller is to this node: asked by call policies
	self    peer.ID
	tracing bool // tracer records spans
	tracer  trace.Tracer
	metrics *metrics.Metrics

	mu     sync.Mutex
	byName map[string][]*Handler
	calls  map[string]*servedCall
	onCaps func() // called when the set of served names changes
	active atomic.Int64
	nextRR atomic.Uint64
}

func newHandlers() *handlers {
	return &handlers{byName: make(map[string][]*Handler), calls: make(map[string]*servedCall)}
}

// IncomingCall is a call from a peer handed to a registered handler.
type IncomingCall struct {
	ID       string // names the call in Reply and ServedCall
	Name     string
	From     peer.ID
	Input    json.RawMessage
	Meta     map[string]string
	Stream   bool      // answer with deltas, then a final frame
	Deadline time.Time // zero: none
}

// Handler is one registered handler: an agent's connection that serves
// calls to its names until Close.
type Handler struct {
	hs     *handlers
	names  []string
	caps   []protocol.Capability
	allow  policy.CallPolicy // who may call
	slots  chan struct{}     // calls in flight on this connection
	events chan IncomingCall // calls, to the agent
	done   chan struct{}     // closed when the handler goes away
	close  sync.Once

	// Cancellations are never dropped: they wait here for the writer,
	// which is woken through cancelled.
	cancelMu  sync.Mutex
	cancels   []string
	cancelled chan struct{} // capacity 1
}

// Allow returns who may call this handler, in the words of its policy
// ("trusted", "anyone", "peer:ID").
func (hc *Handler) Allow() []string { return hc.allow.Words() }

// Calls returns the calls handed to this handler.
func (hc *Handler) Calls() <-chan IncomingCall { return hc.events }

// Cancelled is signalled when calls were cancelled by their callers: take
// their IDs with TakeCancels.
func (hc *Handler) Cancelled() <-chan struct{} { return hc.cancelled }

// Close unregisters the handler; calls it was serving fail.
func (hc *Handler) Close() { hc.close.Do(func() { hc.hs.unregister(hc) }) }

// cancel queues a cancel event for call id without blocking.
func (hc *Handler) cancel(id string) {
	hc.cancelMu.Lock()
	hc.cancels = append(hc.cancels, id)
	hc.cancelMu.Unlock()
	select {
	case hc.cancelled <- struct{}{}:
	default:
	}
}

// TakeCancels returns and clears the IDs of the calls cancelled since the
// last call.
func (hc *Handler) TakeCancels() []string {
	hc.cancelMu.Lock()
	defer hc.cancelMu.Unlock()
	ids := hc.cancels
	hc.cancels = nil
	return ids
}

// servedCall is a call being served by an agent through the API.
type servedCall struct {
	id   string
	c    *call.Call
	ctx  context.Context
	conn *Handler
	at   time.Time // when it was handed to the handler

	span trace.SpanContext // the server span; nested calls are its children

	mu       sync.Mutex // serializes writes to c
	finished bool       // c was answered, or the call ended
	status   string     // how it ended: "ok" or an error code
	answered chan struct{}
}

// register adds a handler connection for its names.
func (hs *handlers) register(hc *Handler) {
	hs.mu.Lock()
	for _, name := range hc.names {
		hs.byName[name] = append(hs.byName[name], hc)
	}
	f := hs.onCaps
	hs.mu.Unlock()
	if f != nil {
		f()
	}
}

// unregister removes a handler connection; calls it was serving fail.
func (hs *handlers) unregister(hc *Handler) {
	hs.mu.Lock()
	for _, name := range hc.names {
		conns := hs.byName[name]
		for i, c := range conns {
			if c == hc {
				conns = append(conns[:i:i], conns[i+1:]...)
				break
			}
		}
		if len(conns) == 0 {
			delete(hs.byName, name)
		} else {
			hs.byName[name] = conns
		}
	}
	f := hs.onCaps
	hs.mu.Unlock()
	close(hc.done)
	if f != nil {
		f()
	}
}

// capabilities returns the capabilities of the registered handlers, one
// per name, each with its access: anyone when a handler of the name takes
// calls from anyone, else restricted.
func (hs *handlers) capabilities() []protocol.Capability {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var out []protocol.Capability
	for name, conns := range hs.byName {
		cp := protocol.Capability{Name: name}
		access := policy.AccessRestricted
		for _, hc := range conns {
			for _, c := range hc.caps {
				if c.Name == name {
					cp = c
				}
			}
			if hc.allow.Access() == policy.AccessAnyone {
				access = policy.AccessAnyone
			}
		}
		cp.Access = access
		out = append(out, cp)
	}
	return out
}

// capacity returns the number of handler connections and the calls they
// take at once.
func (hs *handlers) capacity() (conns, calls int) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	seen := make(map[*Handler]bool)
	for _, cs := range hs.byName {
		for _, c := range cs {
			if !seen[c] {
				seen[c] = true
				calls += cap(c.slots)
			}
		}
	}
	return len(seen), calls
}

// pick returns the least busy connection serving name whose call policy
// allows caller. When there is none it returns why: no_handler if nobody
// serves name, forbidden if no handler of name allows caller.
func (hs *handlers) pick(name string, caller peer.ID) (*Handler, *protocol.CallError) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	conns := hs.byName[name]
	if len(conns) == 0 {
		return nil, protocol.Errorf(protocol.CodeNoHandler, "no handler for %q", name)
	}
	start := int(hs.nextRR.Add(1) % uint64(len(conns)))
	var best *Handler
	for i := range conns {
		c := conns[(start+i)%len(conns)]
		if !c.allow.Allows(caller, hs.rel) {
			continue
		}
		if best == nil || len(c.slots)-cap(c.slots) < len(best.slots)-cap(best.slots) {
			best = c
		}
	}
	if best == nil {
		return nil, protocol.Errorf(protocol.CodeForbidden, "%q takes calls only from peers this node trusts or lists, and not from %s", name, caller)
	}
	return best, nil
}

// call returns the served call with id.
func (hs *handlers) call(id string) *servedCall {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.calls[id]
}

// ServeCall hands a call from the network to a registered handler whose
// call policy allows the caller, and waits until it is answered,
// cancelled, or the handler goes away (call.Handler). A caller no handler
// of the name allows is refused with forbidden before any handler sees
// the call.
func (hs *handlers) ServeCall(ctx context.Context, c *call.Call) {
	hs.active.Add(1)
	defer hs.active.Add(-1)
	start := time.Now()
	name := c.Request.Name
	var span trace.Span = noop.Span{}
	if hs.tracing {
		ctx, span = hs.tracer.Start(fromMeta(ctx, c.Request.Meta), "invoke_agent "+name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(callAttrs(name, hs.self, c.From, c.Request.Meta, c.Request.Stream)...))
	}
	var sc *servedCall
	served := true
	var failure error // how the call failed before reaching a handler
	defer func() {
		if sc != nil {
			sc.mu.Lock()
			if sc.status != "ok" && sc.status != "" {
				failure = protocol.Errorf(sc.status, "%s", sc.status)
			}
			sc.mu.Unlock()
		}
		hs.metrics.CallServed(name, served, endSpan(span, failure), time.Since(start))
	}()
	var hc *Handler
	for {
		var refusal *protocol.CallError
		hc, refusal = hs.pick(name, c.From)
		if hc == nil {
			served = refusal.Code != protocol.CodeNoHandler
			failure = refusal
			c.Fail(refusal)
			return
		}
		select {
		case hc.slots <- struct{}{}:
		case <-hc.done:
			continue // that connection went away: pick another
		case <-ctx.Done():
			failure = ctxFailure(ctx)
			failCtx(ctx, c)
			return
		}
		break
	}
	defer func() { <-hc.slots }()

	sc = &servedCall{id: newCallID(), c: c, ctx: ctx, conn: hc, at: time.Now(), answered: make(chan struct{}), span: span.SpanContext()}
	hs.mu.Lock()
	hs.calls[sc.id] = sc
	hs.mu.Unlock()
	defer func() {
		hs.mu.Lock()
		delete(hs.calls, sc.id)
		hs.mu.Unlock()
	}()

	if hs.tracing {
		span.SetAttributes(attribute.String("weft.call.id", sc.id))
	}
	ev := IncomingCall{
		ID: sc.id, Name: c.Request.Name, From: c.From,
		// The handler continues the trace from the server span.
		Input: c.Request.Input, Meta: intoMeta(ctx, span, c.Request.Meta), Stream: c.Request.Stream,
	}
	if c.Request.Deadline > 0 {
		ev.Deadline = time.UnixMilli(c.Request.Deadline).UTC()
	}
	select {
	case hc.events <- ev:
	case <-hc.done:
		sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler went away"))
		return
	case <-ctx.Done():
		sc.end(ctxFailure(ctx))
		return
	}
	sc.mu.Lock()
	if c.Started() == nil {
		c.Flush()
	}
	sc.mu.Unlock()

	select {
	case <-sc.answered:
	case <-hc.done:
		sc.end(protocol.Errorf(protocol.CodeHandlerFailed, "the handler went away before answering"))
	case <-ctx.Done():
		hc.cancel(sc.id) // tell the handler, without waiting on it
		sc.end(ctxFailure(ctx))
	}
}

// end finishes the call with e unless it was answered already.
func (sc *servedCall) end(e *protocol.CallError) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.finished {
		sc.finished = true
		sc.status = e.Code
		sc.c.Fail(e)
		close(sc.answered)
	}
}

// write runs f, which writes to the call, unless the call is over; last
// marks the call answered.
func (sc *servedCall) write(last bool, f func(c *call.Call) error) (ok bool, err error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.finished {
		return false, nil
	}
	err = f(sc.c)
	if last || err != nil {
		sc.finished = true
		switch {
		case err != nil:
			sc.status = errorCode(err)
		case sc.status == "":
			sc.status = "ok"
		}
		close(sc.answered)
	}
	return true, err
}

func failCtx(ctx context.Context, c *call.Call) { c.Fail(ctxFailure(ctx)) }

// ctxFailure is the error a call ended by ctx gets (the caller may not see
// it when it cancelled).
func ctxFailure(ctx context.Context) *protocol.CallError {
	if ctx.Err() == context.DeadlineExceeded {
		return protocol.Errorf(protocol.CodeDeadline, "deadline exceeded while serving the call")
	}
	return protocol.Errorf(protocol.CodeCancelled, "call cancelled")
}

func newCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
