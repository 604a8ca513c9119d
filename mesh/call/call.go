// Package call is weft's call protocol: invoke and stream invoke between
// two daemons over libp2p streams, one call at a time on a stream. A caller
// offers protocol.CallKeepProtocol, which keeps the stream for the next
// call (so a call does not pay a new stream's opening and negotiation),
// then protocol.CallProtocol, one call per stream, which a callee that
// does not speak the first serves; a callee serves both.
//
// The caller opens a stream and writes one frame, a JSON
// protocol.CallRequest. The callee answers with JSON protocol.CallFrame
// frames numbered from seq 0: for a unary call one final or error frame;
// for a stream call started, then any number of delta frames, then final
// or error. Frames flow under the stream's own flow control: a caller that
// reads slowly slows the handler down, and nothing is dropped.
//
// The caller keeps its side of the stream open until the answer ends;
// resetting (or closing) it cancels the call, and the handler's context
// ends at once. On a kept stream the caller then writes the next request,
// or closes its side; idle kept streams are pooled per peer (a few, for
// less than protocol.CallKeepIdle), and the callee closes one idle longer. A deadline in the request ends the handler's context too.
// Failures are typed (protocol.CallError codes): no_handler when nothing
// serves the name, unreachable when the peer cannot be reached,
// deadline_exceeded, cancelled, overloaded, handler_failed, bad_request.
package call

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/framejson"
	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// ServiceName is the libp2p resource manager service the call streams of
// both sides belong to: its limits (set by the host, see mesh) bound the
// calls in flight, per peer and in all.
const ServiceName = "weft.call"

// Handler serves the calls that reach this node.
type Handler interface {
	// ServeCall runs one call and answers it through c: Final or Fail,
	// after Started and Deltas for a stream call. ctx ends when the caller
	// cancels, the deadline passes or the node closes. If ServeCall returns
	// without answering, the caller gets an internal error. It is called
	// concurrently.
	ServeCall(ctx context.Context, c *Call)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Call)

// ServeCall calls f.
func (f HandlerFunc) ServeCall(ctx context.Context, c *Call) { f(ctx, c) }

// Service serves calls with a Handler and makes calls to other nodes.
type Service struct {
	h       host.Host
	handler Handler
	cfg     config
	slots   chan struct{} // one per call in flight
	mu      sync.Mutex    // guards closed and wg.Add against Close's wg.Wait
	closed  bool
	perPeer map[peer.ID]int         // calls in flight per caller
	idle    map[peer.ID][]*callConn // kept streams between calls, newest last
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

// New registers the call protocol on h, serving incoming calls with
// handler (nil: every call fails with no_handler).
func New(h host.Host, handler Handler, opts ...Option) (*Service, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if handler == nil {
		handler = HandlerFunc(func(_ context.Context, c *Call) {
			c.Fail(protocol.Errorf(protocol.CodeNoHandler, "%s serves no calls", h.ID()))
		})
	}
	s := &Service{h: h, handler: handler, cfg: cfg, slots: make(chan struct{}, cfg.maxCalls), perPeer: make(map[peer.ID]int),
		idle: make(map[peer.ID][]*callConn)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	h.SetStreamHandler(protocol.CallProtocol, s.serve)
	h.SetStreamHandler(protocol.CallKeepProtocol, s.serve)
	return s, nil
}

// Close removes the handler, cancels the calls being served and waits for
// them to end.
func (s *Service) Close() error {
	s.h.RemoveStreamHandler(protocol.CallProtocol)
	s.h.RemoveStreamHandler(protocol.CallKeepProtocol)
	s.mu.Lock()
	s.closed = true
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, ccs := range idle {
		for _, cc := range ccs {
			cc.st.Close() // the callee sees the end of the stream between calls
		}
	}
	s.cancel()
	s.wg.Wait()
	return nil
}

// Active returns the number of calls being served.
func (s *Service) Active() int { return len(s.slots) }

func (s *Service) serve(st network.Stream) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		st.Reset()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	w := bufio.NewWriter(st)
	if err := st.Scope().SetService(ServiceName); err != nil {
		// The resource manager's limit on calls (this peer's or
		// everyone's): answered like a full slot table.
		c := &Call{From: st.Conn().RemotePeer(), st: st, w: w}
		c.Fail(protocol.Errorf(protocol.CodeOverloaded, "too many call streams: %v", err))
		st.Close()
		return
	}
	r := bufio.NewReader(st)
	if st.Protocol() == protocol.CallKeepProtocol {
		s.serveKept(st, r, w)
		return
	}
	st.SetReadDeadline(time.Now().Add(s.cfg.timeout))
	raw, err := frame.ReadIn(r, s.cfg.requestLimit(), st.Scope())
	st.SetReadDeadline(time.Time{})
	c := &Call{From: st.Conn().RemotePeer(), st: st, w: w}
	// The caller keeps its writing side open until it has the answer: the
	// end of its side, or a reset, is a cancellation.
	res, watched := s.answer(st, c, raw, err, func(cancel context.CancelCauseFunc, _ <-chan struct{}) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<10))
		cancel(errCallerGone)
	})
	switch res {
	case unreadable:
		s.drain(st, r)
	case answered, overloaded:
		st.Close()
	}
	<-watched
}

