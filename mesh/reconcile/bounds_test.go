package reconcile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/protocol"
)

// rawSession opens a sync stream from h to p and sends a hello for space
// saying h holds nothing.
type rawSession struct {
	s network.Stream
	r *bufio.Reader
	w *bufio.Writer
}

func openRaw(tb testing.TB, h host.Host, p peer.ID, space protocol.ID) *rawSession {
	tb.Helper()
	s, err := h.NewStream(tb.Context(), p, Protocol)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Reset() })
	rs := &rawSession{s: s, r: bufio.NewReader(s), w: bufio.NewWriter(s)}
	rs.send(tb, (&hello{space: space, floor: protocol.MinSyncKey}).encode())
	return rs
}

func (rs *rawSession) send(tb testing.TB, b []byte) {
	tb.Helper()
	if err := writeFrame(rs.w, b); err != nil {
		tb.Fatal(err)
	}
	if err := rs.w.Flush(); err != nil {
		tb.Fatal(err)
	}
}

func (rs *rawSession) recv(tb testing.TB) []byte {
	tb.Helper()
	_ = rs.s.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := readFrame(rs.r, maxFrame)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestNoUnrequestedMessages: a peer that says it holds nothing is answered
// with the IDs of what the responder holds, never with the messages
// themselves: it gets only the messages it then asks for, by ID. (Before,
// a 100-byte hello and an empty list made a node send its whole space.)
func TestNoUnrequestedMessages(t *testing.T) {
	t.Parallel()
	a := newNode(t)
	au := newAuthor(t)
	msgs := au.chain(t, 300, 0)
	addAll(a.st, msgs)
	raw := newHost(t)
	connect(t, raw, a.h)

	rs := openRaw(t, raw, a.h.ID(), testSpace)
	rep, err := decodeReply(rs.recv(t))
	if err != nil || rep.status != statusReconcile {
		t.Fatalf("reply %+v, %v; want reconcile", rep, err)
	}
	open, err := decodeExchange(rs.recv(t), rep.floor)
	if err != nil {
		t.Fatal(err)
	}
	if len(open.msgs) != 0 {
		t.Fatalf("opening carries %d messages", len(open.msgs))
	}
	// We hold nothing anywhere: an empty ID list over everything.
	var sent int64
	rs.send(t, (&exchange{ranges: []rng{{upper: protocol.MaxSyncKey, mode: modeIDList}}}).encode(rep.floor))
	x, err := decodeExchange(rs.recv(t), rep.floor)
	if err != nil {
		t.Fatal(err)
	}
	var ids []protocol.ID
	for _, r := range x.ranges {
		ids = append(ids, r.ids...)
	}
	if len(x.msgs) != 0 || len(ids) != len(msgs) {
		t.Fatalf("answer to an empty list: %d messages and %d IDs; want no messages and the %d IDs", len(x.msgs), len(ids), len(msgs))
	}
	// Ask for 10 of them: exactly those 10 come.
	want := ids[:10]
	rs.send(t, (&exchange{wants: want}).encode(rep.floor))
	x, err = decodeExchange(rs.recv(t), rep.floor)
	if err != nil {
		t.Fatal(err)
	}
	got := map[protocol.ID]bool{}
	for _, w := range x.msgs {
		m, err := protocol.Decode(w, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		got[m.ID] = true
		sent += int64(len(w))
	}
	if len(got) != len(want) {
		t.Fatalf("asked for %d messages, got %d", len(want), len(got))
	}
	for _, id := range want {
		if !got[id] {
			t.Errorf("asked-for %s not sent", id)
		}
	}
	t.Logf("a peer holding nothing was sent %d IDs, then the %d messages (%d bytes) it asked for", len(ids), len(got), sent)
}

// TestSyncStillConverges: with nothing pushed, two nodes that each hold
// what the other lacks, one of them nothing at all, still end a session
// with the union.
func TestSyncStillConverges(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	msgs := au.chain(t, 5000, 0)
	for _, tc := range []struct {
		name   string
		aa, bb []*protocol.Message
	}{
		{"initiator empty", nil, msgs},
		{"responder empty", msgs, nil},
		{"halves", msgs[:2500], msgs[2500:]},
		{"interleaved", every(msgs, 0), every(msgs, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newNode(t), newNode(t)
			st := syncSets(t, a, b, tc.aa, tc.bb)
			if na, nb := len(a.st.ids(testSpace)), len(b.st.ids(testSpace)); na != len(msgs) || nb != len(msgs) {
				t.Fatalf("after one session a has %d, b %d; want %d each (%+v)", na, nb, len(msgs), st)
			}
			t.Logf("%s: %d rounds, %d bytes sent, %d received", tc.name, st.Rounds, st.BytesSent, st.BytesReceived)
		})
	}
}

func every(msgs []*protocol.Message, odd int) []*protocol.Message {
	var out []*protocol.Message
	for i, m := range msgs {
		if i%2 == odd {
			out = append(out, m)
		}
	}
	return out
}

// TestSessionBytes: a session sends at most its byte budget; the
// initiator, told the rest is missing, starts another session and gets it.
func TestSessionBytes(t *testing.T) {
	t.Parallel()
	au := newAuthor(t)
	msgs := au.chain(t, 400, 0)
	size := int64(len(msgs[0].Encode()))
	a := newNode(t)
	b := newNode(t, WithSessionBytes(100*size))
	connect(t, a.h, b.h)
	addAll(b.st, msgs)
	st, err := a.svc.Sync(syncCtx(t), b.h.ID(), testSpace)
	if err != nil {
		t.Fatal(err)
	}
	if st.Received > 110 || st.Missing == 0 {
		t.Fatalf("one session with a budget of ~100 messages: %+v", st)
	}
	// The responder counts its side when its session ends, which may be
	// just after the initiator's.
	until := time.Now().Add(10 * time.Second)
	for b.svc.Totals().Unserved == 0 && time.Now().Before(until) {
		time.Sleep(10 * time.Millisecond)
	}
	if bt := b.svc.Totals(); bt.Unserved == 0 {
		t.Errorf("responder totals %+v, want some unserved", bt)
	}
	// Triggered, sessions follow one another until all is there.
	a.svc.Trigger(b.h.ID(), testSpace)
	deadline := time.Now().Add(30 * time.Second)
	for len(a.st.ids(testSpace)) < len(msgs) {
		if time.Now().After(deadline) {
			t.Fatalf("a has %d of %d after 30 s", len(a.st.ids(testSpace)), len(msgs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSilentPeerFreesSlot: a peer that opens a session and then says
// nothing holds the space's session slot for the first-reply timeout, not
// for a turn's 30 s, and is refused afterwards; another member's session
// then goes through.
func TestSilentPeerFreesSlot(t *testing.T) {
	t.Parallel()
	const firstReply = time.Second
	a := newNode(t, WithFirstReply(firstReply))
	addAll(a.st, newAuthor(t).chain(t, 50, 0))
	silent := newHost(t)
	connect(t, silent, a.h)
	rs := openRaw(t, silent, a.h.ID(), testSpace)
	rep, err := decodeReply(rs.recv(t))
	if err != nil || rep.status != statusReconcile {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	start := time.Now()
	// a holds the slot, waiting for us. An honest member's session is
	// answered busy, retried, and gets through once the silent one is cut.
	b := newNode(t)
	connect(t, b.h, a.h)
	st, err := b.svc.SyncRetrying(syncCtx(t), a.h.ID(), testSpace)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if st.Received != 50 {
		t.Errorf("member fetched %d, want 50", st.Received)
	}
	if took > firstReply+5*time.Second {
		t.Errorf("the member waited %v for the slot, want about the first-reply timeout (%v)", took, firstReply)
	}
	t.Logf("slot freed and member synced after %v", took.Round(10*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for !a.svc.isRefused(silent.ID()) {
		if time.Now().After(deadline) {
			t.Fatal("the silent peer is not refused")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionRates: a peer that starts sessions faster than its rate is
// told busy, cheaply; other peers are not.
func TestSessionRates(t *testing.T) {
	t.Parallel()
	a := newNode(t, WithSessionRates(rate.Rate{PerSecond: 0.01, Burst: 5}, rate.Rate{}))
	b, c := newNode(t), newNode(t)
	connect(t, b.h, a.h)
	connect(t, c.h, a.h)
	busy := 0
	for range 10 {
		// The responder's side of the last session may still be
		// running when the initiator's ends: a session then is told
		// busy (the space's one session at a time) for a token spent.
		waitIdle(t, a)
		_, err := b.svc.Sync(syncCtx(t), a.h.ID(), testSpace)
		switch {
		case errors.Is(err, errBusy):
			busy++
		case err != nil:
			t.Fatal(err)
		}
	}
	if busy != 5 {
		t.Errorf("%d of 10 sessions told busy, want 5 (burst of 5)", busy)
	}
	waitIdle(t, a)
	if _, err := c.svc.Sync(syncCtx(t), a.h.ID(), testSpace); err != nil {
		t.Errorf("another peer: %v", err)
	}
	// Per space: whoever asks.
	d := newNode(t, WithSessionRates(rate.Rate{}, rate.Rate{PerSecond: 0.01, Burst: 2}))
	for i, n := range []*node{b, c, newNode(t)} {
		connect(t, n.h, d.h)
		waitIdle(t, d)
		_, err := n.svc.Sync(syncCtx(t), d.h.ID(), testSpace)
		if wantBusy := i == 2; errors.Is(err, errBusy) != wantBusy {
			t.Errorf("session %d with a space limited to 2: %v", i, err)
		}
	}
}

// TestBusyCostsNoSpaceToken: sessions refused because one of the space
// is running (initiators retry those) cost the space none of its rate:
// once it ends, the space's burst is still there for others.
func TestBusyCostsNoSpaceToken(t *testing.T) {
	t.Parallel()
	d := newNode(t, WithSessionRates(rate.Rate{}, rate.Rate{PerSecond: 0.01, Burst: 2}))
	peers := []*node{newNode(t), newNode(t), newNode(t)}
	for _, n := range peers {
		connect(t, n.h, d.h)
	}
	l := d.svc.lock(testSpace) // a session of the space runs
	l <- struct{}{}
	for i := range 6 {
		if _, err := peers[i%2].svc.Sync(syncCtx(t), d.h.ID(), testSpace); !errors.Is(err, errBusy) {
			t.Fatalf("attempt %d while the space's session runs: %v, want busy", i, err)
		}
	}
	<-l
	for i, n := range peers {
		waitIdle(t, d)
		_, err := n.svc.Sync(syncCtx(t), d.h.ID(), testSpace)
		if wantBusy := i == 2; errors.Is(err, errBusy) != wantBusy {
			t.Errorf("session %d after the space's session ended (burst of 2): %v", i, err)
		}
	}
}

// waitIdle waits until n runs no sync session, either side.
func waitIdle(t *testing.T, n *node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !n.svc.Idle() {
		if time.Now().After(deadline) {
			t.Fatal("sessions still running after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// decliner is a sink that declines every other message.
type decliner struct {
	*memStore
	n int
}

func (d *decliner) Deliver(ctx context.Context, m *protocol.Message) error {
	d.mu.Lock()
	d.n++
	odd := d.n%2 == 1
	d.mu.Unlock()
	if odd {
		return fmt.Errorf("over quota: %w", ErrDeclined)
	}
	return d.memStore.Deliver(ctx, m)
}

// TestDeclinedDropped: messages the sink declines are dropped, and the
// session goes on with the rest.
func TestDeclinedDropped(t *testing.T) {
	t.Parallel()
	a, b := newNode(t), newNode(t)
	d := &decliner{memStore: a.st}
	a.svc.Join(testSpace, d)
	msgs := newAuthor(t).loose(t, 20) // no prev: a declined one is not asked for again
	st := syncSets(t, a, b, nil, msgs)
	if st.Dropped != 10 || st.Received != 10 || len(a.st.ids(testSpace)) != 10 {
		t.Errorf("stats %+v, a holds %d; want 10 declined, 10 kept", st, len(a.st.ids(testSpace)))
	}
}

// batchDecliner is a BatchSink that declines every other message of each
// batch and counts what it is handed.
type batchDecliner struct {
	*memStore
	batches, batched, single int // guarded by memStore.mu
}

func (d *batchDecliner) Deliver(ctx context.Context, m *protocol.Message) error {
	d.mu.Lock()
	d.single++
	d.mu.Unlock()
	return d.memStore.Deliver(ctx, m)
}

func (d *batchDecliner) DeliverBatch(ctx context.Context, ms []*protocol.Message) []error {
	d.mu.Lock()
	d.batches++
	d.batched += len(ms)
	d.mu.Unlock()
	errs := make([]error, len(ms))
	for i, m := range ms {
		if i > 0 && !protocol.KeyOf(ms[i-1]).Less(protocol.KeyOf(m)) {
			errs[i] = fmt.Errorf("batch out of order at %d", i)
			continue
		}
		if i%2 == 0 {
			errs[i] = fmt.Errorf("over quota: %w", ErrDeclined)
			continue
		}
		d.memStore.add(m)
	}
	return errs
}

// TestBatchSink: a BatchSink gets an exchange's messages in one call, in
// sync order, and its per-message answers count as Deliver's would: the
// declined are dropped, the rest received.
func TestBatchSink(t *testing.T) {
	t.Parallel()
	a, b := newNode(t), newNode(t)
	d := &batchDecliner{memStore: a.st}
	a.svc.Join(testSpace, d)
	msgs := newAuthor(t).loose(t, 20) // no prev: a declined one is not asked for again
	st := syncSets(t, a, b, nil, msgs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.single != 0 || d.batched != 20 || d.batches == 0 || d.batches > 2 {
		t.Errorf("%d batches of %d messages in all, %d one by one; want all 20 in one or two batches", d.batches, d.batched, d.single)
	}
	if st.Dropped != 10 || st.Received != 10 || len(a.st.keys[testSpace]) != 10 {
		t.Errorf("stats %+v, a holds %d; want 10 declined, 10 kept", st, len(a.st.keys[testSpace]))
	}
}

// blockingSink is a BatchSink whose first DeliverBatch waits for release.
type blockingSink struct {
	*memStore
	first   sync.Once
	release chan struct{}
	calls   atomic.Int32
	firstN  atomic.Int32 // messages in the first batch
}

func (b *blockingSink) DeliverBatch(ctx context.Context, ms []*protocol.Message) []error {
	b.first.Do(func() {
		b.firstN.Store(int32(len(ms)))
		b.calls.Add(1)
		<-b.release
	})
	errs := make([]error, len(ms))
	for i, m := range ms {
		errs[i] = b.Deliver(ctx, m)
	}
	return errs
}

// countingStore counts the messages read to be sent (Wire calls).
type countingStore struct {
	*memStore
	wires atomic.Int32
}

func (c *countingStore) Wire(space, id protocol.ID) ([]byte, bool, error) {
	c.wires.Add(1)
	return c.memStore.Wire(space, id)
}

// TestReceivePipelined: while one exchange's messages are being stored,
// the session has already answered, and the peer serves the next ones
// (it reads more than the first exchange's messages to send them);
// nothing is lost, and the session ends once all are stored.
func TestReceivePipelined(t *testing.T) {
	t.Parallel()
	small := func(c *config) error { c.msgBudget = 2 << 10; return nil } // a few messages an exchange
	src := &countingStore{memStore: newMemStore()}
	a := newNode(t, small)
	hb := newHost(t)
	svc, err := New(hb, src, small)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	svc.Join(testSpace, src.memStore)
	connect(t, a.h, hb)
	sink := &blockingSink{memStore: a.st, release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(sink.release) }) }
	t.Cleanup(release) // also when the test fails before
	a.svc.Join(testSpace, sink)
	msgs := newAuthor(t).chain(t, 200, 0)
	addAll(src.memStore, msgs)

	result := make(chan error, 1)
	go func() {
		_, err := a.svc.Sync(syncCtx(t), hb.ID(), testSpace)
		result <- err
	}()
	// The first batch is held; the peer is asked for (and reads) more.
	deadline := time.Now().Add(30 * time.Second)
	for sink.calls.Load() == 0 || src.wires.Load() <= sink.firstN.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("with the first batch (%d messages) not stored: the peer read %d messages to send", sink.firstN.Load(), src.wires.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-result:
		t.Fatalf("session ended with a batch not stored: %v", err)
	default:
	}
	release()
	if err := <-result; err != nil {
		t.Fatal(err)
	}
	if got := len(a.st.ids(testSpace)); got != len(msgs) {
		t.Fatalf("a holds %d of %d", got, len(msgs))
	}
}
