package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/weftmesh/weft/internal/framejson"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/jsonvalid"
)

// Invoke calls name on peer and returns its result. Typed failures are
// *Error with codes such as no_handler, unreachable, deadline_exceeded and
// handler_failed.
func (c *Client) Invoke(ctx context.Context, req api.InvokeRequest) (api.InvokeResult, error) {
	req.Stream = false
	var out api.InvokeResult
	err := c.post(ctx, "/v1/invoke", req, &out)
	return out, err
}

// InvokeStream makes a stream call and calls fn for each frame in order
// (started, delta…, final). An error frame ends it with an *Error. Cancel
// ctx (or return an error from fn) to cancel the call: the remote handler
// is stopped.
func (c *Client) InvokeStream(ctx context.Context, req api.InvokeRequest, fn func(api.Frame) error) error {
	req.Stream = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // closing the answer early cancels the call
	resp, err := c.send(ctx, http.MethodPost, "/v1/invoke", req, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventSize)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var f api.Frame
		if seq, kind, data, ok := framejson.ParseFrame(sc.Bytes()); ok { // a delta, say: no reflection
			f = api.Frame{Seq: seq, Kind: kind, Data: bytes.Clone(data)}
		} else if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return fmt.Errorf("decode frame: %w", err)
		}
		if f.Kind == "error" {
			e := &Error{Status: http.StatusBadGateway, Code: "handler_failed", Message: "the call failed"}
			if f.Error != nil {
				e.Code, e.Message = f.Error.Code, f.Error.Message
			}
			return e
		}
		if err := fn(f); err != nil {
			return err
		}
		if f.Kind == "final" {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("call stream: %w", err)
	}
	return errors.New("call stream ended without a final frame")
}

// Reply answers a call being served here (POST /v1/calls/{id}/reply).
func (c *Client) Reply(ctx context.Context, id string, r api.Reply) error {
	return c.do(ctx, http.MethodPost, "/v1/calls/"+url.PathEscape(id)+"/reply", r, nil)
}

// Frames streams a stream call's answer: body is NDJSON api.Reply lines
// (delta…, then final or error), read as the caller takes them.
func (c *Client) Frames(ctx context.Context, id string, body io.Reader) error {
	resp, err := c.sendBody(ctx, http.MethodPost, "/v1/calls/"+url.PathEscape(id)+"/frames", body,
		http.Header{"Content-Type": {"application/x-ndjson"}})
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// Handlers registers as a handler of req.Names and calls fn with each
// event (ready, call, cancel, ping) until ctx ends, fn fails or the daemon
// closes the stream. Serve is the easier way to serve calls.
func (c *Client) Handlers(ctx context.Context, req api.HandlerRequest, fn func(api.HandlerEvent) error) error {
	resp, err := c.send(ctx, http.MethodPost, "/v1/handlers", req, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventSize)
	for sc.Scan() {
		var ev api.HandlerEvent
		if !parseHandlerEvent(sc.Bytes(), &ev) {
			ev = api.HandlerEvent{}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				return fmt.Errorf("decode handler event: %w", err)
			}
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("handler stream: %w", err)
	}
	return errors.New("handler stream closed by the daemon")
}

// HandlerFunc serves one call. For a stream call, send emits a delta (it
// blocks while the caller is slow); for a unary call send returns
// ErrNotStream. The returned output (and meta) is the final answer; an
// error fails the call (an *Error keeps its code, others become
// handler_failed). ctx ends when the caller cancels or the deadline passes.
type HandlerFunc func(ctx context.Context, call api.IncomingCall, send func(delta json.RawMessage) error) (output json.RawMessage, meta map[string]string, err error)

// ErrNotStream is returned by send for a unary call.
var ErrNotStream = errors.New("not a stream call")

// Serve registers as a handler of req.Names and runs fn for each call, in
// its own goroutine (up to req.Concurrency at once, as the daemon
// dispatches), until ctx ends. ready, if not nil, is called once the
// daemon has registered the handler.
func (c *Client) Serve(ctx context.Context, req api.HandlerRequest, fn HandlerFunc, ready func()) error {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		running = make(map[string]context.CancelFunc)
		wg      sync.WaitGroup
	)
	rs := c.openReplies(ctx)
	defer func() {
		cancel() // the stream is over: stop the calls still running, then wait for them
		wg.Wait()
		rs.close()
	}()
	return c.Handlers(ctx, req, func(ev api.HandlerEvent) error {
		switch ev.Type {
		case "ready":
			if ready != nil {
				ready()
			}
		case "cancel":
			mu.Lock()
			if stop, ok := running[ev.ID]; ok {
				stop()
			}
			mu.Unlock()
		case "call":
			if ev.Call == nil {
				return nil
			}
			call := *ev.Call
			// One context per call, cancelled when it ends (a second one
			// would stay registered with ctx until Serve returns).
			cctx, stop := context.WithCancel(ctx)
			if !call.Deadline.IsZero() {
				stop()
				cctx, stop = context.WithDeadline(ctx, call.Deadline)
			}
			mu.Lock()
			running[call.ID] = stop
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(running, call.ID)
					mu.Unlock()
					stop()
				}()
				c.serveOne(cctx, call, fn, rs)
			})
		}
		return nil
	})
}

