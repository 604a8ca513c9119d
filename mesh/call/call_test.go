package call

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
)

// A unary call carries the input and meta to the handler, which sees the
// caller's peer ID, and the final frame's data and meta back.
func TestInvokeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			type seen struct {
				from     peer.ID
				req      protocol.CallRequest
				deadline time.Time
			}
			got := make(chan seen, 1)
			p := newPairOn(t, tr.addr, HandlerFunc(func(ctx context.Context, c *Call) {
				d, _ := ctx.Deadline()
				got <- seen{from: c.From, req: c.Request, deadline: d}
				var in map[string]any
				if err := json.Unmarshal(c.Request.Input, &in); err != nil {
					c.Fail(protocol.Errorf(protocol.CodeBadRequest, "%v", err))
					return
				}
				out := mustJSON(t, map[string]any{"echo": in, "name": c.Request.Name})
				if err := c.Final(out, protocol.Inherit(c.Request.Meta, map[string]string{"served-by": "b"}, false)); err != nil {
					t.Errorf("Final: %v", err)
				}
			}))
			ctx := callCtx(t, 10*time.Second)
			ctxDeadline, _ := ctx.Deadline()
			req := protocol.CallRequest{
				Name:  "echo/v1",
				Input: json.RawMessage(`{"text":"hello","n":3}`),
				Meta:  map[string]string{protocol.MetaSession: "s1", protocol.MetaCorrelation: "c1"},
			}
			f, err := p.caller.Invoke(ctx, p.b.ID(), req)
			if err != nil {
				t.Fatal(err)
			}
			s := <-got
			if s.from != p.a.ID() {
				t.Errorf("handler saw From %s, want the caller %s", s.from, p.a.ID())
			}
			if s.req.Name != req.Name || !bytes.Equal(s.req.Input, req.Input) || s.req.Stream {
				t.Errorf("handler saw request %+v, want %+v", s.req, req)
			}
			if s.req.Meta[protocol.MetaSession] != "s1" || s.req.Meta[protocol.MetaCorrelation] != "c1" {
				t.Errorf("handler saw meta %v", s.req.Meta)
			}
			if s.req.Deadline != ctxDeadline.UnixMilli() || s.deadline.IsZero() || s.deadline.After(ctxDeadline) {
				t.Errorf("request deadline %d, handler ctx deadline %v; caller's ctx deadline %v", s.req.Deadline, s.deadline, ctxDeadline)
			}
			if f.Kind != protocol.FrameFinal || f.Seq != 0 || f.Error != nil {
				t.Fatalf("got frame %+v, want final seq 0", f)
			}
			var out struct {
				Echo map[string]any `json:"echo"`
				Name string         `json:"name"`
			}
			if err := json.Unmarshal(f.Data, &out); err != nil {
				t.Fatal(err)
			}
			if out.Name != req.Name || out.Echo["text"] != "hello" || out.Echo["n"] != 3.0 {
				t.Errorf("final data %s", f.Data)
			}
			want := map[string]string{protocol.MetaSession: "s1", protocol.MetaCorrelation: "c1", "served-by": "b"}
			if fmt.Sprint(f.Meta) != fmt.Sprint(want) {
				t.Errorf("final meta %v, want %v", f.Meta, want)
			}
		})
	}
}

// A stream of 10,000 deltas arrives complete and in order, after started
// and before final.
func TestStreamInOrder(t *testing.T) {
	t.Parallel()
	const n = 10_000
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			p := newPairOn(t, tr.addr, HandlerFunc(func(ctx context.Context, c *Call) {
				if !c.Request.Stream {
					c.Fail(protocol.Errorf(protocol.CodeBadRequest, "want a stream call"))
					return
				}
				for i := range n {
					if err := c.Delta(fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
						return
					}
				}
				c.Final(json.RawMessage(`{"done":true}`), nil)
			}))
			cs, err := p.caller.Call(callCtx(t, 30*time.Second), p.b.ID(), protocol.CallRequest{Name: "count", Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			f, err := cs.Next()
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != protocol.FrameStarted || f.Seq != 0 {
				t.Fatalf("first frame %+v, want started seq 0", f)
			}
			for i := range n {
				f, err := cs.Next()
				if err != nil {
					t.Fatalf("delta %d: %v", i, err)
				}
				var d struct{ I int }
				if f.Kind != protocol.FrameDelta || f.Seq != uint64(i+1) || json.Unmarshal(f.Data, &d) != nil || d.I != i {
					t.Fatalf("frame %d: %+v (data %s), want delta seq %d with i=%d", i+1, f, f.Data, i+1, i)
				}
			}
			f, err = cs.Next()
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != protocol.FrameFinal || f.Seq != n+1 || string(f.Data) != `{"done":true}` {
				t.Fatalf("last frame %+v, want final seq %d", f, n+1)
			}
			if _, err := cs.Next(); err != io.EOF {
				t.Fatalf("after final: %v, want io.EOF", err)
			}
		})
	}
}