// request is a request frame read from a kept stream, or the error that
// ended reading it.
type request struct {
	raw []byte
	err error
}

// serveKept serves the calls of a CallKeepProtocol stream one after
// another. One goroutine reads the stream: between calls it brings the
// next request; during a call, what it reads cancels the call (the end of
// the caller's side, a reset), unless the call is answered already (then
// it is the next request).
func (s *Service) serveKept(st network.Stream, r *bufio.Reader, w *bufio.Writer) {
	reqs := make(chan request)
	quit := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			// Reserved until the call it opens ends (answer releases it).
			raw, err := frame.ReadIn(r, s.cfg.requestLimit(), st.Scope())
			select {
			case reqs <- request{raw, err}:
			case <-quit:
				if err == nil {
					st.Scope().ReleaseMemory(len(raw))
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		close(quit)
		<-readerDone
	}()
	var next *request
	for first := true; ; first = false {
		in := next
		next = nil
		if in == nil {
			wait := protocol.CallKeepIdle
			if first {
				wait = s.cfg.timeout
			}
			t := time.NewTimer(wait)
			select {
			case req := <-reqs:
				t.Stop()
				in = &req
			case <-t.C:
				if first {
					c := &Call{From: st.Conn().RemotePeer(), st: st, w: w}
					c.Fail(protocol.Errorf(protocol.CodeBadRequest, "unreadable request: none within %v", wait))
				}
				st.Close()
				return
			case <-s.ctx.Done():
				t.Stop()
				st.Close()
				return
			}
		}
		if !first && errors.Is(in.err, io.EOF) { // the caller has no more calls
			st.Close()
			return
		}
		c := &Call{From: st.Conn().RemotePeer(), st: st, w: w}
		var broke bool // the caller wrote during the call's answer
		res, watched := s.answer(st, c, in.raw, in.err, func(cancel context.CancelCauseFunc, ended <-chan struct{}) {
			select {
			case req := <-reqs:
				next = &req // the next request, or the end of the caller's side
				if req.err == nil {
					if c.answered.Load() {
						return
					}
					st.Scope().ReleaseMemory(len(req.raw))
					broke = true
				}
				cancel(errCallerGone)
			case <-ended:
			}
		})
		<-watched
		switch {
		case res == unreadable:
			<-readerDone // a read error ends the reader: nothing else reads r
			s.drain(st, r)
			return
		case res == overloaded: // refused unread: the stream is out of step
			st.Close()
			return
		case res == broken || broke:
			st.Reset()
			return
		case next != nil && errors.Is(next.err, io.EOF): // no more calls
			st.Close()
			return
		case next != nil && next.err != nil:
			st.Reset()
			return
		}
	}
}

// drain ends a stream whose request could not be read, after its error
// frame: not a reset, which discards the error frame the caller has not
// read yet; and it keeps reading for a while, so a caller still writing
// its request is not stalled by flow control.
func (s *Service) drain(st network.Stream, r *bufio.Reader) {
	st.CloseWrite()
	st.SetReadDeadline(time.Now().Add(s.cfg.timeout))
	io.Copy(io.Discard, io.LimitReader(r, 2*int64(s.cfg.requestLimit())))
	st.Close()
}

// answerResult is how answer left the stream.
type answerResult int

const (
	answered   answerResult = iota // answered in full; the stream is intact
	unreadable                     // the request could not be read: drain and close
	overloaded                     // refused unread by the resource manager: close
	broken                         // reset (the caller left, or the deadline passed)
)

// answer admits and runs the call c whose request frame is raw (or the
// error reading it), and answers it. watch runs in its own goroutine while
// the handler does: it cancels the call when the caller goes, and returns
// at the latest when ended is closed, after the handler; watched is closed
// when it has returned.
func (s *Service) answer(st network.Stream, c *Call, raw []byte, err error, watch func(cancel context.CancelCauseFunc, ended <-chan struct{})) (res answerResult, watched chan struct{}) {
	watched = make(chan struct{})
	started := false
	defer func() {
		if !started {
			close(watched)
		}
	}()
	if err == nil {
		// The request stays in memory until the call ends: its bytes are
		// reserved in the stream's scope until then.
		defer st.Scope().ReleaseMemory(len(raw))
		if !parseRequest(raw, &c.Request) {
			// Reset what a partial parse set: its Input is a part of raw,
			// which json.RawMessage's decoding would write into.
			c.Request = protocol.CallRequest{}
			if err = json.Unmarshal(raw, &c.Request); err != nil {
				err = fmt.Errorf("bad frame: %w", err)
			}
		}
	}
	if errors.Is(err, network.ErrResourceLimitExceeded) {
		c.Fail(protocol.Errorf(protocol.CodeOverloaded, "no room for the request: %v", err))
		return overloaded, watched
	}
	if err != nil {
		c.Fail(protocol.Errorf(protocol.CodeBadRequest, "unreadable request: %v", err))
		return unreadable, watched
	}
	if err := checkRequest(&c.Request, s.cfg.limits.MaxSize); err != nil {
		c.Fail(err)
		return answered, watched
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		c.Fail(protocol.Errorf(protocol.CodeOverloaded, "%d calls in flight", cap(s.slots)))
		return answered, watched
	}
	if !s.enterPeer(c.From) {
		c.Fail(protocol.Errorf(protocol.CodeOverloaded, "%d calls in flight from %s", s.cfg.maxPerPeer, c.From))
		return answered, watched
	}
	defer s.leavePeer(c.From)

	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	if c.Request.Deadline > 0 {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, time.UnixMilli(c.Request.Deadline))
		defer cancelDeadline()
	}
	ended := make(chan struct{})
	defer close(ended) // before cancel(nil): the watcher is told the call ended
	started = true
	go func() {
		defer close(watched)
		watch(cancel, ended)
	}()
	stop := context.AfterFunc(ctx, func() { st.Reset() }) // unblocks writes to a caller that left
	s.handler.ServeCall(ctx, c)
	if !c.done {
		e := protocol.Errorf(protocol.CodeInternal, "handler ended without an answer")
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e = ctxError(ctx)
		}
		c.Fail(e)
	}
	if !stop() {
		return broken, watched
	}
	return answered, watched
}

