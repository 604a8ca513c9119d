package mesh

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/mesh/direct"
	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// Every weft stream protocol attaches its streams to its resource manager
// service, whose per-peer limit (serviceLimits, set by newHost) refuses the
// streams one peer opens beyond it, and admits one again once a stream
// ends. Each stream starts a frame and stops, so every handler waits for
// the rest of it, holding its stream.
func TestServiceLimits(t *testing.T) {
	tcp := []string{"/ip4/127.0.0.1/tcp/0"}
	b, _ := newTestMesh(t, Config{ListenAddrs: tcp})
	a, _ := newTestMesh(t, Config{ListenAddrs: tcp}, b)
	waitFor(t, 10*time.Second, "a connected to b", func() bool { return connected(a, b) })

	closer := func(c interface{ Close() error }, err error) func(testing.TB) {
		return func(tb testing.TB) {
			tb.Helper()
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = c.Close() })
		}
	}
	cases := []struct {
		service string
		proto   libp2pprotocol.ID
		start   func(h host.Host) func(testing.TB) // serves proto on h
	}{
		{call.ServiceName, protocol.CallProtocol, func(h host.Host) func(testing.TB) {
			return closer(call.New(h, nil, call.WithTimeout(time.Minute)))
		}},
		{direct.ServiceName, protocol.DirectProtocol, func(h host.Host) func(testing.TB) {
			return closer(direct.New(h, refusingInbox{}))
		}},
		{agent.ServiceName, agent.Protocol, func(h host.Host) func(testing.TB) {
			return closer(agent.New(h, nil, agent.WithTimeout(time.Minute)))
		}},
		{reconcile.ServiceName, reconcile.Protocol, func(h host.Host) func(testing.TB) {
			return closer(reconcile.New(h, noHistory{}))
		}},
	}
	if len(cases) != len(serviceLimits) {
		t.Fatalf("%d services tested, %d limited", len(cases), len(serviceLimits))
	}
	const announced = 100 // the length of the frame each stream starts
	for _, tc := range cases {
		t.Run(tc.service, func(t *testing.T) {
			var limit serviceLimit
			for _, l := range serviceLimits {
				if l.name == tc.service {
					limit = l
				}
			}
			if limit.name == "" {
				t.Fatalf("no limits for service %s", tc.service)
			}
			tc.start(b.Host())(t)
			n := limit.perPeer.StreamsInbound
			open := func() network.Stream {
				t.Helper()
				st, err := a.Host().NewStream(t.Context(), b.ID(), tc.proto)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Reset() })
				if _, err := st.Write(append(binary.AppendUvarint(nil, announced), '{')); err != nil {
					t.Fatal(err)
				}
				return st
			}
			inbound := func() int { return serviceStat(t, b.Host(), tc.service).NumStreamsInbound }
			held := make([]network.Stream, n)
			for i := range held {
				held[i] = open()
			}
			waitFor(t, 10*time.Second, "the peer's streams in the service", func() bool { return inbound() == n })
			if named := streamsNamed(b.Host(), tc.proto, tc.service); named != n {
				t.Fatalf("%d of the %d %s streams have service %s in their scope", named, n, tc.proto, tc.service)
			}
			// A stream counts in the service once its handler has attached
			// it, a moment before the handler starts reading its frame.
			waitFor(t, 10*time.Second, fmt.Sprintf("%d streams to reserve their frames (%d bytes each)", n, announced), func() bool {
				return serviceStat(t, b.Host(), tc.service).Memory >= int64(n*announced)
			})

			for range 2 {
				if err := refused(a.Host(), b.ID(), tc.proto, announced, 5*time.Second); err != nil {
					t.Fatalf("stream %d of a peer allowed %d: %v", n+1, n, err)
				}
			}
			if tc.service == call.ServiceName { // a caller is told why
				c, err := call.New(a.Host(), nil)
				closer(c, err)(t)
				_, err = c.Invoke(t.Context(), b.ID(), protocol.CallRequest{Name: "echo"})
				if ce := call.ErrorOf(err); ce.Code != protocol.CodeOverloaded {
					t.Errorf("call beyond the limit: %v, want code %s", err, protocol.CodeOverloaded)
				}
			}
			if got := inbound(); got != n {
				t.Fatalf("%d streams in the service after refusals, want %d", got, n)
			}

			// One ends: the peer may open one again.
			_ = held[0].Reset()
			waitFor(t, 10*time.Second, "a stream to leave the service", func() bool { return inbound() == n-1 })
			open()
			waitFor(t, 10*time.Second, "the new stream in the service", func() bool { return inbound() == n })
		})
	}
}

// ended reports nil if st is closed or reset by the other side within d.
// refused opens a stream of proto from h to p, starts a frame of length
// announced on it, and reports nil if p refuses the stream: by a reset
// while the protocol is negotiated (when h does not know yet that p speaks
// it, NewStream waits for p's answer, and the reset can come first), or by
// ending it within d.
func refused(h host.Host, p peer.ID, proto libp2pprotocol.ID, announced uint64, d time.Duration) error {
	st, err := h.NewStream(context.Background(), p, proto)
	if errors.Is(err, network.ErrReset) {
		return nil
	}
	if err != nil {
		return err
	}
	defer st.Reset()
	if _, err := st.Write(append(binary.AppendUvarint(nil, announced), '{')); errors.Is(err, network.ErrReset) {
		return nil
	} else if err != nil {
		return err
	}
	return ended(st, d)
}

func ended(st network.Stream, d time.Duration) error {
	_ = st.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, st)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return errors.New("not refused: still open after " + d.String())
	}
	return nil
}

func serviceStat(tb testing.TB, h host.Host, service string) network.ScopeStat {
	tb.Helper()
	var st network.ScopeStat
	if err := h.Network().ResourceManager().ViewService(service, func(s network.ServiceScope) error {
		st = s.Stat()
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return st
}

// streamsNamed counts h's streams of proto whose scope names service.
func streamsNamed(h host.Host, proto libp2pprotocol.ID, service string) int {
	n := 0
	for _, c := range h.Network().Conns() {
		for _, st := range c.GetStreams() {
			sc, ok := st.Scope().(network.StreamManagementScope)
			if ok && st.Protocol() == proto && sc.ServiceScope() != nil && sc.ServiceScope().Name() == service {
				n++
			}
		}
	}
	return n
}

// refusingInbox is a direct.Inbox that stores nothing.
type refusingInbox struct{}

func (refusingInbox) Receive(context.Context, *protocol.Message) error {
	return errors.New("not storing")
}

// noHistory is a reconcile.Store for sessions that never get past their
// hello: its methods are never called.
type noHistory struct{ reconcile.Store }
