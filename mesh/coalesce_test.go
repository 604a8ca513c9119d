package mesh

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// gatedConn is a net.Conn whose writes are recorded and, while gate is
// closed, wait for it to open.
type gatedConn struct {
	net.Conn // nil: only Write and Close are used

	mu      sync.Mutex
	writes  [][]byte
	entered chan struct{} // one send per Write entered
	gate    chan struct{}
	fail    error
	closed  bool
}

func newGatedConn() *gatedConn {
	return &gatedConn{entered: make(chan struct{}, 100), gate: make(chan struct{})}
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return 0, g.fail
	}
	g.writes = append(g.writes, bytes.Clone(p))
	return len(p), nil
}

func (g *gatedConn) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return nil
}

func (g *gatedConn) recorded() ([]string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, w := range g.writes {
		out = append(out, string(w))
	}
	return out, g.closed
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// returnsSoon runs f and fails the test if it has not returned within a
// few seconds.
func returnsSoon(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return while a write was under way", what)
	}
}

// The frames written while a write is under way go out together in the
// next write, and Write does not wait for the write under way.
func TestCoalescingConnBatchesWhileWriting(t *testing.T) {
	g := newGatedConn()
	c := newCoalescingConn(g)
	defer c.Close()
	returnsSoon(t, "Write", func() {
		if _, err := c.Write([]byte("a")); err != nil {
			t.Error(err)
		}
	})
	<-g.entered // "a" is being written
	returnsSoon(t, "Write", func() {
		for _, s := range []string{"b", "c", "d"} {
			if _, err := c.Write([]byte(s)); err != nil {
				t.Error(err)
			}
		}
	})
	close(g.gate)
	waitUntil(t, "all bytes written", func() bool {
		w, _ := g.recorded()
		return len(w) == 2
	})
	if w, _ := g.recorded(); w[0] != "a" || w[1] != "bcd" {
		t.Fatalf("writes %q, want [a bcd]", w)
	}
}

// A writer waits once coalesceMax bytes are pending.
func TestCoalescingConnBoundsPending(t *testing.T) {
	g := newGatedConn()
	c := newCoalescingConn(g)
	defer c.Close()
	c.Write([]byte("a"))
	<-g.entered
	big := make([]byte, coalesceMax)
	returnsSoon(t, "Write of coalesceMax bytes to an empty queue", func() { c.Write(big) })
	wrote := make(chan struct{})
	go func() { c.Write([]byte("z")); close(wrote) }()
	select {
	case <-wrote:
		t.Fatal("Write returned with more than coalesceMax bytes pending")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	<-wrote
	waitUntil(t, "all bytes written", func() bool {
		w, _ := g.recorded()
		n := 0
		for _, s := range w {
			n += len(s)
		}
		return n == 1+coalesceMax+1
	})
}

// A failed write is reported by the next Write, and the connection is
// closed so its reader learns of it too.
func TestCoalescingConnWriteError(t *testing.T) {
	g := newGatedConn()
	g.fail = errors.New("broken pipe")
	close(g.gate)
	c := newCoalescingConn(g)
	defer c.Close()
	c.Write([]byte("a"))
	waitUntil(t, "the error reported", func() bool {
		_, err := c.Write([]byte("b"))
		return errors.Is(err, g.fail)
	})
	if _, closed := g.recorded(); !closed {
		t.Fatal("underlying connection not closed after a write error")
	}
}

// Close writes what is pending when no write is under way (yamux's
// go-away frame), then closes; Write after Close fails.
func TestCoalescingConnCloseWritesPending(t *testing.T) {
	g := newGatedConn()
	close(g.gate)
	c := newCoalescingConn(g)
	c.Write([]byte("bye"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the pending bytes written", func() bool {
		w, closed := g.recorded()
		return closed && len(w) == 1 && w[0] == "bye"
	})
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// Over a real TCP connection every byte arrives, in order, whatever the
// sizes of the writes.
func TestCoalescingConnTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- s
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer srv.Close()
	c := newCoalescingConn(raw)
	defer c.Close()

	var want bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		p := make([]byte, 1+rng.IntN(3000))
		for j := range p {
			p[j] = byte(i + j)
		}
		want.Write(p)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(srv, int64(want.Len())))
		got <- b
	}()
	src := want.Bytes()
	for i := 0; len(src) > 0; i++ {
		n := min(len(src), 1+rng.IntN(3000))
		if _, err := c.Write(src[:n]); err != nil {
			t.Fatal(err)
		}
		src = src[n:]
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("received %d bytes differing from the %d written", len(b), want.Len())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("bytes did not arrive")
	}
}

// A host whose yamux writes are coalesced and one with libp2p's stock
// yamux (an older weft node) talk over several streams at once: the bytes
// on the wire are the same stream.
func TestCoalescingMuxerInterop(t *testing.T) {
	newHost := func(coalesce bool) host.Host {
		t.Helper()
		opts := []libp2p.Option{
			libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
			libp2p.Transport(tcp.NewTCPTransport),
			libp2p.Security(noise.ID, noise.New),
			libp2p.DisableRelay(),
			libp2p.DisableMetrics(),
		}
		if coalesce {
			opts = append(opts, libp2p.Muxer(yamux.ID, coalescingMuxer{yamux.DefaultTransport}))
		} else {
			opts = append(opts, libp2p.Muxer(yamux.ID, yamux.DefaultTransport))
		}
		h, err := libp2p.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	const proto = "/weft-test/echo/1"
	for _, dir := range []struct {
		name              string
		dialer, dialerNot bool
	}{{"coalescing dials stock", true, false}, {"stock dials coalescing", false, true}} {
		t.Run(dir.name, func(t *testing.T) {
			a, b := newHost(dir.dialer), newHost(dir.dialerNot)
			b.SetStreamHandler(proto, func(s network.Stream) {
				defer s.Close()
				io.Copy(s, s)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					s, err := a.NewStream(ctx, b.ID(), proto)
					if err != nil {
						t.Error(err)
						return
					}
					defer s.Close()
					want := make([]byte, 256<<10)
					rng := rand.New(rand.NewPCG(uint64(i), 7))
					for j := range want {
						want[j] = byte(rng.Uint32())
					}
					go func() {
						src := want
						for len(src) > 0 {
							n := min(len(src), 1+rng.IntN(2000))
							if _, err := s.Write(src[:n]); err != nil {
								return
							}
							src = src[n:]
						}
						s.CloseWrite()
					}()
					got, err := io.ReadAll(s)
					if err != nil {
						t.Error(err)
						return
					}
					if !bytes.Equal(got, want) {
						t.Errorf("stream %d: echoed %d bytes differing from the %d sent", i, len(got), len(want))
					}
				})
			}
			wg.Wait()
		})
	}
}

// A frame larger than coalesceKeep on an idle connection is written by
// Write itself (not copied); one that comes while a write is under way is
// queued.
func TestCoalescingConnWritesLargeFrameItself(t *testing.T) {
	g := newGatedConn()
	c := newCoalescingConn(g)
	defer c.Close()
	big := bytes.Repeat([]byte("x"), coalesceKeep+1)
	done := make(chan struct{})
	go func() { defer close(done); c.Write(big) }()
	<-g.entered
	select {
	case <-done:
		t.Fatal("Write of a large frame returned before it was written")
	case <-time.After(50 * time.Millisecond):
	}
	returnsSoon(t, "Write of a large frame while a write is under way", func() { c.Write(big) })
	close(g.gate)
	<-done
	waitUntil(t, "both written", func() bool {
		w, _ := g.recorded()
		return len(w) == 2 && len(w[0]) == len(big) && len(w[1]) == len(big)
	})
}