// enterPeer counts a call from p, unless p has maxPerPeer in flight
// already (so one peer cannot take every slot).
func (s *Service) enterPeer(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perPeer[p] >= s.cfg.maxPerPeer {
		return false
	}
	s.perPeer[p]++
	return true
}

func (s *Service) leavePeer(p peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perPeer[p]--; s.perPeer[p] <= 0 {
		delete(s.perPeer, p)
	}
}

// errCallerGone is the cancellation cause when the caller goes away.
var errCallerGone = errors.New("caller cancelled")

// checkRequest checks a request read from the wire.
func checkRequest(r *protocol.CallRequest, maxInput int) *protocol.CallError {
	if err := protocol.CheckName(r.Name); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if err := protocol.ValidateMeta(r.Meta); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	for k := range r.Meta {
		if protocol.IsLocalMeta(k) {
			return protocol.Errorf(protocol.CodeBadRequest, "meta key %q is local and must not be sent", k)
		}
	}
	if len(r.Input) > maxInput {
		return protocol.Errorf(protocol.CodeBadRequest, "input of %d bytes, limit %d", len(r.Input), maxInput)
	}
	if r.Deadline < 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "negative deadline")
	}
	return nil
}

// ErrAnswered is returned when a Call is written to after its final or
// error frame.
var ErrAnswered = errors.New("call already answered")

// ErrNotStream is returned by Delta for a unary call.
var ErrNotStream = errors.New("not a stream call")