// A caller that does not read holds the handler back: the handler blocks
// in Delta after a window's worth of frames instead of buffering the whole
// answer, and goes on when the caller reads. Nothing is lost.
func TestBackPressure(t *testing.T) {
	t.Parallel()
	const (
		total = 200 // deltas of 64 KiB: 12.5 MiB in all
		size  = 64 << 10
	)
	pad := strings.Repeat("x", size)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			var written atomic.Int64
			p := newPairOn(t, tr.addr, HandlerFunc(func(ctx context.Context, c *Call) {
				for i := range total {
					if err := c.Delta(fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, pad)); err != nil {
						return
					}
					if err := c.Flush(); err != nil {
						return
					}
					written.Add(1)
				}
				c.Final(nil, nil)
			}))
			cs, err := p.caller.Call(callCtx(t, time.Minute), p.b.ID(), protocol.CallRequest{Name: "big", Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()

			// Wait until the handler has made no progress for a while.
			stalled := waitStall(t, &written, 300*time.Millisecond, 20*time.Second)
			t.Logf("%s: handler stalled after %d of %d deltas (%d KiB)", tr.name, stalled, total, stalled*size>>10)
			if stalled == 0 || stalled >= total/4 {
				t.Fatalf("handler wrote %d of %d deltas to a caller that reads nothing; want it blocked early", stalled, total)
			}

			f, err := cs.Next()
			if err != nil || f.Kind != protocol.FrameStarted {
				t.Fatalf("first frame %+v, %v", f, err)
			}
			for i := range total {
				f, err := cs.Next()
				if err != nil {
					t.Fatalf("delta %d: %v", i, err)
				}
				var d struct {
					I   int
					Pad string
				}
				if f.Kind != protocol.FrameDelta || json.Unmarshal(f.Data, &d) != nil || d.I != i || len(d.Pad) != size {
					t.Fatalf("frame %d: kind %s seq %d, i=%d, %d bytes of pad", i+1, f.Kind, f.Seq, d.I, len(d.Pad))
				}
			}
			if f, err := cs.Next(); err != nil || f.Kind != protocol.FrameFinal {
				t.Fatalf("last frame %+v, %v", f, err)
			}
			if got := written.Load(); got != total {
				t.Fatalf("handler wrote %d deltas, want %d", got, total)
			}
		})
	}
}

// waitStall polls n until it has not changed for quiet, failing after
// limit, and returns its value then.
func waitStall(tb testing.TB, n *atomic.Int64, quiet, limit time.Duration) int64 {
	tb.Helper()
	deadline := time.Now().Add(limit)
	last, since := n.Load(), time.Now()
	for {
		time.Sleep(10 * time.Millisecond)
		if v := n.Load(); v != last {
			last, since = v, time.Now()
		} else if v > 0 && time.Since(since) >= quiet {
			return v
		}
		if time.Now().After(deadline) {
			tb.Fatalf("still at %d after %s: the handler never stalled", last, limit)
		}
	}
}

// Closing the stream or cancelling ctx mid-stream ends the handler's
// context with the caller-gone cause, and the handler stops.
func TestCancel(t *testing.T) {
	t.Parallel()
	userGaveUp := errors.New("user gave up")
	cases := []struct {
		name   string
		cancel func(cs *Stream, cancel context.CancelCauseFunc)
		code   string // of the caller's next Next; "" for io.EOF
	}{
		{"close", func(cs *Stream, _ context.CancelCauseFunc) { cs.Close() }, ""},
		{"ctx cancel", func(_ *Stream, cancel context.CancelCauseFunc) { cancel(userGaveUp) }, protocol.CodeCancelled},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				testCancel(t, tr.addr, tc.cancel, tc.code, userGaveUp)
			})
		}
	}
}

