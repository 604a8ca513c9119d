package reconcile

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// batchGate is a BatchSink whose first batch waits until release is
// closed (or returns fail, when set); it records the batches it was given
// and whether two ever overlapped.
type batchGate struct {
	*memStore
	release chan struct{}
	entered chan struct{} // closed when the first batch arrives
	fail    error

	mu      sync.Mutex
	active  int
	overlap bool
	batches [][]protocol.ID
}

func newBatchGate() *batchGate {
	return &batchGate{memStore: newMemStore(), release: make(chan struct{}), entered: make(chan struct{})}
}

func (g *batchGate) DeliverBatch(ctx context.Context, ms []*protocol.Message) []error {
	g.mu.Lock()
	g.active++
	g.overlap = g.overlap || g.active > 1
	first := len(g.batches) == 0
	ids := make([]protocol.ID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	g.batches = append(g.batches, ids)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.active--
		g.mu.Unlock()
	}()
	errs := make([]error, len(ms))
	if first {
		close(g.entered)
		<-g.release
		if g.fail != nil {
			for i := range errs {
				errs[i] = g.fail
			}
			return errs
		}
	}
	for i, m := range ms {
		errs[i] = g.memStore.Deliver(ctx, m)
	}
	return errs
}

func wiresOf(ms []*protocol.Message) [][]byte {
	w := make([]([]byte), len(ms))
	for i, m := range ms {
		w[i] = m.Encode()
	}
	return w
}

// waitDone waits for d's work to end, failing the test after a minute.
func waitDone(t *testing.T, d *delivery, what string) {
	t.Helper()
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not done", what)
	}
}

// TestReceiveValidatesWhileStoring: an exchange's messages are validated
// while the exchange before is still being stored (an invalid one refuses
// the peer at once), and they are stored after it, never at the same time.
func TestReceiveValidatesWhileStoring(t *testing.T) {
	t.Parallel()
	cfg := defaults()
	msgs := newAuthor(t).chain(t, 6, 0)

	// An invalid message in the second exchange is found while the
	// first is held in the sink.
	g := newBatchGate()
	s := newSession(testSpace, protocol.MinSyncKey, g.memStore, g, &cfg)
	d1 := s.startReceive(t.Context(), wiresOf(msgs[:3]), nil)
	<-g.entered
	bad := wiresOf(msgs[3:])
	bad[1][len(bad[1])-1] ^= 1 // its signature
	d2 := s.startReceive(t.Context(), bad, d1)
	waitDone(t, d2, "an exchange with a forged message, while the one before is stored")
	if !errors.Is(d2.err, ErrRefused) {
		t.Fatalf("forged message: %v", d2.err)
	}
	close(g.release)
	waitDone(t, d1, "the first exchange")

	// Valid: stored in order, one batch at a time.
	g = newBatchGate()
	s = newSession(testSpace, protocol.MinSyncKey, g.memStore, g, &cfg)
	first := s.startReceive(t.Context(), wiresOf(msgs[:3]), nil)
	<-g.entered
	second := s.startReceive(t.Context(), wiresOf(msgs[3:]), first)
	// The second must not reach the sink while the first is held: give it
	// the chance for a moment.
	time.Sleep(100 * time.Millisecond)
	close(g.release)
	if err := s.apply(first); err != nil {
		t.Fatal(err)
	}
	s.inflight = []*delivery{second}
	if err := s.settle(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.overlap || len(g.batches) != 2 || g.batches[0][0] != msgs[0].ID || g.batches[1][0] != msgs[3].ID {
		t.Fatalf("batches %v overlapping %v", g.batches, g.overlap)
	}
	if s.stats.Received != 6 {
		t.Fatalf("received %d of 6", s.stats.Received)
	}
}

// TestReceiveAfterFailedStore: when the exchange before could not be
// stored, the next one's messages are not handed to the sink at all.
func TestReceiveAfterFailedStore(t *testing.T) {
	t.Parallel()
	cfg := defaults()
	msgs := newAuthor(t).chain(t, 6, 0)
	g := newBatchGate()
	g.fail = errors.New("disk full")
	s := newSession(testSpace, protocol.MinSyncKey, g.memStore, g, &cfg)
	d1 := s.startReceive(t.Context(), wiresOf(msgs[:3]), nil)
	<-g.entered
	d2 := s.startReceive(t.Context(), wiresOf(msgs[3:]), d1)
	close(g.release)
	waitDone(t, d2, "the second exchange")
	if d1.err == nil || d2.err == nil {
		t.Fatalf("errors %v, %v", d1.err, d2.err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.batches) != 1 || len(g.memStore.ids(testSpace)) != 0 {
		t.Fatalf("%d batches, %d stored", len(g.batches), len(g.memStore.ids(testSpace)))
	}
}

// TestProcessAnswersAheadOfStoring: the answer to an exchange does not
// wait for the one before it to be stored (pipelineDepth exchanges are
// validated and stored while the peer reads the next messages asked for);
// they are stored in order all the same, and the end of the session
// (settle) waits for every one.
func TestProcessAnswersAheadOfStoring(t *testing.T) {
	t.Parallel()
	cfg := defaults()
	msgs := newAuthor(t).chain(t, 9, 0)
	g := newBatchGate()
	s := newSession(testSpace, protocol.MinSyncKey, g.memStore, g, &cfg)
	for _, m := range msgs {
		if err := s.want(m.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.toWant = nil // asked for already
	if _, err := s.process(t.Context(), &exchange{msgs: wiresOf(msgs[:3])}); err != nil {
		t.Fatal(err)
	}
	<-g.entered // the first exchange is held in the sink
	answered := make(chan error, 1)
	go func() {
		_, err := s.process(t.Context(), &exchange{msgs: wiresOf(msgs[3:6])})
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(g.release)
		t.Fatal("the answer waited for the exchange before the last to be stored")
	}
	if n := len(s.inflight); n != 2 {
		t.Fatalf("%d exchanges in flight, want 2", n)
	}
	close(g.release)
	if err := s.settle(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.overlap || len(g.batches) != 2 || g.batches[0][0] != msgs[0].ID || g.batches[1][0] != msgs[3].ID {
		t.Fatalf("batches %v overlapping %v", g.batches, g.overlap)
	}
	if s.stats.Received != 6 || len(s.wanted) != 3 {
		t.Fatalf("received %d of 6, %d still wanted (want 3)", s.stats.Received, len(s.wanted))
	}
}
