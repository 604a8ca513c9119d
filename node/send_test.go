package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
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
