package direct

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// Messages sent pipelined on one stream are all acked, in order, and each
// is stored once; sending them again is acked and stores nothing new.
func TestSendPipelined(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
		addr string
	}{{"one", 1, tcp}, {"500", 500, tcp}, {"500 over quic", 500, quic}} {
		n := tc.n
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newNodeOn(t, tc.addr), newNodeOn(t, tc.addr)
			connect(t, a.h, b.h)
			msgs := make([]*protocol.Message, n)
			wires := make([][]byte, n)
			for i := range msgs {
				msgs[i] = dm(t, a.key, b.id(), nil)
				wires[i] = msgs[i].Encode()
			}
			for round := 1; round <= 2; round++ {
				acks, err := send(t, testCtx(t, 30*time.Second), a, b.id(), wires...)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if len(acks) != n {
					t.Fatalf("round %d: %d acks, want %d", round, len(acks), n)
				}
				for i, k := range acks {
					if k.i != i || k.refusal != nil {
						t.Fatalf("round %d: ack %d is %+v, want message %d accepted", round, i, k, i)
					}
				}
				if got := b.inbox.len(); got != n {
					t.Fatalf("round %d: inbox holds %d messages, want %d", round, got, n)
				}
				if got := b.inbox.receives.Load(); got != int64(round*n) {
					t.Fatalf("round %d: inbox got %d messages, want %d", round, got, round*n)
				}
			}
			for i, m := range msgs {
				if !b.inbox.has(m.ID) {
					t.Fatalf("message %d not in the inbox", i)
				}
				got := b.inbox.get(m.ID)
				if !bytes.Equal(got.Body, m.Body) || got.Sender() != a.id() {
					t.Fatalf("message %d stored as %s from %s", i, got.Body, got.Sender())
				}
			}
			if got := b.inbox.ids(); len(got) != n || got[0] != msgs[0].ID || got[n-1] != msgs[n-1].ID {
				t.Fatalf("stored out of order")
			}
		})
	}
}

