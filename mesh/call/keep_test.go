package call

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// streamIDs is a handler that answers every call (stream calls with one
// delta) and reports the ID of the stream each came on.
func streamIDs(ids chan<- string) HandlerFunc {
	return func(ctx context.Context, c *Call) {
		ids <- c.st.ID()
		if c.Request.Stream {
			c.Delta(json.RawMessage(`1`))
		}
		c.Final(c.Request.Input, nil)
	}
}

// Calls one after another to a callee that speaks CallKeepProtocol come on
// one stream, unary and stream calls alike, each answered in full.
func TestKeptStreamCarriesCalls(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			ids := make(chan string, 10)
			p := newPairOn(t, tr.addr, streamIDs(ids))
			ctx := callCtx(t, 10*time.Second)
			var first string
			for i := range 6 {
				in := json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)
				if i%2 == 1 {
					cs, err := p.caller.Call(ctx, p.b.ID(), protocol.CallRequest{Name: "s", Input: in, Stream: true})
					if err != nil {
						t.Fatal(err)
					}
					kinds, err := frameKinds(cs)
					if err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
					if len(kinds) != 3 || kinds[2] != protocol.FrameFinal {
						t.Fatalf("call %d: frames %v, want started, delta, final", i, kinds)
					}
				} else {
					f, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "u", Input: in})
					if err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
					if string(f.Data) != string(in) {
						t.Fatalf("call %d answered %s, want %s", i, f.Data, in)
					}
				}
				id := <-ids
				if i == 0 {
					first = id
				} else if id != first {
					t.Fatalf("call %d came on stream %s, the first on %s", i, id, first)
				}
			}
		})
	}
}

// A callee that speaks only CallProtocol (an older node) serves every
// call, each on a stream of its own.
func TestCalleeWithoutKeep(t *testing.T) {
	t.Parallel()
	ids := make(chan string, 10)
	p := newPair(t, streamIDs(ids))
	p.b.RemoveStreamHandler(protocol.CallKeepProtocol)
	waitFor(t, 5*time.Second, "the caller to learn the callee's protocols", func() bool {
		ps, err := p.a.Peerstore().SupportsProtocols(p.b.ID(), protocol.CallKeepProtocol)
		return err == nil && len(ps) == 0
	})
	ctx := callCtx(t, 10*time.Second)
	seen := map[string]bool{}
	for i := range 3 {
		if _, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "u", Input: json.RawMessage(`1`)}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		seen[<-ids] = true
	}
	if len(seen) != 3 {
		t.Errorf("3 calls came on %d streams, want one each", len(seen))
	}
	p.caller.mu.Lock()
	defer p.caller.mu.Unlock()
	if n := len(p.caller.idle[p.b.ID()]); n != 0 {
		t.Errorf("%d streams kept to a callee that does not keep them", n)
	}
}

// A kept stream the callee closed while it was idle (here: the callee's
// service closed and a new one took its place) is not used again: the
// next call opens a new stream and is served.
func TestKeptStreamClosedByCallee(t *testing.T) {
	t.Parallel()
	ids := make(chan string, 10)
	p := newPair(t, streamIDs(ids))
	ctx := callCtx(t, 10*time.Second)
	if _, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "u"}); err != nil {
		t.Fatal(err)
	}
	first := <-ids
	p.caller.mu.Lock()
	kept := p.caller.idle[p.b.ID()]
	p.caller.mu.Unlock()
	if len(kept) != 1 {
		t.Fatalf("%d streams kept after a call, want 1", len(kept))
	}
	p.callee.Close()
	newService(t, p.b, streamIDs(ids))
	waitFor(t, 5*time.Second, "the kept stream to be closed by the callee", func() bool {
		kept[0].st.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := kept[0].r.Peek(1)
		kept[0].st.SetReadDeadline(time.Time{})
		return errors.Is(err, io.EOF) || errors.Is(err, network.ErrReset)
	})
	f, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "u", Input: json.RawMessage(`2`)})
	if err != nil {
		t.Fatalf("the call after the callee closed its kept stream: %v", err)
	}
	if string(f.Data) != "2" {
		t.Errorf("answered %s", f.Data)
	}
	if id := <-ids; id == first {
		t.Errorf("the call came on the closed stream %s", id)
	}
}

