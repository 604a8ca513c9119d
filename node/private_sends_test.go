package node

import (
	"fmt"
	"sync"
	"testing"
)

// TestPrivateConcurrentSendsParents: agents sending into a private space
// at once name as few parents as in an open space: each message names at
// most one head per sender (a sender's next message names its last one,
// and no head of the store is missing from the space's graph, so none is
// replaced by its own parents and left a head). A private space's
// messages named 25 parents each under 8 senders (an open one's 4), and
// were three times the bytes.
func TestPrivateConcurrentSendsParents(t *testing.T) {
	const senders, each = 8, 40
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	for _, sealed := range []bool{false, true} {
		sp, err := a.CreatePrivate(ctx, fmt.Sprint("busy-", sealed), sealed)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range senders {
			wg.Go(func() {
				for i := range each {
					if _, err := a.Send(ctx, sp.ID, Post{Content: fmt.Appendf(nil, `{"text":"%d-%d"}`, w, i)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		page, _, err := a.readStored(sp.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 1+senders*each {
			t.Fatalf("sealed %v: %d messages stored, want %d", sealed, len(page), 1+senders*each)
		}
		most, sum := 0, 0
		for _, m := range page {
			most, sum = max(most, len(m.Prev)), sum+len(m.Prev)
		}
		t.Logf("sealed %v: %.1f parents a message, at most %d", sealed, float64(sum)/float64(len(page)), most)
		if most > senders {
			t.Errorf("sealed %v: a message names %d parents, over one per sender (%d)", sealed, most, senders)
		}
	}
}