func testCancel(t *testing.T, addr string, cancelCall func(*Stream, context.CancelCauseFunc), code string, userGaveUp error) {
	var produced atomic.Int64
	ended := make(chan error, 1)
	p := newPairOn(t, addr, HandlerFunc(func(ctx context.Context, c *Call) {
		for ctx.Err() == nil {
			if c.Delta(json.RawMessage(`{"tick":true}`)) != nil || c.Flush() != nil {
				break
			}
			produced.Add(1)
		}
		select { // a write can fail on the reset before ctx ends
		case <-ctx.Done():
			ended <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			ended <- errors.New("handler ctx did not end")
		}
	}))
	ctx, cancel := context.WithCancelCause(callCtx(t, 20*time.Second))
	defer cancel(nil)
	cs, err := p.caller.Call(ctx, p.b.ID(), protocol.CallRequest{Name: "ticks", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := cs.Next(); err != nil {
			t.Fatal(err)
		}
	}
	cancelCall(cs, cancel)
	var cause error
	waitFor(t, 10*time.Second, "the handler to end", func() bool {
		select {
		case cause = <-ended:
			return true
		default:
			return false
		}
	})
	if !errors.Is(cause, errCallerGone) {
		t.Fatalf("handler ctx cause %v, want %v", cause, errCallerGone)
	}
	waitFor(t, 10*time.Second, "no active calls", func() bool { return p.callee.Active() == 0 })
	t.Logf("the handler produced %d deltas, then stopped", produced.Load())
	_, err = cs.Next()
	if code == "" {
		if err != io.EOF {
			t.Fatalf("Next after Close: %v, want io.EOF", err)
		}
	} else if ce := wantCode(t, err, code); !strings.Contains(ce.Message, userGaveUp.Error()) {
		t.Fatalf("cancelled error %q does not carry the cause %q", ce.Message, userGaveUp)
	}
	cs.Close()
}

// A deadline in the request ends the handler's context, and the caller
// gets deadline_exceeded, whether the deadline came from its ctx or only
// from the request.
func TestDeadline(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// callerMayWin: the caller's ctx ends at the same time as the
		// request's deadline, so the handler's ctx may end because the
		// caller left (and reset) rather than by the deadline.
		callerMayWin bool
		call         func(s *Service, to peer.ID) error
	}{
		{"ctx deadline", true, func(s *Service, to peer.ID) error {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := s.Invoke(ctx, to, protocol.CallRequest{Name: "slow"})
			return err
		}},
		{"request deadline", false, func(s *Service, to peer.ID) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // only so that a hang fails
			defer cancel()
			d := time.Now().Add(50 * time.Millisecond).UnixMilli()
			_, err := s.Invoke(ctx, to, protocol.CallRequest{Name: "slow", Deadline: d})
			return err
		}},
		{"stream call, request deadline", false, func(s *Service, to peer.ID) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d := time.Now().Add(50 * time.Millisecond).UnixMilli()
			cs, err := s.Call(ctx, to, protocol.CallRequest{Name: "slow", Deadline: d, Stream: true})
			if err != nil {
				return err
			}
			defer cs.Close()
			for {
				f, err := cs.Next()
				if err != nil {
					return err
				}
				if f.Kind == protocol.FrameError {
					return f.Error
				}
			}
		}},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				testDeadline(t, tr.addr, tc.callerMayWin, tc.call)
			})
		}
	}
}

func testDeadline(t *testing.T, addr string, callerMayWin bool, call func(s *Service, to peer.ID) error) {
	causes := make(chan error, 100)
	p := newPairOn(t, addr, HandlerFunc(func(ctx context.Context, c *Call) {
		c.Started()
		c.Flush()
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			causes <- errors.New("handler ctx did not end")
		}
		// Returns without answering: too late anyway.
	}))
	// The callee's deadline (whole ms) may fire just before the
	// caller's: repeat to catch a race between the two.
	for range 10 {
		wantCode(t, call(p.caller, p.b.ID()), protocol.CodeDeadline)
		var cause error
		select {
		case cause = <-causes:
		case <-time.After(10 * time.Second):
			if callerMayWin {
				// The caller gave up (its ctx, 50 ms) before the callee
				// read the request, as a loaded machine can make it:
				// the handler never ran, and that is no failure.
				continue
			}
			t.Fatal("the handler never saw the call")
		}
		if callerMayWin && errors.Is(cause, errCallerGone) {
			continue
		}
		if !errors.Is(cause, context.DeadlineExceeded) {
			t.Fatalf("handler ctx cause %v, want deadline exceeded", cause)
		}
	}
}