// Messages that are not well-formed direct messages to the recipient from
// the stream's peer are refused with an error ack and not stored; the
// stream goes on, and the good message after each is stored.
func TestRefused(t *testing.T) {
	t.Parallel()
	a, b, other := newNode(t), newNode(t), newNode(t)
	connect(t, a.h, b.h)
	to := b.id()
	flip := func(w []byte, at int) []byte {
		w = bytes.Clone(w)
		w[at] ^= 0x01
		return w
	}
	cases := []struct {
		name   string
		wire   []byte
		want   string // in the refusal
		reason string // its Reason
	}{
		{"signature flipped", func() []byte { w := dm(t, a.key, to, nil).Encode(); return flip(w, len(w)-1) }(), "bad_signature", "bad_signature"},
		{"content flipped", func() []byte {
			w := dm(t, a.key, to, nil).Encode()
			return flip(w, bytes.Index(w, []byte("hello"))) // hello -> iello
		}(), "bad_signature", "bad_signature"},
		{"other recipient's inbox", dm(t, a.key, to, func(d *protocol.Draft) { d.Space = protocol.InboxSpace(other.id()) }).Encode(), "inbox", "malformed"},
		{"open space", dm(t, a.key, to, func(d *protocol.Draft) { d.Space = protocol.SpaceID("general") }).Encode(), "inbox", "malformed"},
		{"refs.nodes names someone else", dm(t, a.key, to, func(d *protocol.Draft) { d.Refs.Nodes = []string{other.id().String()} }).Encode(), "refs.nodes", "malformed"},
		{"refs.nodes names two", dm(t, a.key, to, func(d *protocol.Draft) { d.Refs.Nodes = append(d.Refs.Nodes, other.id().String()) }).Encode(), "refs.nodes", "malformed"},
		{"refs.nodes empty", dm(t, a.key, to, func(d *protocol.Draft) { d.Refs.Nodes = nil }).Encode(), "refs.nodes", "malformed"},
		{"unknown kind", dm(t, a.key, to, func(d *protocol.Draft) { d.Type = "text" }).Encode(), "not one of", "malformed"},
		{"has prev", dm(t, a.key, to, func(d *protocol.Draft) { d.Prev = []protocol.ID{protocol.MessageID([]byte("p"))} }).Encode(), "prev", "malformed"},
		{"answers two", dm(t, a.key, to, func(d *protocol.Draft) {
			d.Refs.Messages = []protocol.ID{protocol.MessageID([]byte("1")), protocol.MessageID([]byte("2"))}
		}).Encode(), "answers 2", "malformed"},
		{"expired", dm(t, a.key, to, func(d *protocol.Draft) { d.CreatedAt = time.Now().Add(-2 * time.Hour); d.TTL = time.Hour }).Encode(), "expired", "expired"},
		{"from the future", dm(t, a.key, to, func(d *protocol.Draft) { d.CreatedAt = time.Now().Add(time.Hour) }).Encode(), "clock_skew", "clock_skew"},
		{"forged sender", dm(t, other.key, to, nil).Encode(), "signed by " + other.id().String(), "invalid"},
		{"local meta key", dm(t, a.key, to, func(d *protocol.Draft) { d.Meta = map[string]string{"local.x": "1"} }).Encode(), "local", "malformed"},
		{"garbage", []byte("not a message"), "malformed", "malformed"},
		{"empty", []byte{}, "malformed", "malformed"},
		{"body cut", func() []byte { w := dm(t, a.key, to, nil).Encode(); return w[:len(w)-10] }(), "malformed", "malformed"},
	}
	// One stream: bad, good, bad, good, ...
	var wires [][]byte
	var goods []*protocol.Message
	for _, tc := range cases {
		good := dm(t, a.key, to, nil)
		goods = append(goods, good)
		wires = append(wires, tc.wire, good.Encode())
	}
	acks, err := send(t, testCtx(t, 30*time.Second), a, to, wires...)
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != len(wires) {
		t.Fatalf("%d acks for %d messages", len(acks), len(wires))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad, good := acks[2*i], acks[2*i+1]
			if bad.i != 2*i || bad.refusal == nil {
				t.Fatalf("ack %+v, want a refusal of message %d", bad, 2*i)
			}
			if bad.refusal.Code != protocol.CodeRefused || !strings.Contains(bad.refusal.Message, tc.want) {
				t.Errorf("refusal %v, want %s mentioning %q", bad.refusal, protocol.CodeRefused, tc.want)
			}
			if bad.refusal.Reason != tc.reason {
				t.Errorf("refusal reason %q, want %q", bad.refusal.Reason, tc.reason)
			}
			if m, err := protocol.Decode(tc.wire, protocol.DefaultLimits()); err == nil && b.inbox.has(m.ID) {
				t.Error("refused message stored")
			}
			if good.i != 2*i+1 || good.refusal != nil {
				t.Fatalf("ack %+v, want the good message after it accepted", good)
			}
			if !b.inbox.has(goods[i].ID) {
				t.Error("good message after it not stored")
			}
		})
	}
	if got := b.inbox.len(); got != len(goods) {
		t.Fatalf("inbox holds %d messages, want the %d good ones", got, len(goods))
	}
}

// A frame that cannot be read gets an error ack, then the recipient ends
// the stream.
func TestUnreadableFrame(t *testing.T) {
	t.Parallel()
	lim := protocol.DefaultLimits()
	lim.MaxSize = 4 << 10
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			testUnreadableFrame(t, tr.addr, lim)
		})
	}
}

