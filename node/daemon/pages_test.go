package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// heavyPad is text that makes a message body about 1 MiB, within the
// message size limit.
var heavyPad = strings.Repeat("x", protocol.MaxMessageSize-2048)

// TestPagesBoundedInBytes: 100 messages of ~1 MiB (25 under -race) read
// with limit=100 come in pages of at most node.MaxAnswerBytes (plus one
// message), and following next returns each exactly once, in order. A
// thread of ~1 MiB replies stops at the budget too, marked truncated. Such
// a page took the daemon's memory to 833 MB.
func TestPagesBoundedInBytes(t *testing.T) {
	total := 100
	if raceEnabled {
		total = 25 // still six budgets' worth; 100 took minutes under -race
	}
	// No quotas (100 messages of ~1 MiB from one sender are over the
	// default 64 MiB a sender may hold in a space) and no rates (a node
	// paces its posts to an open space at 40 tokens of 16 KiB a second).
	d, c := startNode(t, func(c *Config) {
		c.SpaceLimits = store.SpaceLimits{MaxBytes: -1, MaxSenderBytes: -1}
		c.Rates = mesh.RateLimits{Off: true}
	})
	ctx := t.Context()
	sp, _, err := d.node.Join("heavy", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ids := make([]string, total)
	var root protocol.ID
	for i := range total {
		p := node.Post{Content: fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, heavyPad)}
		if i > 0 {
			p.Refs.Messages = []protocol.ID{root} // replies to the first: a wide thread
		}
		m, err := d.node.Send(ctx, sp.ID, p)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			root = m.ID
		}
		ids[i] = m.ID.String()
	}
	t.Logf("sent %d messages of ~1 MiB in %v", total, time.Since(start).Round(time.Millisecond))

	hc := rawHTTP(d.cfg.SocketPath())
	after, got, pages := "", 0, 0
	for {
		resp, err := hc.Get("http://weft/v1/spaces/heavy/messages?limit=100&after=" + after)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		var page api.Page
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("page %d: %d %.200s %v", pages, resp.StatusCode, body, err)
		}
		if len(page.Messages) == 0 {
			break
		}
		pages++
		if len(body) > node.MaxAnswerBytes+protocol.MaxWireSize {
			t.Errorf("page %d: %d messages in %d bytes, over the budget of %d plus one message", pages, len(page.Messages), len(body), node.MaxAnswerBytes)
		}
		for _, m := range page.Messages {
			if got >= total || m.ID != ids[got] {
				t.Fatalf("page %d: message %s, want message %d", pages, m.ID, got)
			}
			got++
		}
		after = page.Next
	}
	if got != total || pages < total/4 {
		t.Fatalf("read %d messages in %d pages, want %d in at least %d", got, pages, total, total/4)
	}

	th, err := c.Thread(ctx, root.String(), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, m := range th.Messages {
		size += len(m.Content)
	}
	if !th.Truncated || len(th.Messages) < 2 || size > node.MaxAnswerBytes {
		t.Errorf("thread of 99 replies of ~1 MiB: %d messages, %d bytes of content, truncated %v; want at most %d bytes, truncated",
			len(th.Messages), size, th.Truncated, node.MaxAnswerBytes)
	}
}