// Call is one incoming call: the request and the way to answer it. Its
// methods are not safe for concurrent use.
type Call struct {
	From    peer.ID
	Request protocol.CallRequest

	st      network.Stream
	w       *bufio.Writer
	seq     uint64
	buf     []byte // a frame being encoded
	started bool
	done    bool
	// answered is done, for the goroutine that reads a kept stream.
	answered atomic.Bool
}

// Started tells a stream caller that the handler has begun. It is sent at
// most once, before the first delta (Delta sends it if needed); for a
// unary call it does nothing.
func (c *Call) Started() error {
	if !c.Request.Stream || c.started {
		return nil
	}
	c.started = true
	return c.write(protocol.CallFrame{Kind: protocol.FrameStarted}, false)
}

// Delta sends one delta of a stream call. It is buffered: call Flush
// before waiting for the next delta, or let Final flush.
func (c *Call) Delta(data json.RawMessage) error {
	if !c.Request.Stream {
		return ErrNotStream
	}
	if err := c.Started(); err != nil {
		return err
	}
	return c.write(protocol.CallFrame{Kind: protocol.FrameDelta, Data: data}, false)
}

// Final answers the call with its result and the response's meta.
func (c *Call) Final(data json.RawMessage, meta map[string]string) error {
	if err := c.Started(); err != nil {
		return err
	}
	return c.write(protocol.CallFrame{Kind: protocol.FrameFinal, Data: data, Meta: meta}, true)
}

// Fail answers the call with a typed error.
func (c *Call) Fail(e *protocol.CallError) error {
	return c.write(protocol.CallFrame{Kind: protocol.FrameError, Error: e}, true)
}

// Flush sends buffered frames.
func (c *Call) Flush() error { return c.w.Flush() }

func (c *Call) write(f protocol.CallFrame, last bool) error {
	if c.done {
		return ErrAnswered
	}
	f.Seq = c.seq
	c.seq++
	if last {
		c.done = true
		c.answered.Store(true) // before the frame can reach the caller
	}
	if err := c.writeFrame(&f); err != nil {
		return err
	}
	if last {
		return c.w.Flush()
	}
	return nil
}

// writeFrame writes f, buffered. A frame of seq, kind and data only (every
// delta) is encoded without reflection, into a buffer the call keeps.
func (c *Call) writeFrame(f *protocol.CallFrame) error {
	if f.Meta == nil && f.Error == nil {
		b, err := framejson.AppendFrame(c.buf[:0], f.Seq, f.Kind, f.Data)
		if err == nil {
			c.buf = b
			return frame.Write(c.w, b)
		}
		if !errors.Is(err, framejson.ErrKind) {
			return err
		}
	}
	return frame.WriteJSON(c.w, f)
}

// Call opens a call to peer to. The request's deadline is taken from ctx
// when not set. Failures are *protocol.CallError: unreachable when no
// stream could be opened. Read the answer with Stream.Next; Close the
// stream (or cancel ctx) to cancel the call.
func (s *Service) Call(ctx context.Context, to peer.ID, req protocol.CallRequest) (*Stream, error) {
	if d, ok := ctx.Deadline(); ok && req.Deadline == 0 {
		req.Deadline = d.UnixMilli()
	}
	if err := checkRequest(&req, s.cfg.limits.MaxSize); err != nil {
		return nil, err
	}
	for {
		cc := s.takeIdle(to)
		reused := cc != nil
		if !reused {
			var err error
			if cc, err = s.open(ctx, to); err != nil {
				return nil, err
			}
		}
		stop := context.AfterFunc(ctx, func() { cc.st.Reset() }) // also while the request is written
		err := frame.WriteJSON(cc.w, req)
		if err == nil {
			err = cc.w.Flush()
		}
		if err == nil {
			return &Stream{ctx: ctx, svc: s, cc: cc, st: cc.st, r: cc.r, limit: s.cfg.frameLimit(), deadline: req.Deadline, stop: stop}, nil
		}
		stop()
		cc.st.Reset()
		if ctx.Err() != nil {
			return nil, ctxError(ctx)
		}
		if !reused { // a kept stream that broke while idle: the request did not go; try another
			return nil, protocol.Errorf(protocol.CodeUnreachable, "%s: send request: %v", to, err)
		}
	}
}