func testUnreadableFrame(t *testing.T, addr string, lim protocol.Limits) {
	a, b := newNodeOn(t, addr), newNodeOn(t, addr, WithLimits(lim))
	connect(t, a.h, b.h)
	limit := lim.MaxSize + frameOverhead
	cases := []struct {
		name  string
		wire  []byte
		close bool // close the write side after it
		want  string
	}{
		{"oversized", binary.AppendUvarint(nil, uint64(limit+1)), false, "too large"},
		{"huge", binary.AppendUvarint(nil, 1<<62), false, "too large"},
		{"oversized with body", append(binary.AppendUvarint(nil, uint64(limit+1)), make([]byte, limit+1)...), false, "too large"},
		{"length overflows", bytes.Repeat([]byte{0xff}, 11), false, "overflow"},
		{"cut", append(binary.AppendUvarint(nil, 100), "abc"...), true, "unexpected EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, r, w := rawStream(t, a.h, b.h)
			// A good message first: the stream works.
			good := dm(t, a.key, b.id(), nil)
			if err := frame.Write(w, good.Encode()); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			var k protocol.DirectAck
			if err := frame.ReadJSON(r, ackLimit, &k); err != nil || !k.OK {
				t.Fatalf("good message: %+v, %v", k, err)
			}
			// The server may reset before it has read everything we write:
			// write in the background.
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				if _, err := w.Write(tc.wire); err == nil && w.Flush() == nil && tc.close {
					st.CloseWrite()
				}
			}()
			k = protocol.DirectAck{}
			if err := frame.ReadJSON(r, ackLimit, &k); err != nil {
				t.Fatalf("no ack for the unreadable frame: %v", err)
			}
			if k.OK || k.Error == nil || k.Error.Code != protocol.CodeBadRequest || !strings.Contains(k.Error.Message, tc.want) {
				t.Fatalf("ack %+v, want bad_request mentioning %q", k, tc.want)
			}
			// Then the recipient ends the stream: nothing more is answered
			// or read from it.
			if _, err := frame.Read(r, ackLimit); err == nil {
				t.Fatal("a frame after the error ack")
			}
			<-wrote
			late := dm(t, a.key, b.id(), nil)
			if frame.Write(w, late.Encode()) == nil && w.Flush() == nil {
				if _, err := frame.Read(r, ackLimit); err == nil {
					t.Fatal("a message after the unreadable frame was acked")
				}
			}
			if !b.inbox.has(good.ID) || b.inbox.has(late.ID) {
				t.Fatalf("good message stored: %v, message after the unreadable frame stored: %v", b.inbox.has(good.ID), b.inbox.has(late.ID))
			}
		})
	}
}

// An unreadable frame that comes after a quiet spell longer than the
// per-exchange timeout still gets its error ack.
func TestUnreadableFrameAfterQuiet(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	a, b := newNode(t), newNode(t, WithTimeout(timeout))
	connect(t, a.h, b.h)
	_, r, w := rawStream(t, a.h, b.h)
	if err := frame.Write(w, dm(t, a.key, b.id(), nil).Encode()); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var k protocol.DirectAck
	if err := frame.ReadJSON(r, ackLimit, &k); err != nil || !k.OK {
		t.Fatalf("good message: %+v, %v", k, err)
	}
	// Not synchronization: the point is that time passes (within the
	// idle limit, past the per-exchange timeout).
	time.Sleep(3 * timeout)
	w.Write(binary.AppendUvarint(nil, 1<<40))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	k = protocol.DirectAck{}
	if err := frame.ReadJSON(r, ackLimit, &k); err != nil {
		t.Fatalf("no ack for the unreadable frame: %v", err)
	}
	if k.OK || k.Error == nil || k.Error.Code != protocol.CodeBadRequest {
		t.Fatalf("ack %+v, want bad_request", k)
	}
}

