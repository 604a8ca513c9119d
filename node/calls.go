package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// Handler connections.
const (
	defaultHandlerConcurrency = 64
	maxHandlerConcurrency     = 4096
	handlerEventBuffer        = 256
)

// handlers routes calls that reach this node to the agents that registered
// to serve them (POST /v1/handlers). It is the node's call.Handler.
type handlers struct {
	mu     sync.Mutex
	byName map[string][]*handlerConn
	calls  map[string]*servedCall
	onCaps func() // called when the set of served names changes
	active atomic.Int64
	nextRR atomic.Uint64
}

func newHandlers() *handlers {
	return &handlers{byName: make(map[string][]*handlerConn), calls: make(map[string]*servedCall)}
}

// handlerConn is one registered handler connection.
type handlerConn struct {
	names  []string
	caps   []api.Capability
	slots  chan struct{}         // calls in flight on this connection
	events chan api.HandlerEvent // calls, to the connection's stream
	done   chan struct{}         // closed when the connection goes away

	// Cancellations are never dropped: they wait here for the writer,
	// which is woken through cancelled.
	cancelMu  sync.Mutex
	cancels   []string
	cancelled chan struct{} // capacity 1
}

// cancel queues a cancel event for call id without blocking.
func (hc *handlerConn) cancel(id string) {
	hc.cancelMu.Lock()
	hc.cancels = append(hc.cancels, id)
	hc.cancelMu.Unlock()
	select {
	case hc.cancelled <- struct{}{}:
	default:
	}
}

// takeCancels returns and clears the queued cancellations.
func (hc *handlerConn) takeCancels() []string {
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
	conn *handlerConn

	mu       sync.Mutex // serializes writes to c
	finished bool       // c was answered, or the call ended
	answered chan struct{}
}

// register adds a handler connection for its names.
func (hs *handlers) register(hc *handlerConn) {
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
func (hs *handlers) unregister(hc *handlerConn) {
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
// per name.
func (hs *handlers) capabilities() []api.Capability {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var out []api.Capability
	for name, conns := range hs.byName {
		cp := api.Capability{Name: name}
		for _, hc := range conns {
			for _, c := range hc.caps {
				if c.Name == name {
					cp = c
				}
			}
		}
		out = append(out, cp)
	}
	return out
}

// capacity returns the number of handler connections and the calls they
// take at once.
func (hs *handlers) capacity() (conns, calls int) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	seen := make(map[*handlerConn]bool)
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

// pick returns the least busy connection serving name, nil if none.
func (hs *handlers) pick(name string) *handlerConn {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	conns := hs.byName[name]
	if len(conns) == 0 {
		return nil
	}
	start := int(hs.nextRR.Add(1) % uint64(len(conns)))
	best := conns[start]
	for i := range conns {
		c := conns[(start+i)%len(conns)]
		if len(c.slots)-cap(c.slots) < len(best.slots)-cap(best.slots) {
			best = c
		}
	}
	return best
}

// call returns the served call with id.
func (hs *handlers) call(id string) *servedCall {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.calls[id]
}

// ServeCall hands a call from the network to a registered handler and
// waits until it is answered, cancelled, or the handler goes away
// (call.Handler).
func (hs *handlers) ServeCall(ctx context.Context, c *call.Call) {
	hs.active.Add(1)
	defer hs.active.Add(-1)
	var hc *handlerConn
	for {
		hc = hs.pick(c.Request.Name)
		if hc == nil {
			c.Fail(protocol.Errorf(protocol.CodeNoHandler, "no handler for %q", c.Request.Name))
			return
		}
		select {
		case hc.slots <- struct{}{}:
		case <-hc.done:
			continue // that connection went away: pick another
		case <-ctx.Done():
			failCtx(ctx, c)
			return
		}
		break
	}
	defer func() { <-hc.slots }()

	sc := &servedCall{id: newCallID(), c: c, ctx: ctx, conn: hc, answered: make(chan struct{})}
	hs.mu.Lock()
	hs.calls[sc.id] = sc
	hs.mu.Unlock()
	defer func() {
		hs.mu.Lock()
		delete(hs.calls, sc.id)
		hs.mu.Unlock()
	}()

	ev := api.HandlerEvent{Type: "call", Call: &api.IncomingCall{
		ID: sc.id, Name: c.Request.Name, From: c.From.String(),
		Input: c.Request.Input, Meta: c.Request.Meta, Stream: c.Request.Stream,
	}}
	if c.Request.Deadline > 0 {
		ev.Call.Deadline = time.UnixMilli(c.Request.Deadline).UTC()
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