// serveOne runs fn for one call and sends its answer: a unary call's on
// the stream of answers rs when it can.
func (c *Client) serveOne(ctx context.Context, call api.IncomingCall, fn HandlerFunc, rs *replyStream) {
	answer := func(out json.RawMessage, meta map[string]string, err error) api.Reply {
		if err != nil {
			e := &api.ErrorBody{Code: "handler_failed", Message: err.Error()}
			var ae *Error
			if errors.As(err, &ae) && ae.Code != "" {
				e.Code = ae.Code
			}
			return api.Reply{Kind: "error", Error: e}
		}
		return api.Reply{Kind: "final", Output: out, Meta: meta}
	}
	// Answers go out on a fresh context: a cancelled call's answer is
	// refused by the daemon, which is fine.
	actx := context.WithoutCancel(ctx)
	if !call.Stream {
		out, meta, err := fn(ctx, call, func(json.RawMessage) error { return ErrNotStream })
		if rs.send(call.ID, answer(out, meta, err)) {
			return
		}
		if rerr := c.Reply(actx, call.ID, answer(out, meta, err)); rerr != nil && !IsCode(rerr, "cancelled") && !IsCode(rerr, "unknown_call") {
			// The answer was refused (too large, not JSON): fail the call
			// rather than leave the caller waiting for its deadline.
			_ = c.Reply(actx, call.ID, api.Reply{Kind: "error", Error: &api.ErrorBody{Code: "handler_failed", Message: "the handler's answer was refused: " + rerr.Error()}})
		}
		return
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := c.Frames(actx, call.ID, pr)
		if err == nil {
			err = errCallOver
		}
		pr.CloseWithError(err) // later writes fail instead of blocking
		done <- err
	}()
	b := newFrameBatcher(pw)
	send := func(d json.RawMessage) error { return b.send(api.Reply{Kind: "delta", Output: d}) }
	out, meta, err := fn(ctx, call, send)
	_ = b.send(answer(out, meta, err))
	b.close()
	pw.Close()
	<-done
}

// frameBatcher writes a stream call's answer lines through one goroutine
// that writes all the lines queued when it comes round in one write: a
// handler that makes many small deltas fast sends them in few writes (each
// write of the request body is a chunk the transport flushes to the
// daemon, which forwards what it has read at once), one that makes them
// slowly sends each at once. send blocks while frameQueue lines wait, so
// a slow caller still slows the handler down.
type frameBatcher struct {
	w      io.Writer
	lines  chan []byte
	failed chan struct{} // closed when a write failed; err is set
	err    error
	done   chan struct{}
}

// frameQueue bounds the lines queued; frameBatch the bytes of one write
// (one line may pass it).
const (
	frameQueue = 256
	frameBatch = 64 << 10
)

