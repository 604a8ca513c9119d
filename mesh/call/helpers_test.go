package call

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/mesh/internal/meshtest"
	"github.com/weftmesh/weft/protocol"
)

// Loopback listen addresses, one per transport: no test traffic leaves the
// machine.
const (
	tcp  = "/ip4/127.0.0.1/tcp/0"
	quic = "/ip4/127.0.0.1/udp/0/quic-v1"
)

// transports are the transports the core tests run over.
var transports = []struct{ name, addr string }{{"tcp", tcp}, {"quic", quic}}

// newHost starts a libp2p host with a fresh Ed25519 identity listening on
// addr (loopback TCP by default), closed when the test ends.
func newHost(tb testing.TB, addr ...string) host.Host {
	tb.Helper()
	if len(addr) == 0 {
		addr = []string{tcp}
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings(addr...), libp2p.DisableRelay())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

// connect dials b from a on b's listen addresses.
func connect(tb testing.TB, a, b host.Host) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// newService starts a call service on h, closed when the test ends
// (before h is).
func newService(tb testing.TB, h host.Host, handler Handler, opts ...Option) *Service {
	tb.Helper()
	s, err := New(h, handler, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// pair is two connected hosts: the caller a and the callee b.
type pair struct {
	a, b           host.Host
	caller, callee *Service
}

// newPair starts a caller and a callee serving handler on loopback TCP.
func newPair(tb testing.TB, handler Handler, opts ...Option) *pair {
	tb.Helper()
	return newPairOn(tb, tcp, handler, opts...)
}

// newPairOn is newPair on the transport listening on addr.
func newPairOn(tb testing.TB, addr string, handler Handler, opts ...Option) *pair {
	tb.Helper()
	p := &pair{a: newHost(tb, addr), b: newHost(tb, addr)}
	p.caller = newService(tb, p.a, nil)
	p.callee = newService(tb, p.b, handler, opts...)
	connect(tb, p.a, p.b)
	return p
}

// callCtx bounds one test's calls: a test that hangs fails instead.
func callCtx(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	meshtest.WaitFor(tb, d, what, cond)
}

// wantCode fails the test unless err is a *protocol.CallError with code.
func wantCode(tb testing.TB, err error, code string) *protocol.CallError {
	tb.Helper()
	var ce *protocol.CallError
	if !errors.As(err, &ce) {
		tb.Fatalf("err = %v (%T), want a *protocol.CallError %s", err, err, code)
	}
	if ce.Code != code {
		tb.Fatalf("err = %v, want code %s", ce, code)
	}
	return ce
}

// mustJSON encodes v.
func mustJSON(tb testing.TB, v any) json.RawMessage {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// refusingAddr returns a loopback TCP address nothing listens on.
func refusingAddr(tb testing.TB) ma.Multiaddr { return meshtest.RefusingAddr(tb) }

// absentPeer returns the ID of a peer that is not running, known to h at
// addrs.
func absentPeer(tb testing.TB, h host.Host, addrs ...ma.Multiaddr) peer.ID {
	return meshtest.AbsentPeer(tb, h, addrs...)
}

// rawStream opens a call stream from a to b without the call client, for
// tests that speak the protocol by hand.
func rawStream(tb testing.TB, a, b host.Host) (network.Stream, *bufio.Reader, *bufio.Writer) {
	tb.Helper()
	st, err := a.NewStream(callCtx(tb, 10*time.Second), b.ID(), protocol.CallProtocol)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Reset() })
	if err := st.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	return st, bufio.NewReader(st), bufio.NewWriter(st)
}

// frameKinds reads a call's frames to the end and returns their kinds.
func frameKinds(cs *Stream) ([]string, error) {
	var kinds []string
	for {
		f, err := cs.Next()
		if err == io.EOF {
			return kinds, nil
		}
		if err != nil {
			return kinds, err
		}
		kinds = append(kinds, f.Kind)
	}
}

// readFrame reads one call frame from r.
func readFrame(tb testing.TB, r *bufio.Reader) protocol.CallFrame {
	tb.Helper()
	var f protocol.CallFrame
	if err := frame.ReadJSON(r, 1<<20, &f); err != nil {
		tb.Fatalf("read frame: %v", err)
	}
	return f
}

// goroutines returns the stacks of the running goroutines that contain
// any of substrs.
func goroutines(substrs ...string) []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if slices.ContainsFunc(substrs, func(s string) bool { return strings.Contains(g, s) }) {
			out = append(out, g)
		}
	}
	return out
}

// newRW returns buffers for st.
func newRW(st network.Stream) (*bufio.Reader, *bufio.Writer) {
	return bufio.NewReader(st), bufio.NewWriter(st)
}