// callConn is a call stream on the caller's side, with its buffers: kept
// between calls when the callee speaks protocol.CallKeepProtocol.
type callConn struct {
	st    network.Stream
	r     *bufio.Reader
	w     *bufio.Writer
	keep  bool
	since time.Time // idle since
}

// maxIdlePerPeer bounds the kept streams idle to one peer; keepReuse is
// how long one may stay idle and still be used, well under the callee's
// protocol.CallKeepIdle, so that a callee's closing an idle stream and a
// caller's reusing it do not cross.
// keepMargin is how far from its request's deadline a call must end for
// its stream to be kept: more than the clocks of two nodes are expected
// to differ.
const (
	maxIdlePerPeer = 8
	keepReuse      = protocol.CallKeepIdle / 3
	keepMargin     = 2 * time.Second
)

// open opens a call stream to peer to.
func (s *Service) open(ctx context.Context, to peer.ID) (*callConn, error) {
	// A relayed connection will do until hole punching replaces it.
	st, err := s.h.NewStream(network.WithAllowLimitedConn(ctx, "weft-call"), to, protocol.CallKeepProtocol, protocol.CallProtocol)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx)
		}
		return nil, protocol.Errorf(protocol.CodeUnreachable, "%s: %v", to, err)
	}
	if err := st.Scope().SetService(ServiceName); err != nil {
		st.Reset()
		return nil, protocol.Errorf(protocol.CodeOverloaded, "too many calls to %s: %v", to, err)
	}
	return &callConn{st: st, r: bufio.NewReader(st), w: bufio.NewWriter(st), keep: st.Protocol() == protocol.CallKeepProtocol}, nil
}

// takeIdle returns a kept stream to peer to that is still open, or nil.
func (s *Service) takeIdle(to peer.ID) *callConn {
	for {
		s.mu.Lock()
		ccs := s.idle[to]
		if len(ccs) == 0 {
			s.mu.Unlock()
			return nil
		}
		cc := ccs[len(ccs)-1]
		ccs[len(ccs)-1] = nil
		if ccs = ccs[:len(ccs)-1]; len(ccs) == 0 {
			delete(s.idle, to)
		} else {
			s.idle[to] = ccs
		}
		s.mu.Unlock()
		if time.Since(cc.since) < keepReuse && cc.open() {
			return cc
		}
		cc.st.Close()
	}
}

// open reports whether the callee has neither closed nor reset the
// stream, and sent nothing on it, since its last call: a read that must
// not wait finds nothing to read.
func (cc *callConn) open() bool {
	if cc.r.Buffered() > 0 || cc.st.SetReadDeadline(time.Now().Add(-time.Second)) != nil {
		return false
	}
	_, err := cc.r.Peek(1)
	var ne net.Error
	ok := errors.As(err, &ne) && ne.Timeout()
	return cc.st.SetReadDeadline(time.Time{}) == nil && ok
}

// putIdle keeps cc, whose call has ended, for the next call to its peer.
func (s *Service) putIdle(cc *callConn) {
	to := cc.st.Conn().RemotePeer()
	cc.since = time.Now()
	s.mu.Lock()
	if s.closed || len(s.idle[to]) >= maxIdlePerPeer {
		s.mu.Unlock()
		cc.st.Close()
		return
	}
	s.idle[to] = append(s.idle[to], cc)
	s.mu.Unlock()
}

// Invoke makes a unary call and returns its final frame, or the call's
// error as a *protocol.CallError.
func (s *Service) Invoke(ctx context.Context, to peer.ID, req protocol.CallRequest) (*protocol.CallFrame, error) {
	req.Stream = false
	cs, err := s.Call(ctx, to, req)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	for {
		f, err := cs.Next()
		if err != nil {
			return nil, err
		}
		switch f.Kind {
		case protocol.FrameFinal:
			return f, nil
		case protocol.FrameError:
			return nil, f.Error
		}
	}
}

// Stream is the answer to a call, read frame by frame.
type Stream struct {
	ctx   context.Context
	svc   *Service
	cc    *callConn
	st    network.Stream
	r     *bufio.Reader
	limit int
	stop  func() bool
	seq   uint64
	done  bool
	err   error
	// deadline is the request's (Unix ms, 0 = none): the callee ends the
	// call then, by resetting the stream.
	deadline int64
}

