package node

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// TestDeliverGroups: messages gossip hands over concurrently, each once or
// twice (gossip and sync racing), are each stored once through the group
// commit, on a real node and store; one over the space's size limit is
// declined (mesh.ErrDeclined) and the other of its group is stored all the
// same.
func TestDeliverGroups(t *testing.T) {
	n := deliverNode(t)
	const name = "test-deliver"
	sp, _, err := n.Join(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	msgs := make([]*protocol.Message, 64)
	for i := range msgs {
		content, _ := json.Marshal(map[string]string{"text": fmt.Sprint("m", i)})
		msgs[i], err = protocol.Sign(key, protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Type: "text", Content: content}, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
	}
	sink := spaceSink{n}
	errs := make([]error, 2*len(msgs))
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = sink.Deliver(t.Context(), msgs[i%len(msgs)]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	got, _, err := n.Read(sp.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("%d messages stored, want %d (each once)", len(got), len(msgs))
	}
	again, _, _ := n.Read(sp.ID, 0, 1000)
	for i := range got {
		if got[i].ID != again[i].ID || got[i].Cursor != again[i].Cursor {
			t.Fatal("reads disagree")
		}
	}

	// Over the size limit: declined, stored nowhere; the rest unharmed.
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 2048)})
	lim := protocol.DefaultLimits()
	over, err := protocol.Sign(key, protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Type: "text", Content: big}, lim)
	if err != nil {
		t.Fatal(err)
	}
	n.limits.set(sp.ID, store.SpaceLimits{MaxMessageSize: len(over.Body) - 1})
	content, _ := json.Marshal(map[string]string{"text": "small"})
	small, _ := protocol.Sign(key, protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Type: "text", Content: content}, lim)
	// Both in one group: held while they queue, then handed to the first.
	n.group.mu.Lock()
	n.group.busy = true
	n.group.mu.Unlock()
	var overErr, smallErr error
	wg.Go(func() { overErr = sink.Deliver(t.Context(), over) })
	waitFor(t, "the first to queue", func() bool { return queuedLen(&n.group) == 1 })
	wg.Go(func() { smallErr = sink.Deliver(t.Context(), small) })
	waitFor(t, "both to queue", func() bool { return queuedLen(&n.group) == 2 })
	n.group.mu.Lock()
	n.group.queue[0].done <- false
	n.group.mu.Unlock()
	wg.Wait()
	if !errors.Is(overErr, mesh.ErrDeclined) {
		t.Errorf("message over the space's limit: %v, want ErrDeclined", overErr)
	}
	if smallErr != nil {
		t.Errorf("message within it: %v", smallErr)
	}
	if has, _ := n.store.Has(over.ID); has {
		t.Error("the message over the limit was stored")
	}
	if has, _ := n.store.Has(small.ID); !has {
		t.Error("the message within the limit was not stored")
	}
}

// TestDeliverGossip: a batch gossip hands over (mesh.GossipBatchSink) is
// stored at once, each message once, whether it was delivered before or
// comes twice in the batch, with one error per message: nil, or
// ErrDeclined for one over the space's size limit, the rest unharmed.
func TestDeliverGossip(t *testing.T) {
	n := deliverNode(t)
	sp, _, err := n.Join("test-deliver-gossip", nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	lim := protocol.DefaultLimits()
	sign := func(text string) *protocol.Message {
		content, _ := json.Marshal(map[string]string{"text": text})
		m, err := protocol.Sign(key, protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Type: "text", Content: content}, lim)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	sink := spaceSink{n}
	first := sign("first")
	if errs := sink.DeliverGossip(t.Context(), []*protocol.Message{first}); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("one message: %v", errs)
	}
	over := sign(strings.Repeat("x", 2048))
	n.limits.set(sp.ID, store.SpaceLimits{MaxMessageSize: len(over.Body) - 1})
	a, b := sign("a"), sign("b")
	batch := []*protocol.Message{a, first, over, b, a}
	errs := sink.DeliverGossip(t.Context(), batch)
	if len(errs) != len(batch) {
		t.Fatalf("%d errors for %d messages", len(errs), len(batch))
	}
	for i, err := range errs {
		if want := batch[i] == over; errors.Is(err, mesh.ErrDeclined) != want || (!want && err != nil) {
			t.Errorf("message %d: %v", i, err)
		}
	}
	got, _, err := n.Read(sp.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[protocol.ID]int{}
	for _, m := range got {
		stored[m.ID]++
	}
	if len(got) != 3 || stored[first.ID] != 1 || stored[a.ID] != 1 || stored[b.ID] != 1 {
		t.Errorf("stored %v, want first, a and b once each", stored)
	}
}

// deliverNode is a real node on loopback with its store in a temporary
// home, closed when the test ends.
func deliverNode(t *testing.T) *Node {
	t.Helper()
	cfg := Default()
	cfg.Home, cfg.MDNS, cfg.DHTMode = t.TempDir(), false, "client"
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	n, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
