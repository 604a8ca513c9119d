package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSpawnDuringClose starts background work from several goroutines
// while Close runs, as messages taken in during shutdown do: no work may
// start after Close returned, and none may still run then.
func TestSpawnDuringClose(t *testing.T) {
	for round := range 50 {
		n := &Node{}
		n.bg, n.cancel = context.WithCancel(context.Background())
		var running, started atomic.Int64
		var closed, late atomic.Bool
		work := func() {
			if closed.Load() {
				late.Store(true)
			}
			running.Add(1)
			defer running.Add(-1)
			<-n.bg.Done()
		}
		stop := make(chan struct{})
		var spawners sync.WaitGroup
		for range 4 {
			spawners.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if n.spawn(work) {
						started.Add(1)
					}
				}
			})
		}
		deadline := time.Now().Add(10 * time.Second)
		for started.Load() < 20 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		closed.Store(true)
		if r := running.Load(); r != 0 {
			t.Fatalf("round %d: %d background tasks still run after Close", round, r)
		}
		time.Sleep(2 * time.Millisecond) // let the spawners try again
		close(stop)
		spawners.Wait()
		if late.Load() {
			t.Fatalf("round %d: background work started after Close returned", round)
		}
		if n.spawn(work) {
			t.Fatalf("round %d: spawn after Close started work", round)
		}
	}
}
