package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// t0 is when every test's fake clock starts.
var t0 = time.UnixMilli(1767225600000) // 2026-01-01T00:00:00Z

// fakeClock is a Clock that moves only when a test advances it. Timers
// fire, in order, on the goroutine that advances the clock past them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	if d <= 0 {
		go f()
		return func() bool { return false }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.timers, t)
		if i < 0 {
			return false
		}
		c.timers = slices.Delete(c.timers, i, i+1)
		return true
	}
}

func (c *fakeClock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// AdvanceTo sets the clock to t (if later) and fires the timers due by then.
func (c *fakeClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []*fakeTimer
	c.timers = slices.DeleteFunc(c.timers, func(tm *fakeTimer) bool {
		if tm.at.After(c.now) {
			return false
		}
		due = append(due, tm)
		return true
	})
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	for _, tm := range due {
		tm.f()
	}
}

// Advance moves the clock on by d.
func (c *fakeClock) Advance(d time.Duration) { c.AdvanceTo(c.Now().Add(d)) }

// Timers returns when the pending timers fire, earliest first.
func (c *fakeClock) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, len(c.timers))
	for i, t := range c.timers {
		out[i] = t.at
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// seqRand returns vals in turn, over and over.
type seqRand struct {
	mu   sync.Mutex
	vals []float64
	i    int
}

func (r *seqRand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.vals[r.i%len(r.vals)]
	r.i++
	return v
}

// half is a jitter source that adds no jitter.
func half() float64 { return 0.5 }

// memStore is a Store in memory. Unlike *store.Store, it keeps a NextTry
// past the deadline, so that tests see the outbox's own choice.
type memStore struct {
	mu     sync.Mutex
	queued map[protocol.ID]store.Outgoing
	dead   []store.DeadLetter
	// afterDue, when set, runs when Due has read, before it returns.
	afterDue func()
}

func newMemStore() *memStore { return &memStore{queued: make(map[protocol.ID]store.Outgoing)} }

func (s *memStore) Enqueue(o store.Outgoing) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.ID.IsZero() || o.To == "" || len(o.Raw) == 0 {
		return false, errors.New("memstore: bad outgoing message")
	}
	if _, ok := s.queued[o.ID]; ok || slices.ContainsFunc(s.dead, func(d store.DeadLetter) bool { return d.ID == o.ID }) {
		return false, nil
	}
	if o.NextTry == 0 {
		o.NextTry = o.Created
	}
	s.queued[o.ID] = o
	return true, nil
}

// list returns up to limit queued messages that keep says to, in next-try
// order.
func (s *memStore) list(limit int, keep func(store.Outgoing) bool) ([]store.Outgoing, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memstore: limit %d", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Outgoing
	for _, o := range s.queued {
		if keep(o) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b store.Outgoing) int {
		return cmp.Or(cmp.Compare(a.NextTry, b.NextTry), slices.Compare(a.ID[:], b.ID[:]))
	})
	return out[:min(limit, len(out))], nil
}

func (s *memStore) Pending(to string, limit int) ([]store.Outgoing, error) {
	return s.list(limit, func(o store.Outgoing) bool { return to == "" || o.To == to })
}

func (s *memStore) Due(now int64, limit int) ([]store.Outgoing, error) {
	out, err := s.list(limit, func(o store.Outgoing) bool { return o.NextTry <= now })
	s.mu.Lock()
	after := s.afterDue
	s.mu.Unlock()
	if after != nil {
		after()
	}
	return out, err
}

func (s *memStore) Delivered(id protocol.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queued, id)
	return nil
}

func (s *memStore) Retry(id protocol.ID, attempts int, next int64, lastErr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.queued[id]
	if !ok {
		return fmt.Errorf("memstore: retry %s: %w", id, store.ErrNotFound)
	}
	o.Attempts, o.NextTry, o.LastError = attempts, next, lastErr
	s.queued[id] = o
	return nil
}

func (s *memStore) Kill(id protocol.ID, reason string, at int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.queued[id]
	if !ok {
		return fmt.Errorf("memstore: kill %s: %w", id, store.ErrNotFound)
	}
	delete(s.queued, id)
	s.dead = append(s.dead, store.DeadLetter{Outgoing: o, Reason: reason, DeadAt: at, Cursor: store.Cursor(len(s.dead) + 1)})
	return nil
}

func (s *memStore) DeadLetters(after store.Cursor, limit int) ([]store.DeadLetter, store.Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.DeadLetter
	for _, d := range s.dead {
		if d.Cursor > after && len(out) < limit {
			out = append(out, d)
		}
	}
	if len(out) > 0 {
		after = out[len(out)-1].Cursor
	}
	return out, after, nil
}

// testStore is a Store whose dead letters a test can read.
type testStore interface {
	Store
	DeadLetters(after store.Cursor, limit int) ([]store.DeadLetter, store.Cursor, error)
}

var _ testStore = (*store.Store)(nil)

