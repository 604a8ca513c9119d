package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/protocol"
)

// TestSendAnnouncesItsPut: every send, stored or refused at any step,
// takes back what it announced to the store (store.Expect) by the time it
// returns: a send left announced would hold every later sync back.
func TestSendAnnouncesItsPut(t *testing.T) {
	n := deliverNode(t)
	sp, _, err := n.Join("test-send-expect", nil)
	if err != nil {
		t.Fatal(err)
	}
	posts := []Post{
		{Content: json.RawMessage(`{"text":"ok"}`)},
		{},                                // no content: refused before signing
		{Content: json.RawMessage(`[1]`)}, // not an object: refused by Sign
		{Content: json.RawMessage(`{"text":"` + strings.Repeat("x", n.cfg.Limits.MaxSize) + `"}`)}, // too large
		{Content: json.RawMessage(`{"text":"ttl"}`), TTL: -time.Second},                            // refused
	}
	var wg sync.WaitGroup
	errs := make([]error, 8*len(posts))
	for i := range errs {
		wg.Go(func() {
			p := posts[i%len(posts)]
			if i%len(posts) == 0 {
				p.Content = json.RawMessage(fmt.Sprintf(`{"text":"ok %d"}`, i))
			}
			_, errs[i] = n.Send(t.Context(), sp.ID, p)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if ok := i%len(posts) == 0; ok != (err == nil) {
			t.Errorf("send %d: err %v", i, err)
		}
	}
	if got := n.store.DurableAhead(); got != 0 {
		t.Fatalf("%d durable Puts still announced after every send returned", got)
	}
}

// TestSendPacedNotAnnounced: a send the space's pace holds back is not
// announced to the store while it waits (others' syncs would each wait
// for it up to the store's bound).
func TestSendPacedNotAnnounced(t *testing.T) {
	n := deliverNode(t)
	sp, _, err := n.Join("test-send-paced", nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := rate.Rate{PerSecond: 0.6, Burst: 1} // a turn every 1.7 s
	p := &pacer{member: slow, stranger: slow, private: func(protocol.ID) bool { return false }, next: map[protocol.ID]time.Time{}}
	n.pacer = p
	turn := func() time.Time {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.next[sp.ID]
	}
	if _, err := n.Send(t.Context(), sp.ID, Post{Content: json.RawMessage(`{"text":"first"}`)}); err != nil {
		t.Fatal(err)
	}
	first := turn()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := n.Send(ctx, sp.ID, Post{Content: json.RawMessage(`{"text":"second"}`)})
		done <- err
	}()
	waitFor(t, "the second send to take its turn", func() bool { return turn().After(first) }) // the second took its turn and waits for it
	if got := n.store.DurableAhead(); got != 0 {
		t.Errorf("a send waiting for its turn is announced (%d)", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled send: %v", err)
	}
}

// TestSendPrivateNotAnnounced: a send to a private space is not announced
// to the store while it waits for the space's lock (a catch-up's batch
// holds it while it is stored): every sync of the store would wait for it
// up to the store's bound meanwhile.
func TestSendPrivateNotAnnounced(t *testing.T) {
	n := deliverNode(t)
	sp, err := n.CreatePrivate(t.Context(), "test-send-private", false)
	if err != nil {
		t.Fatal(err)
	}
	ps := n.private.get(sp.ID)
	if ps == nil {
		t.Fatal("the private space is not known")
	}
	ps.mu.Lock() // as a batch being stored holds it
	done := make(chan error, 1)
	go func() {
		_, err := n.Send(t.Context(), sp.ID, Post{Content: json.RawMessage(`{"text":"held"}`)})
		done <- err
	}()
	// The send reaches the lock (its draft reads the heads first) and
	// waits for it; it must not be announced meanwhile.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if got := n.store.DurableAhead(); got != 0 {
			ps.mu.Unlock()
			t.Fatalf("a send waiting for its private space's lock is announced (%d)", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ps.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
