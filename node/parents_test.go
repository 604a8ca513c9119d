package node

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

// TestSendNamesFewParents: a send to an open space with many heads names
// sendParents of them, all heads, and sends one after another merge the
// space down to one head (each names up to sendParents and adds one); a
// send that named every head would name 20, one that named a single head
// would leave the 20 forever.
func TestSendNamesFewParents(t *testing.T) {
	n := deliverNode(t)
	sp, _, err := n.Join("test-send-parents", nil)
	if err != nil {
		t.Fatal(err)
	}
	const siblings = 20 // concurrent sends elsewhere: each a head
	acceptSiblings(t, n, sp.ID, siblings)
	heads, err := n.store.Heads(sp.ID)
	if err != nil || len(heads) != siblings {
		t.Fatalf("%d heads (%v), want %d", len(heads), err, siblings)
	}
	m, err := n.Send(t.Context(), sp.ID, Post{Content: json.RawMessage(`{"text":"first"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Prev) != sendParents {
		t.Fatalf("a send named %d parents, want %d", len(m.Prev), sendParents)
	}
	for _, p := range m.Prev {
		if !slices.Contains(heads, p) {
			t.Fatalf("a send named %s, not a head", p)
		}
	}
	for i := range siblings {
		if heads, err = n.store.Heads(sp.ID); err != nil || len(heads) == 1 {
			break
		}
		if _, err := n.Send(t.Context(), sp.ID, Post{Content: json.RawMessage(fmt.Sprintf(`{"text":"merge %d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if len(heads) != 1 {
		t.Fatalf("%d heads after %d sends, want them merged into 1", len(heads), siblings)
	}
}

// TestSendNamesItsLastSend: among many heads, an agent's successive sends
// each name the send before (the newest head), so its own messages stay
// linked in the graph.
func TestSendNamesItsLastSend(t *testing.T) {
	n := deliverNode(t)
	sp, _, err := n.Join("test-send-last", nil)
	if err != nil {
		t.Fatal(err)
	}
	acceptSiblings(t, n, sp.ID, 20)
	prev, err := n.Send(t.Context(), sp.ID, Post{Content: json.RawMessage(`{"text":"0"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 8; i++ {
		m, err := n.Send(t.Context(), sp.ID, Post{Content: json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(m.Prev, prev.ID) {
			t.Fatalf("send %d names %v, not the send before it", i, m.Prev)
		}
		prev = m
	}
}

// TestPickParents: n of the heads, each once, sorted by ID bytes: the
// sendNewest newest always, the rest at random; all of them when there
// are no more than n.
func TestPickParents(t *testing.T) {
	var heads []protocol.ID // newest first
	for i := range 10 {
		heads = append(heads, protocol.MessageID(fmt.Appendf(nil, "h%d", i)))
	}
	byID := func(a, b protocol.ID) int { return slices.Compare(a[:], b[:]) }
	if got, want := pickParents(heads[:3], 4), slices.SortedFunc(slices.Values(heads[:3]), byID); !slices.Equal(got, want) {
		t.Fatalf("3 heads: picked %v, want %v", got, want)
	}
	seen := map[protocol.ID]bool{}
	for range 200 {
		got := pickParents(heads, 4)
		if len(got) != 4 || !slices.IsSortedFunc(got, byID) || len(slices.Compact(slices.Clone(got))) != 4 {
			t.Fatalf("picked %v", got)
		}
		for _, id := range heads[:sendNewest] {
			if !slices.Contains(got, id) {
				t.Fatalf("picked %v, without the newest head %s", got, id)
			}
		}
		for _, id := range got {
			if !slices.Contains(heads, id) {
				t.Fatalf("picked %s, not a head", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != len(heads) {
		t.Fatalf("200 picks named %d of the %d heads: not at random", len(seen), len(heads))
	}
}

// acceptSiblings has n take in count messages of space from another
// sender, none naming another: count heads.
func acceptSiblings(t *testing.T, n *Node, space protocol.ID, count int) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		m, err := protocol.Sign(key, protocol.Draft{Space: space, CreatedAt: time.Now(), Type: "text",
			Content: json.RawMessage(fmt.Sprintf(`{"text":"sibling %d"}`, i))}, n.cfg.Limits)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := n.Accept(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
}
