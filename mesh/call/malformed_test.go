package call

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// Requests that are not well formed get one error frame with bad_request,
// and the callee goes on serving others.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			testMalformedRequests(t, tr.addr)
		})
	}
}

func testMalformedRequests(t *testing.T, addr string) {
	lim := protocol.DefaultLimits()
	lim.MaxSize = 1 << 10
	p := newPairOn(t, addr, HandlerFunc(func(_ context.Context, c *Call) {
		c.Final(json.RawMessage(`"ok"`), nil)
	}), WithLimits(lim), WithTimeout(2*time.Second)) // stalls cut at 2 s; room for a loaded machine
	reqLimit := lim.MaxSize + metaRoom

	framed := func(b []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(b))), b...) }
	request := func(r protocol.CallRequest) []byte {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return framed(b)
	}
	cases := []struct {
		name  string
		wire  []byte
		close bool   // close the write side after the bytes
		want  string // in the error message
	}{
		{name: "garbage", wire: framed([]byte("GET / HTTP/1.1")), want: "unreadable request"},
		{name: "not json object", wire: framed([]byte(`[1,2]`)), want: "unreadable request"},
		{name: "length overflow", wire: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, want: "unreadable request"},
		{name: "oversized frame", wire: binary.AppendUvarint(nil, uint64(reqLimit+1)), want: "too large"},
		{name: "cut frame", wire: framed([]byte(`{"name":"x"}`))[:5], close: true, want: "unexpected EOF"},
		{name: "empty stream", wire: nil, close: true, want: "EOF"},
		{name: "stalled request", wire: framed([]byte(`{"name":"x"}`))[:5], want: "unreadable request"},
		{name: "no name", wire: request(protocol.CallRequest{}), want: "name"},
		{name: "bad name", wire: request(protocol.CallRequest{Name: "../etc/passwd"}), want: "name"},
		{name: "long name", wire: request(protocol.CallRequest{Name: strings.Repeat("a", protocol.MaxNameLen+1)}), want: "name"},
		{name: "local meta key", wire: request(protocol.CallRequest{Name: "x", Meta: map[string]string{"local.x": "1"}}), want: "local"},
		{name: "bad meta key", wire: request(protocol.CallRequest{Name: "x", Meta: map[string]string{"a b": "1"}}), want: "meta"},
		{name: "negative deadline", wire: request(protocol.CallRequest{Name: "x", Deadline: -1}), want: "deadline"},
		{name: "input too large", wire: request(protocol.CallRequest{Name: "x", Input: json.RawMessage(`"` + strings.Repeat("i", lim.MaxSize) + `"`)}), want: "input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, r, w := rawStream(t, p.a, p.b)
			if len(tc.wire) == 0 {
				// Opening the stream takes a write: negotiate the protocol
				// with an empty one.
				if _, err := st.Write(nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Write(tc.wire); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				if err := st.CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			f := readFrame(t, r)
			if f.Kind != protocol.FrameError || f.Seq != 0 || f.Error == nil {
				t.Fatalf("got %+v, want an error frame", f)
			}
			wantCode(t, f.Error, protocol.CodeBadRequest)
			if !strings.Contains(f.Error.Message, tc.want) {
				t.Errorf("error %q does not mention %q", f.Error.Message, tc.want)
			}
			// Nothing follows the error frame.
			if _, err := frame.Read(r, 1<<20); err == nil {
				t.Fatal("a frame after the error frame")
			}
		})
	}
	// The callee is still healthy.
	f, err := p.caller.Invoke(callCtx(t, 5*time.Second), p.b.ID(), protocol.CallRequest{Name: "after"})
	if err != nil || string(f.Data) != `"ok"` {
		t.Fatalf("call after the malformed ones: %+v, %v", f, err)
	}
	waitFor(t, 5*time.Second, "no active calls", func() bool { return p.callee.Active() == 0 })
}

// A callee that breaks the frame rules gets the call failed with
// bad_request on the caller's side; one that hangs up without an answer is
// unreachable.
func TestMaliciousCallee(t *testing.T) {
	t.Parallel()
	framed := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
	}
	concat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	started := framed(protocol.CallFrame{Seq: 0, Kind: protocol.FrameStarted})
	cases := []struct {
		name   string
		wire   []byte
		stream bool
		good   int    // frames the caller accepts before the bad one
		code   string // of the caller's error
	}{
		{name: "seq starts at 1", wire: framed(protocol.CallFrame{Seq: 1, Kind: protocol.FrameFinal}), code: protocol.CodeBadRequest},
		{name: "seq gap", stream: true, wire: concat(started, framed(protocol.CallFrame{Seq: 2, Kind: protocol.FrameDelta})), good: 1, code: protocol.CodeBadRequest},
		{name: "seq repeated", stream: true, wire: concat(started, started), good: 1, code: protocol.CodeBadRequest},
		{name: "unknown kind", wire: framed(protocol.CallFrame{Seq: 0, Kind: "bogus"}), code: protocol.CodeBadRequest},
		{name: "error without error", wire: framed(protocol.CallFrame{Seq: 0, Kind: protocol.FrameError}), code: protocol.CodeBadRequest},
		{name: "error without code", wire: framed(protocol.CallFrame{Seq: 0, Kind: protocol.FrameError, Error: &protocol.CallError{Message: "x"}}), code: protocol.CodeBadRequest},
		{name: "garbage frame", wire: concat(binary.AppendUvarint(nil, 5), []byte("hello")), code: protocol.CodeBadRequest},
		{name: "oversized frame", wire: binary.AppendUvarint(nil, uint64(protocol.MaxMessageSize+metaRoom+1)), code: protocol.CodeBadRequest},
		{name: "hang up", stream: true, wire: started, good: 1, code: protocol.CodeUnreachable},
		{name: "cut frame", wire: framed(protocol.CallFrame{Seq: 0, Kind: protocol.FrameFinal})[:4], code: protocol.CodeUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newHost(t), newHost(t)
			caller := newService(t, a, nil)
			b.SetStreamHandler(protocol.CallProtocol, func(st network.Stream) {
				defer st.Close()
				st.SetDeadline(time.Now().Add(10 * time.Second))
				r, w := bufio.NewReader(st), bufio.NewWriter(st)
				var req protocol.CallRequest
				if err := frame.ReadJSON(r, 1<<20, &req); err != nil {
					st.Reset()
					return
				}
				w.Write(tc.wire)
				w.Flush()
				if tc.code == protocol.CodeUnreachable {
					return // hang up
				}
				io.Copy(io.Discard, r) // until the caller gives up
			})
			connect(t, a, b)
			cs, err := caller.Call(callCtx(t, 10*time.Second), b.ID(), protocol.CallRequest{Name: "x", Stream: tc.stream})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			for i := range tc.good {
				if _, err := cs.Next(); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			_, err = cs.Next()
			wantCode(t, err, tc.code)
			// The failure sticks.
			if _, again := cs.Next(); again != err {
				t.Fatalf("Next after the failure: %v, want %v again", again, err)
			}
		})
	}
}