// On a kept stream, by hand: a second request after the first's final
// frame is served with seq from 0; the caller closing its side ends the
// stream; a request written while a call is answered is a protocol error
// that cancels the call and resets the stream.
func TestKeptStreamByHand(t *testing.T) {
	t.Parallel()
	cancelled := make(chan error, 1)
	p := newPair(t, HandlerFunc(func(ctx context.Context, c *Call) {
		if c.Request.Name == "wait" {
			c.Started()
			c.Flush()
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return
		}
		c.Final(c.Request.Input, nil)
	}))
	st, err := p.a.NewStream(callCtx(t, 10*time.Second), p.b.ID(), protocol.CallKeepProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	cc := &callConn{st: st}
	cc.r, cc.w = newRW(st)
	for i, in := range []string{`1`, `2`} {
		if err := frame.WriteJSON(cc.w, protocol.CallRequest{Name: "echo", Input: json.RawMessage(in)}); err != nil || cc.w.Flush() != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		f := readFrame(t, cc.r)
		if f.Seq != 0 || f.Kind != protocol.FrameFinal || string(f.Data) != in {
			t.Fatalf("answer %d = %+v, want final %s with seq 0", i, f, in)
		}
	}
	// A request during a call's answer.
	if err := frame.WriteJSON(cc.w, protocol.CallRequest{Name: "wait", Stream: true}); err != nil || cc.w.Flush() != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, cc.r); f.Kind != protocol.FrameStarted {
		t.Fatalf("frame %+v, want started", f)
	}
	if err := frame.WriteJSON(cc.w, protocol.CallRequest{Name: "echo"}); err != nil || cc.w.Flush() != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, errCallerGone) {
			t.Errorf("handler's cause %v, want %v", err, errCallerGone)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not cancelled")
	}
	if _, err := io.ReadAll(cc.r); err == nil {
		t.Error("the stream ended cleanly, want a reset")
	}

	// The caller closing its side between calls ends the stream cleanly.
	st2, err := p.a.NewStream(callCtx(t, 10*time.Second), p.b.ID(), protocol.CallKeepProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Reset()
	st2.SetDeadline(time.Now().Add(10 * time.Second))
	r2, w2 := newRW(st2)
	if err := frame.WriteJSON(w2, protocol.CallRequest{Name: "echo", Input: json.RawMessage(`3`)}); err != nil || w2.Flush() != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, r2); f.Kind != protocol.FrameFinal {
		t.Fatalf("frame %+v, want final", f)
	}
	st2.CloseWrite()
	if rest, err := io.ReadAll(r2); err != nil || len(rest) != 0 {
		t.Errorf("after the caller's close: %q, %v; want a clean end", rest, err)
	}
}

// A Stream whose answer has ended does not touch its kept stream, which
// the next call may be using: run under -race.
func TestEndedStreamLeavesKeptStreamAlone(t *testing.T) {
	t.Parallel()
	ids := make(chan string, 10)
	p := newPair(t, streamIDs(ids))
	ctx := callCtx(t, 10*time.Second)
	cs, err := p.caller.Call(ctx, p.b.ID(), protocol.CallRequest{Name: "u"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := cs.Next(); err != nil || f.Kind != protocol.FrameFinal {
		t.Fatalf("frame %+v, %v", f, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.caller.Invoke(ctx, p.b.ID(), protocol.CallRequest{Name: "u"})
		done <- err
	}()
	for range 1000 {
		if cs.Buffered() {
			t.Fatal("an ended call has frames buffered")
		}
	}
	if _, err := cs.Next(); err != io.EOF {
		t.Errorf("Next after the answer: %v, want io.EOF", err)
	}
	cs.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a, b := <-ids, <-ids; a != b {
		t.Errorf("the second call came on stream %s, the first on %s: want the kept one", b, a)
	}
}