// When the inbox cannot store a message, the ack is an internal error and
// the sender may send it again later.
func TestInboxFailure(t *testing.T) {
	t.Parallel()
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	b.inbox.setHook(func(context.Context, *protocol.Message) error { return errors.New("disk full") })
	m := dm(t, a.key, b.id(), nil)
	acks, err := send(t, testCtx(t, 10*time.Second), a, b.id(), m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != 1 || acks[0].refusal == nil || acks[0].refusal.Code != protocol.CodeInternal || acks[0].refusal.Reason != "" {
		t.Fatalf("acks %+v, want one internal error without a reason", acks)
	}
	if strings.Contains(acks[0].refusal.Message, "disk full") {
		t.Errorf("refusal %q leaks the recipient's storage error", acks[0].refusal.Message)
	}
	if b.inbox.len() != 0 {
		t.Fatal("message stored")
	}
	b.inbox.setHook(nil)
	acks, err = send(t, testCtx(t, 10*time.Second), a, b.id(), m.Encode())
	if err != nil || len(acks) != 1 || acks[0].refusal != nil {
		t.Fatalf("again: %+v, %v", acks, err)
	}
	if !b.inbox.has(m.ID) {
		t.Fatal("message not stored on the second try")
	}
}

// When the inbox refuses a message with a *protocol.CallError (its own
// policy: a rate, a quota), the sender gets that refusal as it is, and the
// stream goes on.
func TestInboxRefusal(t *testing.T) {
	t.Parallel()
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	refusal := protocol.Errorf(protocol.CodeOverloaded, "rate_limited: slow down")
	b.inbox.setHook(func(_ context.Context, m *protocol.Message) error {
		if strings.Contains(string(m.Content), "refuse") {
			return fmt.Errorf("policy: %w", refusal)
		}
		return nil
	})
	no := dm(t, a.key, b.id(), func(d *protocol.Draft) { d.Content = json.RawMessage(`{"text":"refuse me"}`) })
	yes := dm(t, a.key, b.id(), nil)
	acks, err := send(t, testCtx(t, 10*time.Second), a, b.id(), no.Encode(), yes.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != 2 || acks[0].refusal == nil || *acks[0].refusal != *refusal || acks[1].refusal != nil {
		t.Fatalf("acks %+v, want the inbox's refusal, then ok", acks)
	}
	if b.inbox.has(no.ID) || !b.inbox.has(yes.ID) {
		t.Fatal("want only the second message stored")
	}
}

// Send to a peer that cannot be reached fails at once: the 5 s ctx only
// turns a hang into a failure.
func TestSendUnreachable(t *testing.T) {
	t.Parallel()
	a := newNode(t)
	to := absentPeer(t, a.h, refusingAddr(t))
	ctx := testCtx(t, 5*time.Second)
	acks, err := send(t, ctx, a, to, dm(t, a.key, to, nil).Encode())
	if err == nil {
		t.Fatal("Send to an absent peer succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("Send failed only when its ctx ended: %v", err)
	}
	if len(acks) != 0 {
		t.Fatalf("acks %+v from an absent peer", acks)
	}
}

// Cancelling ctx while the recipient is storing fails Send with ctx's
// error; the messages not acked were not delivered as far as the sender
// knows.
func TestSendCancel(t *testing.T) {
	t.Parallel()
	a, b := newNode(t), newNode(t)
	connect(t, a.h, b.h)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	first := dm(t, a.key, b.id(), nil)
	b.inbox.setHook(func(ctx context.Context, m *protocol.Message) error {
		if m.ID == first.ID {
			return nil
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return errors.New("stopped")
	})
	ctx, cancel := context.WithCancel(testCtx(t, 10*time.Second))
	done := make(chan error, 1)
	firstAcked := make(chan struct{})
	var acks []ack
	second := dm(t, a.key, b.id(), nil).Encode()
	go func() {
		done <- a.svc.Send(ctx, b.id(), [][]byte{first.Encode(), second}, func(i int, refusal *protocol.CallError) {
			acks = append(acks, ack{i, refusal})
			if i == 0 {
				close(firstAcked)
			}
		})
	}()
	<-entered
	<-firstAcked
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Send did not return after its ctx was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Send: %v, want context canceled", err)
	}
	if len(acks) != 1 || acks[0].i != 0 || acks[0].refusal != nil {
		t.Fatalf("acks %+v, want the first message's only", acks)
	}
}

// Send copes with a recipient that misbehaves.
func TestBadRecipient(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		serve func(st network.Stream) // answers the stream
		acks  int                     // acks reported
		code  string                  // of the first ack's refusal; "" accepted
		err   bool                    // Send fails
	}{
		{"empty ack", func(st network.Stream) {
			r, w := bufioRW(st)
			for {
				if _, err := frame.Read(r, 1<<21); err != nil {
					return
				}
				frame.Write(w, []byte(`{}`))
				w.Flush()
			}
		}, 2, protocol.CodeBadRequest, false},
		{"hangs up after one ack", func(st network.Stream) {
			r, w := bufioRW(st)
			frame.Read(r, 1<<21)
			frame.WriteJSON(w, protocol.DirectAck{OK: true})
			w.Flush()
		}, 1, "", true},
		{"garbage ack", func(st network.Stream) {
			r, w := bufioRW(st)
			frame.Read(r, 1<<21)
			frame.Write(w, []byte(`not json`))
			w.Flush()
			io.Copy(io.Discard, r)
		}, 0, "", true},
		{"oversized ack", func(st network.Stream) {
			r, w := bufioRW(st)
			frame.Read(r, 1<<21)
			w.Write(binary.AppendUvarint(nil, ackLimit+1))
			w.Flush()
			io.Copy(io.Discard, r)
		}, 0, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newNode(t), newNode(t)
			b.h.SetStreamHandler(protocol.DirectProtocol, func(st network.Stream) {
				defer st.Close()
				st.SetDeadline(time.Now().Add(10 * time.Second))
				tc.serve(st)
			})
			connect(t, a.h, b.h)
			acks, err := send(t, testCtx(t, 10*time.Second), a, b.id(), dm(t, a.key, b.id(), nil).Encode(), dm(t, a.key, b.id(), nil).Encode())
			if (err != nil) != tc.err {
				t.Fatalf("Send: %v, want failure %v", err, tc.err)
			}
			if len(acks) != tc.acks {
				t.Fatalf("acks %+v, want %d", acks, tc.acks)
			}
			if len(acks) > 0 {
				if got := acks[0].refusal; (got == nil) != (tc.code == "") || (got != nil && got.Code != tc.code) {
					t.Fatalf("first ack %+v, want code %q", acks[0], tc.code)
				}
			}
		})
	}
}

// The recipient checks TTLs against its own clock.
func TestWithClock(t *testing.T) {
	t.Parallel()
	a := newNode(t)
	b := newNode(t, WithClock(func() time.Time { return time.Now().Add(2 * time.Hour) }))
	connect(t, a.h, b.h)
	acks, err := send(t, testCtx(t, 10*time.Second), a, b.id(),
		dm(t, a.key, b.id(), func(d *protocol.Draft) { d.TTL = time.Hour }).Encode(),
		dm(t, a.key, b.id(), nil).Encode())
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != 2 || acks[0].refusal == nil || !strings.Contains(acks[0].refusal.Message, "expired") || acks[1].refusal != nil {
		t.Fatalf("acks %+v, want the first expired and the second accepted", acks)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	h := newHost(t, newKey(t))
	bad := protocol.DefaultLimits()
	bad.MaxSize = protocol.MaxMessageSize + 1
	cases := []struct {
		name string
		opt  Option
	}{
		{"nil clock", WithClock(nil)},
		{"zero timeout", WithTimeout(0)},
		{"bad limits", WithLimits(bad)},
	}
	for _, tc := range cases {
		if s, err := New(h, newMemInbox(), tc.opt); err == nil {
			s.Close()
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
}
