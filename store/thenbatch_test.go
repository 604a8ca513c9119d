package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestPutWithinThenBatch: in a batch (followers' Puts), committed is called
// for the Puts stored and not for one cancelled while queued nor one over
// its quota.
func TestPutWithinThenBatch(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	release := make(chan struct{})
	var once sync.Once
	s.afterRead = func(m *Message) {
		if string(m.Raw) == "first" {
			once.Do(func() { <-release })
		}
	}
	var calls [4]atomic.Int32
	var wg sync.WaitGroup
	put := func(i int, ctx context.Context, m Message, q Quota) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.PutWithinThen(ctx, m, q, func() { calls[i].Add(1) })
		}()
	}
	put(0, context.Background(), syncTestMsg(sp, "first"), Quota{})
	waitFor(t, func() bool {
		s.commits.mu.Lock()
		defer s.commits.mu.Unlock()
		return s.commits.leading && len(s.commits.queue) == 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	put(1, ctx, syncTestMsg(sp, "cancelled"), Quota{})
	put(2, context.Background(), syncTestMsg(sp, "over quota"), Quota{SpaceBytes: 1})
	put(3, context.Background(), syncTestMsg(sp, "stored"), Quota{})
	waitFor(t, func() bool { s.commits.mu.Lock(); defer s.commits.mu.Unlock(); return len(s.commits.queue) == 3 })
	cancel()
	close(release)
	wg.Wait()
	want := [4]int32{1, 0, 0, 1}
	for i := range calls {
		if got := calls[i].Load(); got != want[i] {
			t.Errorf("put %d: committed called %d times, want %d", i, got, want[i])
		}
	}
}