// forEachStore runs f against the in-memory fake and the real store (on
// disk in a temporary directory).
func forEachStore(t *testing.T, f func(t *testing.T, st testStore)) {
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		f(t, newMemStore())
	})
	t.Run("store", func(t *testing.T) {
		t.Parallel()
		st, err := store.Open(store.Options{Dir: t.TempDir(), GCInterval: -1, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
}

// queued returns message id if it is in st's outbox.
func queued(tb testing.TB, st testStore, id protocol.ID) (store.Outgoing, bool) {
	tb.Helper()
	all, err := st.Pending("", 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range all {
		if o.ID == id {
			return o, true
		}
	}
	return store.Outgoing{}, false
}

// deadLetter returns message id if it is among st's dead letters.
func deadLetter(tb testing.TB, st testStore, id protocol.ID) (store.DeadLetter, bool) {
	tb.Helper()
	all, _, err := st.DeadLetters(0, 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range all {
		if d.ID == id {
			return d, true
		}
	}
	return store.DeadLetter{}, false
}

// waitQueued waits until message id is queued and cond holds for it, and
// returns it.
func waitQueued(tb testing.TB, st testStore, id protocol.ID, what string, cond func(store.Outgoing) bool) store.Outgoing {
	tb.Helper()
	var o store.Outgoing
	waitFor(tb, what, func() bool {
		var ok bool
		o, ok = queued(tb, st, id)
		return ok && cond(o)
	})
	return o
}

// gone reports whether message id has left st's outbox.
func gone(tb testing.TB, st testStore, id protocol.ID) bool {
	tb.Helper()
	_, ok := queued(tb, st, id)
	return !ok
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// fakePeer is how a fakeTransport's recipient behaves.
type fakePeer struct {
	dialErr  error
	dialHang bool // Dial waits for its ctx to end
	// gate, when set, holds Send until it is closed or (unless ignoreCtx)
	// Send's ctx ends.
	gate      chan struct{}
	ignoreCtx bool
	// refuse answers a message; nil accepts it.
	refuse func(raw []byte) *protocol.CallError

	dials, inflight, maxInflight int
	sends                        []int    // messages per Send call
	got                          [][]byte // messages accepted
}

// fakeTransport delivers to fake peers, which are reachable and accept
// everything unless configured otherwise.
type fakeTransport struct {
	mu    sync.Mutex
	peers map[peer.ID]*fakePeer
}

func newFakeTransport() *fakeTransport { return &fakeTransport{peers: make(map[peer.ID]*fakePeer)} }

func (tr *fakeTransport) peer(p peer.ID) *fakePeer {
	fp := tr.peers[p]
	if fp == nil {
		fp = &fakePeer{}
		tr.peers[p] = fp
	}
	return fp
}

// set changes how p behaves.
func (tr *fakeTransport) set(p peer.ID, f func(*fakePeer)) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	f(tr.peer(p))
}

// get reads p's state.
func (tr *fakeTransport) get(p peer.ID) fakePeer {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fp := *tr.peer(p)
	fp.sends = slices.Clone(fp.sends)
	fp.got = slices.Clone(fp.got)
	return fp
}

func (tr *fakeTransport) Dial(ctx context.Context, p peer.ID) error {
	tr.mu.Lock()
	fp := tr.peer(p)
	fp.dials++
	err, hang := fp.dialErr, fp.dialHang
	tr.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (tr *fakeTransport) Send(ctx context.Context, p peer.ID, raws [][]byte, ack func(int, *protocol.CallError)) error {
	tr.mu.Lock()
	fp := tr.peer(p)
	fp.inflight++
	fp.maxInflight = max(fp.maxInflight, fp.inflight)
	fp.sends = append(fp.sends, len(raws))
	gate, ignoreCtx := fp.gate, fp.ignoreCtx
	tr.mu.Unlock()
	defer func() {
		tr.mu.Lock()
		fp.inflight--
		tr.mu.Unlock()
	}()
	if gate != nil {
		done := ctx.Done()
		if ignoreCtx {
			done = nil
		}
		select {
		case <-gate:
		case <-done:
			return ctx.Err()
		}
	}
	for i, raw := range raws {
		tr.mu.Lock()
		var refusal *protocol.CallError
		if fp.refuse != nil {
			refusal = fp.refuse(raw)
		}
		if refusal == nil {
			fp.got = append(fp.got, raw)
		}
		tr.mu.Unlock()
		ack(i, refusal)
	}
	return nil
}

// newPeer returns a fresh peer ID.
func newPeer(tb testing.TB) peer.ID {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// dm signs a direct message to to, created at t0 with the given TTL.
func dm(tb testing.TB, to peer.ID, ttl time.Duration) *protocol.Message {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := protocol.Sign(key, protocol.Draft{
		Space:     protocol.InboxSpace(to),
		CreatedAt: t0,
		Refs:      protocol.Refs{Nodes: []string{to.String()}},
		Type:      protocol.KindEvent,
		TTL:       ttl,
		Content:   []byte(`{"text":"hello"}`),
	}, protocol.DefaultLimits())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// enqueue puts a message named name for to in st, due at t0, with the
// given deadline, and returns it.
func enqueue(tb testing.TB, st Store, name string, to peer.ID, deadline time.Time) store.Outgoing {
	tb.Helper()
	o := store.Outgoing{
		ID: protocol.MessageID([]byte(name)), To: to.String(), Raw: []byte("wire:" + name),
		Created: t0.UnixMilli(), NextTry: t0.UnixMilli(), Deadline: deadline.UnixMilli(),
	}
	if added, err := st.Enqueue(o); err != nil || !added {
		tb.Fatalf("enqueue %s: %v, %v", name, added, err)
	}
	return o
}

// newTestOutbox returns an outbox over st and tr on clk, with jitter from
// rnd.
func newTestOutbox(tb testing.TB, st Store, tr Transport, clk Clock, rnd func() float64) *Outbox {
	tb.Helper()
	o, err := New(st, tr, WithClock(clk), WithRand(rnd))
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// start runs o until the test ends.
func start(tb testing.TB, o *Outbox) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitIdle waits until o has no delivery attempt in flight or waiting.
func waitIdle(tb testing.TB, o *Outbox) {
	tb.Helper()
	waitFor(tb, "no delivery attempt in flight", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.inflight) == 0
	})
}