// Calls fail with typed errors.
func TestErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler Handler // nil: none
		code    string
	}{
		{"no handler", nil, protocol.CodeNoHandler},
		{"no answer", HandlerFunc(func(context.Context, *Call) {}), protocol.CodeInternal},
		{"handler failed", HandlerFunc(func(_ context.Context, c *Call) {
			c.Fail(protocol.Errorf(protocol.CodeHandlerFailed, "tool crashed"))
		}), protocol.CodeHandlerFailed},
		{"started then no answer", HandlerFunc(func(_ context.Context, c *Call) {
			c.Delta(json.RawMessage(`1`))
		}), protocol.CodeInternal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, tc.handler)
			for _, stream := range []bool{false, true} {
				cs, err := p.caller.Call(callCtx(t, 5*time.Second), p.b.ID(), protocol.CallRequest{Name: "x", Stream: stream})
				if err != nil {
					t.Fatal(err)
				}
				var last *protocol.CallFrame
				for {
					f, err := cs.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("stream=%v: %v", stream, err)
					}
					last = f
				}
				if last == nil || last.Kind != protocol.FrameError {
					t.Fatalf("stream=%v: last frame %+v, want an error frame", stream, last)
				}
				wantCode(t, last.Error, tc.code)
				if !errors.Is(last.Error, &protocol.CallError{Code: tc.code}) {
					t.Fatalf("errors.Is does not match %v by code", last.Error)
				}
			}
			_, err := p.caller.Invoke(callCtx(t, 5*time.Second), p.b.ID(), protocol.CallRequest{Name: "x"})
			wantCode(t, err, tc.code)
			waitFor(t, 5*time.Second, "no active calls", func() bool { return p.callee.Active() == 0 })
		})
	}
}

// A peer that cannot be reached is unreachable, at once: the 5 s ctx only
// turns a hang into a failure (a hang would end as deadline_exceeded).
func TestUnreachable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		refusing int // addresses known for the peer, all refusing
	}{
		{"refused", 1},
		{"all refused", 3},
		{"no address", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t)
			s := newService(t, h, nil)
			var addrs []ma.Multiaddr
			for range tc.refusing {
				addrs = append(addrs, refusingAddr(t))
			}
			to := absentPeer(t, h, addrs...)
			_, err := s.Invoke(callCtx(t, 5*time.Second), to, protocol.CallRequest{Name: "x"})
			wantCode(t, err, protocol.CodeUnreachable)
		})
	}
}

// A request that cannot be sent fails the call at once as unreachable, and
// the stream is reset. (Call once dropped the error of flushing the
// request and returned a stream whose request had never left.)
func TestCallSendFails(t *testing.T) {
	t.Parallel()
	a, b := newHost(t), newHost(t)
	newService(t, b, nil)
	connect(t, a, b)
	h := &failingWrites{Host: a}
	s := newService(t, h, nil)

	st, err := s.Call(callCtx(t, 5*time.Second), b.ID(), protocol.CallRequest{Name: "x"})
	if st != nil {
		t.Errorf("Call returned a stream with %v", err)
	}
	ce := wantCode(t, err, protocol.CodeUnreachable)
	if !strings.Contains(ce.Message, "send request") {
		t.Errorf("err = %v, want it to say the request was not sent", ce)
	}
	if !h.reset.Load() {
		t.Error("the stream was not reset")
	}
}

// failingWrites is a host whose new streams fail every write.
type failingWrites struct {
	host.Host
	reset atomic.Bool // a stream was reset
}

func (h *failingWrites) NewStream(ctx context.Context, p peer.ID, pids ...libp2pprotocol.ID) (network.Stream, error) {
	st, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return &failingStream{Stream: st, reset: &h.reset}, nil
}

type failingStream struct {
	network.Stream
	reset *atomic.Bool
}

func (s *failingStream) Write([]byte) (int, error) { return 0, errors.New("write refused by the test") }

func (s *failingStream) Reset() error {
	s.reset.Store(true)
	return s.Stream.Reset()
}

// With WithMaxCalls(1), a second call while the first is being served is
// refused as overloaded; once the first ends, calls are served again.
func TestOverloaded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p := newPair(t, HandlerFunc(func(ctx context.Context, c *Call) {
		if c.Request.Name == "block" {
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
		}
		c.Final(json.RawMessage(`"ok"`), nil)
	}), WithMaxCalls(1))
	ctx := callCtx(t, 10*time.Second)
	first, err := p.caller.Call(ctx, p.b.ID(), protocol.CallRequest{Name: "block"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	waitFor(t, 5*time.Second, "the first call to be served", func() bool { return p.callee.Active() == 1 })

	_, err = p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "quick"})
	wantCode(t, err, protocol.CodeOverloaded)

	close(release)
	f, err := first.Next()
	if err != nil || f.Kind != protocol.FrameFinal {
		t.Fatalf("first call: %+v, %v", f, err)
	}
	waitFor(t, 5*time.Second, "the slot to be freed", func() bool { return p.callee.Active() == 0 })
	if _, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "quick"}); err != nil {
		t.Fatalf("after the first call ended: %v", err)
	}
}

