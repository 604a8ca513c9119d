package node

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// TestSealedKeyBeforeSealed: a sealed space's key message is stored before
// the sealed messages it opens, however a catch-up brings them. A member j
// is down while the owner a posts a few messages in epoch 0, rotates the
// key (a key message wrapping epoch 1 to both) and posts more in epoch 1.
// j then gets them as a sync exchange would hand them over, the key
// message last: first the epoch 1 messages alone (held for want of their
// parent, the key message), then, after a restart (which forgets what was
// held), everything again, the key message after the messages sealed
// under it. j refuses nothing, loses nothing, stores the key message
// before every message sealed under its epoch (a reader going through the
// store in order, as a follower does, always holds the key first), its
// follower reads every message in clear as it comes, and after another
// restart every message still opens.
func TestSealedKeyBeforeSealed(t *testing.T) {
	ctx := t.Context()
	a := deliverNode(t)
	sp, err := a.CreatePrivate(ctx, "vault", true)
	if err != nil {
		t.Fatal(err)
	}
	space := sp.ID

	jcfg := Default()
	jcfg.Home, jcfg.MDNS, jcfg.DHTMode = t.TempDir(), false, "client"
	jcfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	for _, ad := range a.mesh.Addrs() {
		jcfg.Bootstrap = append(jcfg.Bootstrap, ad.String())
	}
	var j *Node
	start := func(boot bool) {
		t.Helper()
		cfg := jcfg
		if !boot {
			cfg.Bootstrap = nil
		}
		if j, err = New(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	stop := func() {
		t.Helper()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j = nil
	}
	t.Cleanup(func() {
		if j != nil {
			j.Close()
		}
	})
	start(true)
	_, tok, err := a.Invite("vault", InviteOptions{Peer: j.mesh.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.JoinInvite(ctx, tok); err != nil {
		t.Fatal(err)
	}
	held := ids(t, j, space)
	stop()

	// a posts while j is down: epoch 0, the key message of epoch 1, epoch 1.
	send := func(text string) {
		t.Helper()
		if _, err := a.Send(ctx, space, Post{Type: "text", Content: json.RawMessage(fmt.Sprintf(`{"text":%q}`, text))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		send(fmt.Sprint("epoch 0, ", i))
	}
	as := a.private.get(space)
	ks, err := a.rekey(space, as, *as.current.Load(), "")
	if err != nil {
		t.Fatal(err)
	}
	if ks.Epoch != 1 || len(ks.Shares) != 2 {
		t.Fatalf("rekey: epoch %d, %d shares; want epoch 1 for a and j", ks.Epoch, len(ks.Shares))
	}
	content, _ := json.Marshal(member.KeyMessage{Keys: []member.KeyShares{*ks}})
	keyMsg, err := a.Send(ctx, space, Post{Type: member.TypeKey, Content: content})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		send(fmt.Sprint("epoch 1, ", i))
	}

	// What j lacks, sealed under epoch 1 first, the key message last.
	all, _, err := a.readStored(space, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var epoch0, epoch1 []*protocol.Message
	for _, m := range all {
		switch env, ok := member.ParseEnvelope(m.Content); {
		case held[m.ID] || m.ID == keyMsg.ID:
		case !ok:
			t.Fatalf("a's message %s (%s) is not sealed", m.ID, m.Type)
		case env.Epoch == 0:
			epoch0 = append(epoch0, m.Message)
		default:
			epoch1 = append(epoch1, m.Message)
		}
	}
	if len(epoch0) != 5 || len(epoch1) != 20 {
		t.Fatalf("a holds %d messages of epoch 0 and %d of epoch 1 that j lacks, want 5 and 20", len(epoch0), len(epoch1))
	}
	if err := a.Close(); err != nil { // j hears of nothing but what it is handed here
		t.Fatal(err)
	}
	deliver := func(batch []*protocol.Message) {
		t.Helper()
		for i, err := range (spaceSink{j}).DeliverBatch(ctx, batch) {
			if err != nil {
				t.Errorf("message %d (%s) refused: %v", i, batch[i].Type, err)
			}
		}
	}

	// The epoch 1 messages alone: held for the key message, not stored.
	start(false)
	deliver(epoch1)
	for id := range ids(t, j, space) {
		if !held[id] {
			t.Fatalf("j stored %s without its parent, the key message", id)
		}
	}
	stop() // forgets what it held

	// Everything, the key message after the messages sealed under it, with
	// a follower reading from the start.
	start(false)
	want := len(held) + len(epoch0) + 1 + len(epoch1)
	var (
		mu     sync.Mutex
		seen   int
		marked []string
	)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		var after store.Cursor
		deadline := time.After(30 * time.Second)
		for {
			changed := j.Changed(space)
			page, next, err := j.Read(space, after, 100)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, m := range page {
				seen++
				if marker(m) != "" {
					marked = append(marked, fmt.Sprintf("%s: %s", m.ID, marker(m)))
				}
			}
			n := seen
			mu.Unlock()
			after = next
			if n >= want {
				return
			}
			if len(page) > 0 {
				continue
			}
			select {
			case <-changed:
			case <-deadline:
				t.Errorf("the follower read %d messages of %d", n, want)
				return
			}
		}
	}()
	deliver(append(append(slices.Clone(epoch1), epoch0...), keyMsg.Message))
	<-followed
	if len(marked) > 0 {
		t.Errorf("the follower read %d messages it could not open: %v", len(marked), marked)
	}
	checkStoreOrder(t, j, space, want)
	stop()

	// After a restart, every message opens (the keys come from the store).
	start(false)
	page, _, err := j.Read(space, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != want {
		t.Errorf("j holds %d messages after the restart, want %d", len(page), want)
	}
	clear := 0
	for _, m := range page {
		if marker(m) != "" {
			t.Errorf("after the restart, %s (%s) reads %q", m.ID, m.Type, marker(m))
		}
		var v struct{ Text string }
		if json.Unmarshal(m.Content, &v) == nil && v.Text != "" {
			clear++
		}
	}
	if clear != len(epoch0)+len(epoch1) {
		t.Errorf("j reads %d posts in clear, want %d", clear, len(epoch0)+len(epoch1))
	}
}

// ids returns the IDs of the messages n holds of space.
func ids(t *testing.T, n *Node, space protocol.ID) map[protocol.ID]bool {
	t.Helper()
	page, _, err := n.readStored(space, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[protocol.ID]bool, len(page))
	for _, m := range page {
		out[m.ID] = true
	}
	return out
}

// marker returns the SealedMarker text m reads as, "" if none.
func marker(m Message) string {
	var v SealedMarker
	_ = json.Unmarshal(m.Content, &v)
	return v.Sealed
}

// checkStoreOrder goes through n's store of sealed space in its order,
// learning keys as n does (learnKeys) from the messages before each: each
// sealed message must open with the keys of those stored before it, and
// there must be want messages.
func checkStoreOrder(t *testing.T, n *Node, space protocol.ID, want int) {
	t.Helper()
	page, _, err := n.readStored(space, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != want {
		t.Errorf("j stored %d messages, want %d", len(page), want)
	}
	s := n.private.get(space)
	replay, err := newPrivSpace(s.name, page[0].Message)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range page {
		if env, ok := member.ParseEnvelope(m.Content); ok && !member.IsControl(m.Message) && m.Type != member.TypeKey {
			if _, _, err := member.Open(env, member.HeadersOf(m.Message), replay.keys.get(env.Epoch)); err != nil {
				t.Errorf("stored message %d (%s, epoch %d) comes before the key that opens it: %v", i, m.ID, env.Epoch, err)
			}
		}
		n.learnKeys(replay, m.Message)
	}
}
