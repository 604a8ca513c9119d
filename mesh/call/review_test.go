package call

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/protocol"
)

// TestRequestWriteHonoursCtx: a callee that never reads cannot hold a
// caller past its ctx, even while the request is still being written.
func TestRequestWriteHonoursCtx(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := newHost(t, tr.addr), newHost(t, tr.addr)
			caller := newService(t, a, nil)
			stuck := make(chan network.Stream, 1)
			b.SetStreamHandler(protocol.CallProtocol, func(s network.Stream) { stuck <- s }) // never reads
			t.Cleanup(func() {
				select {
				case s := <-stuck:
					s.Reset()
				default:
				}
			})
			connect(t, a, b)
			input, _ := json.Marshal(strings.Repeat("x", 1000_000))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := caller.Invoke(ctx, b.ID(), protocol.CallRequest{Name: "echo", Input: input})
				done <- err
			}()
			select {
			case err := <-done:
				var ce *protocol.CallError
				if !errors.As(err, &ce) || ce.Code != protocol.CodeDeadline {
					t.Fatalf("err %v, want deadline_exceeded", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Invoke still blocked 9 s after its deadline")
			}
		})
	}
}

// TestEscapableInput: input full of characters JSON encoders like to
// escape ('<', '>', '&') crosses as it is, at its own size.
func TestEscapableInput(t *testing.T) {
	p := newPair(t, HandlerFunc(func(_ context.Context, c *Call) { c.Final(c.Request.Input, nil) }))
	input := json.RawMessage(`"` + strings.Repeat("<&>", 300_000) + `"`) // 900 KB; 5.4 MB if escaped
	f, err := p.caller.Invoke(callCtx(t, 10*time.Second), p.b.ID(), protocol.CallRequest{Name: "echo", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Data) != string(input) {
		t.Fatalf("output differs from input (%d vs %d bytes)", len(f.Data), len(input))
	}
}
