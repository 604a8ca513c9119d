package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// TestThread: a reply chain of depth 20 with a fork at the root gives the
// right ancestors and descendants, depth limits cut it, and bad requests
// are refused.
func TestThread(t *testing.T) {
	n, c := startNode(t, nil)
	ctx := context.Background()
	if _, err := c.Join(ctx, "threads"); err != nil {
		t.Fatal(err)
	}
	reply := func(text string, to ...string) string {
		t.Helper()
		req := api.SendRequest{Content: json.RawMessage(fmt.Sprintf(`{"text":%q}`, text))}
		if len(to) > 0 {
			req.Refs = &api.Refs{Messages: to}
		}
		m, err := c.Send(ctx, "threads", req)
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	chain := []string{reply("root")}
	for i := 1; i <= 20; i++ {
		chain = append(chain, reply(fmt.Sprintf("reply %d", i), chain[i-1]))
	}
	fork := []string{reply("fork a", chain[0]), reply("fork b", chain[0])}
	reply("unrelated")

	ids := func(th api.Thread) ([]string, []int) {
		var out []string
		var depths []int
		for _, m := range th.Messages {
			out = append(out, m.ID)
			depths = append(depths, m.Depth)
		}
		return out, depths
	}

	// Ancestors of the deepest reply: itself, then each parent up to the root.
	th, err := c.Thread(ctx, chain[20], true, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, depths := ids(th)
	if len(got) != 21 || th.Truncated {
		t.Fatalf("ancestors: %d messages (truncated=%v), want 21", len(got), th.Truncated)
	}
	for i := range 21 {
		if got[i] != chain[20-i] || depths[i] != i {
			t.Fatalf("ancestor %d is %s at depth %d, want %s at %d", i, got[i], depths[i], chain[20-i], i)
		}
	}

	// Descendants of the root: the chain and both forks.
	th, err = c.Thread(ctx, chain[0], false, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, depths = ids(th)
	if len(got) != 23 {
		t.Fatalf("descendants: %d messages, want 23", len(got))
	}
	want1 := map[string]bool{chain[1]: true, fork[0]: true, fork[1]: true}
	for i, id := range got[1:4] {
		if !want1[id] || depths[i+1] != 1 {
			t.Errorf("depth-1 descendant %s at depth %d not expected", id, depths[i+1])
		}
	}
	if got[22] != chain[20] || depths[22] != 20 {
		t.Errorf("deepest descendant %s at %d, want %s at 20", got[22], depths[22], chain[20])
	}

	// Depth limits cut the walk and say so.
	th, err = c.Thread(ctx, chain[10], true, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ = ids(th); len(got) != 6 || got[5] != chain[5] || !th.Truncated {
		t.Errorf("ancestors to depth 5: %d messages, truncated=%v", len(got), th.Truncated)
	}
	th, err = c.Thread(ctx, chain[20], false, 3)
	if err != nil || len(th.Messages) != 1 || th.Truncated {
		t.Errorf("descendants of a leaf: %+v, %v", th, err)
	}

	hc := rawHTTP(n.cfg.SocketPath())
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/messages/" + chain[0] + "/thread?direction=sideways", 400},
		{"/v1/messages/" + chain[0] + "/thread?depth=-1", 400},
		{"/v1/messages/" + chain[0] + "/thread?depth=x", 400},
		{"/v1/messages/nope/thread", 400},
		{"/v1/messages/" + protocol.MessageID([]byte("absent")).String() + "/thread", 404},
	} {
		resp, err := hc.Get("http://weft" + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
	}
}