// Next returns the next frame. After the final or error frame it returns
// io.EOF. A broken stream, a cancelled ctx or a frame out of order is a
// *protocol.CallError.
func (cs *Stream) Next() (*protocol.CallFrame, error) {
	if cs.done {
		return nil, io.EOF
	}
	if cs.err != nil {
		return nil, cs.err
	}
	if err := cs.ctx.Err(); err != nil { // not the frames still buffered
		return nil, cs.fail(err)
	}
	b, err := frame.Read(cs.r, cs.limit)
	if errors.Is(err, frame.ErrTooLarge) {
		err = protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if err != nil {
		return nil, cs.fail(err)
	}
	var f protocol.CallFrame
	if seq, kind, data, ok := framejson.ParseFrame(b); ok { // a delta, say: no reflection
		f = protocol.CallFrame{Seq: seq, Kind: kind, Data: data}
	} else if err := json.Unmarshal(b, &f); err != nil {
		return nil, cs.fail(protocol.Errorf(protocol.CodeBadRequest, "bad frame: %v", err))
	}
	if err := checkFrame(&f, cs.seq); err != nil {
		return nil, cs.fail(err)
	}
	cs.seq++
	if f.Kind == protocol.FrameFinal || f.Kind == protocol.FrameError {
		cs.done = true
		cs.finish()
	}
	return &f, nil
}

// Buffered reports whether a frame's bytes are already buffered, so Next
// would likely not block. Once the answer has ended it is false: the
// stream may carry another call by then.
func (cs *Stream) Buffered() bool { return !cs.done && cs.r.Buffered() > 0 }

// Close ends the call: if its answer has not ended, the call is cancelled.
func (cs *Stream) Close() error {
	if !cs.done {
		cs.done = true
		cs.stop()
		return cs.st.Reset()
	}
	return nil
}

// finish ends a call whose answer ended: its stream is kept for the next
// call if the callee keeps it, it is in step, and the answer did not come
// near the request's deadline. The callee resets the stream when the
// deadline passes, which may be just after it wrote the answer: such a
// stream would break under the next call.
func (cs *Stream) finish() {
	nearDeadline := cs.deadline > 0 && time.Until(time.UnixMilli(cs.deadline)) < keepMargin
	if cs.stop() && cs.cc.keep && cs.r.Buffered() == 0 && !nearDeadline {
		cs.svc.putIdle(cs.cc)
		return
	}
	cs.st.Close()
}

func (cs *Stream) fail(err error) error {
	cs.stop()
	cs.st.Reset()
	switch {
	case cs.ctx.Err() != nil:
		cs.err = ctxError(cs.ctx)
	case errors.As(err, new(*protocol.CallError)):
		cs.err = err
	case cs.deadline > 0 && time.Now().UnixMilli() >= cs.deadline:
		// The callee reset the stream at the request's deadline, which
		// may come before ctx's own (or ctx has none).
		cs.err = protocol.Errorf(protocol.CodeDeadline, "deadline exceeded")
	default:
		cs.err = protocol.Errorf(protocol.CodeUnreachable, "call stream broke: %v", err)
	}
	return cs.err
}

// checkFrame checks a frame read from the wire against the seq expected.
func checkFrame(f *protocol.CallFrame, seq uint64) error {
	if f.Seq != seq {
		return protocol.Errorf(protocol.CodeBadRequest, "frame seq %d, want %d", f.Seq, seq)
	}
	switch f.Kind {
	case protocol.FrameStarted, protocol.FrameDelta, protocol.FrameFinal:
	case protocol.FrameError:
		if f.Error == nil || f.Error.Code == "" {
			return protocol.Errorf(protocol.CodeBadRequest, "error frame without an error")
		}
	default:
		return protocol.Errorf(protocol.CodeBadRequest, "unknown frame kind %q", f.Kind)
	}
	return nil
}

// ctxError maps ctx's end to a typed error.
func ctxError(ctx context.Context) *protocol.CallError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return protocol.Errorf(protocol.CodeDeadline, "deadline exceeded")
	}
	return protocol.Errorf(protocol.CodeCancelled, "%v", context.Cause(ctx))
}

// ErrorOf returns err as a *protocol.CallError, wrapping other errors as
// internal ones.
func ErrorOf(err error) *protocol.CallError {
	var ce *protocol.CallError
	if errors.As(err, &ce) {
		return ce
	}
	return protocol.Errorf(protocol.CodeInternal, "%v", err)
}
