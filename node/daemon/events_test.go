package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// TestAfterEnd: ?after=end reads and follows from the current end, in a
// space and in the inbox.
func TestAfterEnd(t *testing.T) {
	_, c := startNode(t, nil)
	ctx := t.Context()
	if _, err := c.Join(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.SendText(ctx, "lab", fmt.Sprint("old ", i)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.Read(ctx, "lab", api.EndCursor, 10)
	if err != nil || len(page.Messages) != 0 || page.Next == "" || page.Next == api.EndCursor {
		t.Fatalf("read after end = %+v, %v; want no messages and the end's cursor", page, err)
	}
	if page, err := c.Inbox(ctx, api.EndCursor, 10); err != nil || len(page.Messages) != 0 || page.Next != "" {
		t.Fatalf("inbox after end of an empty inbox = %+v, %v; want nothing and the start", page, err)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	followed := make(chan api.Message, 10)
	go c.Follow(fctx, "lab", api.EndCursor, func(m api.Message) error { followed <- m; return nil })
	// The follower subscribes at some point while "new" messages are sent:
	// the first it gets must be one of them, never an old one.
	var sent []string
	func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case got := <-followed:
				if !slices.Contains(sent, got.ID) {
					t.Fatalf("followed %s (%s) after end, want one of the new messages", got.ID, got.Content)
				}
				return
			case <-tick.C:
				m, err := c.SendText(ctx, "lab", fmt.Sprint("new ", len(sent)))
				if err != nil {
					t.Fatal(err)
				}
				sent = append(sent, m.ID)
			case <-deadline:
				t.Fatal("follow after end delivered nothing")
			}
		}
	}()
	page, err = c.Read(ctx, "lab", page.Next, 1000)
	if err != nil || len(page.Messages) != len(sent) || page.Messages[0].ID != sent[0] {
		t.Fatalf("read after the end's cursor = %d messages, %v; want only the %d new ones", len(page.Messages), err, len(sent))
	}
}
