package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

// TestEventsReplayFollowResume: a follower gets the stored messages, then
// live ones, in order, with none lost while it was not reading; a new
// stream resumed from any event's cursor continues right after it.
func TestEventsReplayFollowResume(t *testing.T) {
	_, c := startNode(t, nil)
	ctx := context.Background()
	if _, err := c.Join(ctx, "stream"); err != nil {
		t.Fatal(err)
	}
	var sent []string
	send := func(k int) {
		for i := range k {
			m, err := c.SendText(ctx, "stream", fmt.Sprintf("m%d", len(sent)+i))
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, m.ID)
		}
	}
	send(20)

	got := make(chan api.Message)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(fctx, "stream", "", func(m api.Message) error {
			select {
			case got <- m:
				return nil
			case <-fctx.Done():
				return fctx.Err()
			}
		})
	}()
	var recv []api.Message
	next := func() api.Message {
		t.Helper()
		select {
		case m := <-got:
			recv = append(recv, m)
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("no event after %d", len(recv))
		}
		return api.Message{}
	}
	for range 5 {
		next()
	}
	// The reader stalls (nobody receives from got) while 300 more arrive.
	send(300)
	for len(recv) < len(sent) {
		next()
	}
	for i, m := range recv {
		if m.ID != sent[i] {
			t.Fatalf("event %d is %s, want %s", i, m.ID, sent[i])
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow ended with %v", err)
	}

	// Resume after event 99 with Last-Event-ID: the next one is event 100.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var resumed []string
	err := c.Follow(rctx, "stream", recv[99].Cursor, func(m api.Message) error {
		resumed = append(resumed, m.ID)
		if len(resumed) == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	if resumed[0] != sent[100] || resumed[2] != sent[102] {
		t.Errorf("resumed at %v, want %v", resumed, sent[100:103])
	}
}

var errStop = errors.New("stop")