func newFrameBatcher(w io.Writer) *frameBatcher {
	b := &frameBatcher{w: w, lines: make(chan []byte, frameQueue), failed: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// sendLine queues one line (ending in a newline).
func (b *frameBatcher) sendLine(line []byte) error {
	select {
	case b.lines <- line:
		return nil
	case <-b.failed:
		return b.err
	}
}

func (b *frameBatcher) send(r api.Reply) error {
	var line []byte
	var err error
	bare := r.Meta == nil && r.Error == nil // a delta, say: encoded without reflection
	if bare {
		line, err = framejson.AppendReply(make([]byte, 0, 32+len(r.Output)), r.Kind, r.Output)
		bare = !errors.Is(err, framejson.ErrKind)
	}
	if !bare {
		line, err = marshal(r)
	}
	if err != nil {
		return err
	}
	return b.sendLine(append(line, '\n'))
}

// close writes what is queued and stops; send must not be called after.
func (b *frameBatcher) close() {
	close(b.lines)
	<-b.done
}

func (b *frameBatcher) run() {
	defer close(b.done)
	var batch []byte
	for line := range b.lines {
		batch = append(batch[:0], line...)
	more:
		for len(batch) < frameBatch {
			select {
			case l, ok := <-b.lines:
				if !ok {
					break more
				}
				batch = append(batch, l...)
			default:
				break more
			}
		}
		if _, err := b.w.Write(batch); err != nil {
			b.err = err
			close(b.failed)
			for range b.lines { // let close return
			}
			return
		}
	}
}

// errCallOver fails sends after a call's answer has ended.
var errCallOver = errors.New("the call is over")

// replyStream is a handler's stream of answers to its unary calls (POST
// /v1/calls/replies): one request for them all, instead of one each. A
// daemon without the route, an answer that is not valid JSON or is large,
// or a broken stream leave the answers to POST /v1/calls/{id}/reply.
type replyStream struct {
	ready chan struct{} // closed once it is known whether the stream is up
	up    bool          // set before ready is closed
	pw    *io.PipeWriter
	b     *frameBatcher // nil if the stream is not up
	done  chan struct{} // closed when the request has ended
}

// maxStreamedReply is the longest answer line sent on a replyStream;
// longer ones go in a request of their own, which tells the handler if
// the daemon refuses it.
const maxStreamedReply = 64 << 10

// replyLine is one line of POST /v1/calls/replies.
type replyLine struct {
	ID string `json:"id"`
	api.Reply
}

// openReplies starts the stream of answers; it lasts until close.
func (c *Client) openReplies(ctx context.Context) *replyStream {
	pr, pw := io.Pipe()
	rs := &replyStream{ready: make(chan struct{}), pw: pw, done: make(chan struct{})}
	// The transport's Do waits for the body's writer to stop, which waits
	// on the pipe: closing it when ctx ends lets Do return.
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	go func() {
		defer close(rs.done)
		defer stop()
		// The daemon answers with the headers at once, before the body.
		resp, err := c.sendBody(ctx, http.MethodPost, "/v1/calls/replies", pr,
			http.Header{"Content-Type": {"application/x-ndjson"}})
		if err != nil {
			pr.CloseWithError(err)
			close(rs.ready)
			return
		}
		rs.up = true
		rs.b = newFrameBatcher(pw)
		close(rs.ready)
		_, _ = io.Copy(io.Discard, resp.Body) // until the daemon ends it
		resp.Body.Close()
		pr.CloseWithError(errCallOver) // later writes fail instead of blocking
	}()
	return rs
}

// send sends the answer r to call id on the stream, and reports whether
// it went; if not, the caller sends it with POST /v1/calls/{id}/reply.
func (rs *replyStream) send(id string, r api.Reply) bool {
	select {
	case <-rs.ready:
	default:
		// Not up yet, or never: a daemon without the route answers only
		// once it has read the body, which is never written until then.
		return false
	}
	if !rs.up || len(r.Output) > maxStreamedReply || len(r.Output) > 0 && !jsonvalid.Valid(r.Output) {
		return false
	}
	line, err := marshal(replyLine{ID: id, Reply: r})
	if err != nil || len(line) > maxStreamedReply {
		return false
	}
	return rs.b.sendLine(append(line, '\n')) == nil
}

// close ends the stream and waits for its request to end; ctx (of
// openReplies) must be done if the stream may not be up.
func (rs *replyStream) close() {
	<-rs.ready
	if rs.b != nil {
		rs.b.close()
	}
	rs.pw.Close()
	<-rs.done
}
