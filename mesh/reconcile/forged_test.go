package reconcile

import (
	"bufio"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/protocol"
)

// TestForgedMessagesRefused: a peer serving a forged, tampered, foreign or
// garbled message, or a malformed frame, during sync is refused; nothing it
// sent is stored, valid messages in the same exchange included, and the
// peer stays refused.
func TestForgedMessagesRefused(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	valid := au.msg(t, testSpace, 0, 0)
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		if i < 0 {
			i += len(c)
		}
		c[i] ^= 0x01
		return c
	}
	wire := valid.Encode()
	other := au.msg(t, protocol.SpaceID("another space"), 0, 0).Encode()
	cases := []struct {
		name  string
		frame func(floor protocol.SyncKey) []byte
	}{
		{"bad signature", msgsFrame(wire, flip(wire, -1))},
		{"tampered body", msgsFrame(wire, flip(wire, len(wire)/2))},
		{"other space", msgsFrame(wire, other)},
		{"garbage", msgsFrame(wire, []byte("not a weft message"))},
		{"truncated", msgsFrame(wire, wire[:len(wire)-10])},
		{"malformed frame", func(protocol.SyncKey) []byte { return []byte{0xff, 0xff, 0xff} }},
		{"ranges not covering", func(floor protocol.SyncKey) []byte {
			x := &exchange{ranges: []rng{{upper: protocol.SyncKey{Time: floor.Time + 5}, mode: modeSkip}}}
			return x.encode(floor)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newNode(t)
			evil := newHost(t)
			ServeEvil(evil, tc.frame)
			connect(t, a.h, evil)
			_, err := a.svc.Sync(syncCtx(t), evil.ID(), testSpace)
			if !errors.Is(err, ErrRefused) && !errors.Is(err, errMalformed) {
				t.Fatalf("sync error = %v, want a refusal", err)
			}
			if n := len(a.st.ids(testSpace)); n != 0 || a.st.puts != 0 {
				t.Fatalf("%d messages stored from a misbehaving peer", n)
			}
			if _, err := a.svc.Sync(syncCtx(t), evil.ID(), testSpace); !errors.Is(err, ErrRefused) {
				t.Fatalf("second sync error = %v, want the peer still refused", err)
			}
		})
	}
}

// TestRefusedInbound: a peer that sent garbage to our handler is refused
// when it comes back, and comes back in once the refusal ends.
func TestRefusedInbound(t *testing.T) {
	t.Parallel()
	var skip atomic.Int64 // moves a's clock forward
	clock := func() time.Time { return time.Now().Add(time.Duration(skip.Load())) }
	a := newNode(t, WithClock(clock), WithRefuseFor(time.Minute))
	b := newNode(t)
	connect(t, b.h, a.h)
	s, err := b.h.NewStream(t.Context(), a.h.ID(), Protocol)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(s)
	_ = writeFrame(w, []byte("garbage hello"))
	_ = w.Flush()
	_, _ = readFrame(bufio.NewReader(s), maxFrame) // a resets the stream
	_ = s.Close()

	deadline := time.Now().Add(10 * time.Second)
	for !a.svc.isRefused(b.h.ID()) {
		if time.Now().After(deadline) {
			t.Fatal("a did not refuse b after a malformed hello")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := b.svc.Sync(syncCtx(t), a.h.ID(), testSpace); err == nil {
		t.Fatal("a refused peer was served")
	}
	skip.Store(int64(2 * time.Minute))
	if _, err := b.svc.Sync(syncCtx(t), a.h.ID(), testSpace); err != nil {
		t.Fatalf("after the refusal ended: %v", err)
	}
}

// msgsFrame returns an exchange carrying wires.
func msgsFrame(wires ...[]byte) func(protocol.SyncKey) []byte {
	return func(floor protocol.SyncKey) []byte {
		return (&exchange{msgs: wires}).encode(floor)
	}
}

// TestSlowPeerCutOff: a peer that keeps a session open by trickling tiny
// exchanges (holding the space's session slot) is cut off once the session
// averages too few bytes per second; it is not refused for it.
func TestSlowPeerCutOff(t *testing.T) {
	t.Parallel()
	a := newNode(t, func(c *config) error { c.slowAfter = 300 * time.Millisecond; return nil })
	slow := newHost(t)
	slow.SetStreamHandler(Protocol, func(s network.Stream) {
		defer s.Close()
		r, w, floor, ok := acceptHello(s)
		if !ok {
			return
		}
		for {
			// One want per turn, slowly: never empty, never much.
			_ = writeFrame(w, (&exchange{wants: []protocol.ID{{1}}}).encode(floor))
			if w.Flush() != nil {
				return
			}
			if _, err := readFrame(r, maxFrame); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // the slowness under test
		}
	})
	connect(t, a.h, slow)
	_, err := a.svc.Sync(syncCtx(t), slow.ID(), testSpace)
	if !errors.Is(err, errSlow) {
		t.Fatalf("sync with a trickling peer: %v, want errSlow", err)
	}
	if a.svc.isRefused(slow.ID()) {
		t.Error("a slow peer was refused")
	}
}

// TestLeaveEndsSessions: leaving a space ends its sessions in flight.
func TestLeaveEndsSessions(t *testing.T) {
	t.Parallel()
	a := newNode(t)
	stuck := newHost(t)
	answered := make(chan struct{})
	stuck.SetStreamHandler(Protocol, func(s network.Stream) {
		defer s.Close()
		r := bufio.NewReader(s)
		_, _ = readFrame(r, maxFrame)
		close(answered)
		_, _ = readFrame(r, maxFrame) // never answers
	})
	connect(t, a.h, stuck)
	done := make(chan error, 1)
	go func() { _, err := a.svc.Sync(t.Context(), stuck.ID(), testSpace); done <- err }()
	<-answered
	a.svc.Leave(testSpace)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a session of a space left succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Leave did not end the session in flight")
	}
}