// Calls are served concurrently: 20 calls to a handler that answers only
// once all 20 are in it at the same time (serialized, or fewer at a time,
// none would ever be answered).
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	const n = 20
	var inHandler atomic.Int32
	all := make(chan struct{})
	p := newPair(t, HandlerFunc(func(ctx context.Context, c *Call) {
		if c.Request.Name == "work" && inHandler.Add(1) == n {
			close(all)
		}
		if c.Request.Name == "work" {
			select {
			case <-all:
			case <-ctx.Done():
				return
			}
		}
		c.Final(c.Request.Input, nil)
	}))
	connectWarm(t, p)
	ctx := callCtx(t, 30*time.Second) // only so that a hang fails
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			in := fmt.Appendf(nil, "%d", i)
			f, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "work", Input: in})
			if err == nil && !bytes.Equal(f.Data, in) {
				err = fmt.Errorf("call %d answered %s", i, f.Data)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// connectWarm makes one call so that the connection and protocol are
// settled before a timed batch.
func connectWarm(tb testing.TB, p *pair) {
	tb.Helper()
	if _, err := p.caller.Invoke(callCtx(tb, 10*time.Second), p.b.ID(), protocol.CallRequest{Name: "warm", Input: json.RawMessage(`0`)}); err != nil {
		tb.Fatal(err)
	}
}

// The Call methods keep a call's frames well formed: Delta only on stream
// calls, started once, nothing after the answer.
func TestCallMethods(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 10)
	p := newPair(t, HandlerFunc(func(ctx context.Context, c *Call) {
		check := func(what string, got, want error) {
			if !errors.Is(got, want) {
				errs <- fmt.Errorf("stream=%v: %s: %v, want %v", c.Request.Stream, what, got, want)
			}
		}
		if c.Request.Stream {
			check("Started", c.Started(), nil)
			check("Started again", c.Started(), nil)
			check("Delta", c.Delta(json.RawMessage(`1`)), nil)
		} else {
			check("Started", c.Started(), nil) // nothing is sent
			check("Delta", c.Delta(json.RawMessage(`1`)), ErrNotStream)
		}
		check("Final", c.Final(json.RawMessage(`2`), nil), nil)
		check("Final again", c.Final(json.RawMessage(`3`), nil), ErrAnswered)
		check("Fail after Final", c.Fail(protocol.Errorf(protocol.CodeInternal, "late")), ErrAnswered)
		check("Delta after Final", c.Delta(json.RawMessage(`4`)), map[bool]error{true: ErrAnswered, false: ErrNotStream}[c.Request.Stream])
		errs <- nil
	}))
	cases := []struct {
		stream bool
		kinds  []string
	}{
		{false, []string{protocol.FrameFinal}},
		{true, []string{protocol.FrameStarted, protocol.FrameDelta, protocol.FrameFinal}},
	}
	for _, tc := range cases {
		cs, err := p.caller.Call(callCtx(t, 5*time.Second), p.b.ID(), protocol.CallRequest{Name: "m", Stream: tc.stream})
		if err != nil {
			t.Fatal(err)
		}
		kinds, err := frameKinds(cs)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(kinds) != fmt.Sprint(tc.kinds) {
			t.Errorf("stream=%v: frames %v, want %v", tc.stream, kinds, tc.kinds)
		}
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	bad := protocol.DefaultLimits()
	bad.MaxSize = 0
	cases := []struct {
		name string
		opt  Option
	}{
		{"zero max calls", WithMaxCalls(0)},
		{"zero timeout", WithTimeout(0)},
		{"bad limits", WithLimits(bad)},
	}
	for _, tc := range cases {
		if s, err := New(h, nil, tc.opt); err == nil {
			s.Close()
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
}

func TestErrorOf(t *testing.T) {
	t.Parallel()
	ce := protocol.Errorf(protocol.CodeOverloaded, "busy")
	cases := []struct {
		err  error
		code string
	}{
		{ce, protocol.CodeOverloaded},
		{fmt.Errorf("wrapped: %w", ce), protocol.CodeOverloaded},
		{errors.New("plain"), protocol.CodeInternal},
	}
	for _, tc := range cases {
		if got := ErrorOf(tc.err); got.Code != tc.code {
			t.Errorf("ErrorOf(%v) = %v, want code %s", tc.err, got, tc.code)
		}
	}
}
