package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// TestPacerTurns: posts to a space take turns in the order they ask: a
// burst at once, then one per 1/rate; a post whose turn is more than
// paceWait away fails at once with rate_limited; spaces are paced apart,
// private ones at the member rate.
func TestPacerTurns(t *testing.T) {
	open, priv := protocol.SpaceID("test/open"), protocol.SpaceID("test/private")
	// Author 10/s burst 5 → member 8/s burst 4; strangers 5/s burst 4 →
	// open spaces 2/s burst 2.
	p := newPacer(rate.Rate{PerSecond: 10, Burst: 5}, rate.Rate{PerSecond: 5, Burst: 4},
		func(s protocol.ID) bool { return s == priv })
	ctx := context.Background()
	start := time.Now()
	for range 2 {
		if err := p.wait(ctx, open, 100); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el >= 450*time.Millisecond { // a turn after the burst is 0.5 s away
		t.Errorf("the burst waited %v", el)
	}
	// The next four have turns 0.5, 1, 1.5 and 2 s away; the one after,
	// 2.5 s, is refused at once.
	var wg sync.WaitGroup
	done := make([]time.Duration, 4)
	nextTurn := func() time.Time {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.next[open]
	}
	for i := range 4 {
		asked := nextTurn()
		wg.Go(func() {
			if err := p.wait(ctx, open, 100); err != nil {
				t.Errorf("post %d: %v", i, err)
			}
			done[i] = time.Since(start)
		})
		// In order: the next asks once this one has its turn, however
		// long a loaded machine takes to run it.
		for deadline := time.Now().Add(10 * time.Second); nextTurn().Equal(asked); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("post %d never asked for its turn", i)
			}
		}
	}
	t0 := time.Now()
	err := p.wait(ctx, open, 100)
	var e *Error
	if !errors.As(err, &e) || e.Code != api.CodeRateLimited {
		t.Errorf("a post 2.5 s from its turn: %v, want rate_limited", err)
	}
	if el := time.Since(t0); el >= time.Second { // waiting for the turn would take 2.5 s
		t.Errorf("the refusal took %v, want at once", el)
	}
	// A private space is paced on its own, at the member rate: 4 at once.
	t1 := time.Now()
	for range 4 {
		if err := p.wait(ctx, priv, 100); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(t1); el >= 450*time.Millisecond { // an open space's turn would be 0.5 s away
		t.Errorf("the private space's burst waited %v", el)
	}
	wg.Wait()
	for i, d := range done {
		want := time.Duration(i+1) * 500 * time.Millisecond
		if d < want-50*time.Millisecond {
			t.Errorf("post %d went after %v, before its turn at %v", i, d, want)
		}
		if i > 0 && d < done[i-1] {
			t.Errorf("post %d went before post %d", i, i-1)
		}
	}
}
