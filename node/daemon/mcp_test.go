package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/client"
	weftmcp "github.com/weftmesh/weft/node/mcp"
	"github.com/weftmesh/weft/node/mcp/mcptest"
	"github.com/weftmesh/weft/protocol/api"
)

// mcpSession connects the go-sdk MCP client to a daemon's MCP endpoint on
// its Unix socket.
func mcpSession(t testing.TB, n *Daemon) *mcp.ClientSession {
	t.Helper()
	sock := n.cfg.SocketPath()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	return connectMCP(t, &mcp.StreamableClientTransport{Endpoint: "http://weft" + weftmcp.Path, HTTPClient: hc})
}

// callAsync calls a tool from another goroutine and delivers its page (or
// the failure, in Next) on the returned channel.
func callAsync(cs *mcp.ClientSession, name string, args any) <-chan mcpPage {
	ch := make(chan mcpPage, 1)
	go func() {
		var p mcpPage
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		switch {
		case err != nil:
			p.Next = "error: " + err.Error()
		case res.IsError || len(res.Content) == 0:
			p.Next = fmt.Sprintf("tool error: %+v", res.Content)
		default:
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || json.Unmarshal([]byte(tc.Text), &p) != nil {
				p.Next = fmt.Sprintf("bad answer: %+v", res.Content)
			}
		}
		ch <- p
	}()
	return ch
}

var (
	connectMCP = mcptest.Connect
	callTool   = mcptest.Call
	toolOK     = mcptest.OK
)

type mcpMessage struct {
	ID      string          `json:"id"`
	From    string          `json:"from"`
	Type    string          `json:"type"`
	ReplyTo []string        `json:"reply_to"`
	Content json.RawMessage `json:"content"`
	Cursor  string          `json:"cursor"`
	Depth   *int            `json:"depth"`
}

type mcpPage struct {
	Messages []mcpMessage `json:"messages"`
	Next     string       `json:"next"`
	TimedOut bool         `json:"timed_out"`
}

func hasMessage(ms []mcpMessage, id string) bool {
	return slices.ContainsFunc(ms, func(m mcpMessage) bool { return m.ID == id })
}

// TestMCPOverSocket drives both daemons' MCP endpoints with the go-sdk
// client: list tools, join, send on one daemon, read and wait on the
// other, threads, direct messages, discovery and calls.
func TestMCPOverSocket(t *testing.T) {
	a, _, b, cb := pair(t)
	ma, mb := mcpSession(t, a), mcpSession(t, b)

	tools, err := ma.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if tool.Description == "" || !strings.Contains(string(schema), `"type":"object"`) || !strings.Contains(string(schema), `"properties":`) {
			t.Errorf("tool %s: description %q, input schema %s", tool.Name, tool.Description, schema)
		}
	}
	slices.Sort(names)
	want := []string{"create_space", "discover", "dm", "inbox", "invite", "invoke", "join", "join_invite", "members", "outbox", "read", "send", "spaces", "wait", "whoami"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	var who struct {
		ID     string   `json:"id"`
		Spaces []string `json:"spaces"`
	}
	toolOK(t, mb, "whoami", nil, &who)
	if who.ID != b.ID().String() {
		t.Fatalf("whoami on b = %s, want %s", who.ID, b.ID())
	}
	for _, cs := range []*mcp.ClientSession{ma, mb} {
		var sp struct{ Name, ID string }
		toolOK(t, cs, "join", map[string]any{"space": "lab"}, &sp)
		if sp.Name != "lab" || sp.ID == "" {
			t.Fatalf("join answered %+v", sp)
		}
	}
	eventually(t, 20*time.Second, "b in a's topic of lab", func() bool {
		var sps struct {
			Spaces []struct {
				Name  string
				Peers int
			}
		}
		toolOK(t, ma, "spaces", nil, &sps)
		return len(sps.Spaces) == 1 && sps.Spaces[0].Name == "lab" && sps.Spaces[0].Peers > 0
	})

	// Send on A (content with a number beyond float64 and HTML-ish text,
	// which must arrive byte for byte), read on B.
	content := `{"text":"hello <mcp> & co","n":12345678901234567890}`
	var sent struct{ ID, Cursor string }
	toolOK(t, ma, "send", map[string]any{"space": "lab", "content": json.RawMessage(content), "type": "note"}, &sent)
	var page mcpPage
	eventually(t, 20*time.Second, "the message on b", func() bool {
		toolOK(t, mb, "read", map[string]any{"space": "lab"}, &page)
		return hasMessage(page.Messages, sent.ID)
	})
	got := page.Messages[len(page.Messages)-1]
	if got.ID != sent.ID || got.From != a.ID().String() || got.Type != "note" || string(got.Content) != content {
		t.Fatalf("b read %+v, want %s from a with content %s", got, sent.ID, content)
	}

	// wait on B returns when A's next message arrives, and only it.
	waited := callAsync(mb, "wait", map[string]any{"space": "lab", "after": page.Next, "timeout_seconds": 60})
	var reply struct{ ID string }
	toolOK(t, ma, "send", map[string]any{"space": "lab", "content": map[string]any{"text": "second"}, "reply_to": []string{sent.ID}}, &reply)
	select {
	case p := <-waited:
		if len(p.Messages) != 1 || p.Messages[0].ID != reply.ID || p.TimedOut {
			t.Fatalf("wait answered %+v, want only %s", p, reply.ID)
		}
		// The next wait from its cursor times out: nothing new, nothing repeated.
		var again mcpPage
		toolOK(t, mb, "wait", map[string]any{"space": "lab", "after": p.Next, "timeout_seconds": 1}, &again)
		if !again.TimedOut || len(again.Messages) != 0 || again.Next != p.Next {
			t.Fatalf("second wait answered %+v, want a timeout at %s", again, p.Next)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("wait did not return when a message arrived")
	}

	// The thread of the reply, both ways.
	var th struct {
		Direction string       `json:"direction"`
		Messages  []mcpMessage `json:"messages"`
	}
	toolOK(t, mb, "read", map[string]any{"thread": reply.ID}, &th)
	if th.Direction != "ancestors" || len(th.Messages) != 2 || th.Messages[1].ID != sent.ID || *th.Messages[1].Depth != 1 {
		t.Fatalf("thread of the reply: %+v", th)
	}
	toolOK(t, mb, "read", map[string]any{"thread": sent.ID, "direction": "descendants"}, &th)
	if len(th.Messages) != 2 || th.Messages[1].ID != reply.ID {
		t.Fatalf("replies to the first message: %+v", th)
	}

	// A direct message from A, seen by wait on B's (empty) inbox from its
	// start cursor: whether the wait subscribes before or after the DM
	// lands, it gets it, once.
	var inbox mcpPage
	toolOK(t, mb, "inbox", map[string]any{}, &inbox)
	if len(inbox.Messages) != 0 || inbox.Next != "start" {
		t.Fatalf("empty inbox = %+v, want no messages and next \"start\"", inbox)
	}
	inboxWait := callAsync(mb, "wait", map[string]any{"after": inbox.Next, "timeout_seconds": 60})
	var dm struct{ ID, Status string }
	toolOK(t, ma, "dm", map[string]any{"to": b.ID().String(), "kind": "request", "content": map[string]any{"q": 1}}, &dm)
	if dm.Status != "delivered" {
		t.Fatalf("dm status %q, want delivered", dm.Status)
	}
	select {
	case p := <-inboxWait:
		if len(p.Messages) != 1 || p.Messages[0].ID != dm.ID || p.Messages[0].Type != "request" || p.Messages[0].From != a.ID().String() {
			t.Fatalf("inbox wait answered %+v, want only %s", p, dm.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("wait on the inbox saw no direct message")
	}

	// The outbox tool: the DM above is delivered (the sent log keeps no
	// content); one to a peer that is nowhere waits, queued, with its
	// content; nothing is dead.
	type outgoing struct {
		ID, To, Kind string
		Content      json.RawMessage
		Attempts     int
	}
	var box struct {
		State    string
		Messages []outgoing
	}
	eventually(t, 10*time.Second, "the DM in the sent log", func() bool {
		toolOK(t, ma, "outbox", map[string]any{"state": "delivered"}, &box)
		return len(box.Messages) == 1
	})
	if m := box.Messages[0]; box.State != "delivered" || m.ID != dm.ID || m.To != b.ID().String() || m.Kind != "request" {
		t.Fatalf("outbox delivered = %+v, want %s to b, a request", box, dm.ID)
	}
	absent := newPeerID(t)
	var queued struct{ ID, Status string }
	toolOK(t, ma, "dm", map[string]any{"to": absent, "content": map[string]any{"later": true}, "ttl_seconds": 600}, &queued)
	if queued.Status != "queued" {
		t.Fatalf("dm to a peer that is nowhere: status %q, want queued", queued.Status)
	}
	toolOK(t, ma, "outbox", map[string]any{}, &box)
	if len(box.Messages) != 1 || box.State != "queued" || box.Messages[0].ID != queued.ID || box.Messages[0].To != absent ||
		string(box.Messages[0].Content) != `{"later":true}` {
		t.Fatalf("outbox (queued) = %+v, want only %s to %s", box, queued.ID, absent)
	}
	toolOK(t, ma, "outbox", map[string]any{"to": b.ID().String()}, &box)
	if len(box.Messages) != 0 {
		t.Fatalf("outbox queued to b = %+v, want none", box)
	}
	toolOK(t, ma, "outbox", map[string]any{"state": "dead"}, &box)
	if len(box.Messages) != 0 {
		t.Fatalf("outbox dead = %+v, want none", box)
	}

	// Discover B's handler and invoke it, unary and streamed: B trusts A,
	// and its discovery card says the handler is restricted.
	trust(t, cb, a)
	serve(t, cb, func(_ context.Context, c api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		if c.Stream {
			for i := range 3 {
				if err := send(json.RawMessage(fmt.Sprintf(`{"part":%d}`, i))); err != nil {
					return nil, nil, err
				}
			}
		}
		return c.Input, nil, nil
	}, "echo_review")
	var found struct {
		Providers []struct {
			ID           string   `json:"id"`
			Capabilities []string `json:"capabilities"`
			Restricted   []string `json:"restricted"`
		} `json:"providers"`
	}
	eventually(t, 20*time.Second, "discover finds b", func() bool {
		toolOK(t, ma, "discover", map[string]any{"capability": "echo_review", "timeout_seconds": 2}, &found)
		return len(found.Providers) == 1 && found.Providers[0].ID == b.ID().String()
	})
	if r := found.Providers[0].Restricted; len(r) != 1 || r[0] != "echo_review" {
		t.Errorf("discover says restricted %q, want [echo_review]", r)
	}
	var out struct {
		Output json.RawMessage   `json:"output"`
		Deltas []json.RawMessage `json:"deltas"`
	}
	toolOK(t, ma, "invoke", map[string]any{"peer": b.ID().String(), "name": "echo_review", "input": json.RawMessage(`{"pr":42}`)}, &out)
	if string(out.Output) != `{"pr":42}` {
		t.Fatalf("invoke output %s", out.Output)
	}
	toolOK(t, ma, "invoke", map[string]any{"peer": b.ID().String(), "name": "echo_review", "input": "x", "stream": true}, &out)
	if len(out.Deltas) != 3 || string(out.Deltas[2]) != `{"part":2}` || string(out.Output) != `"x"` {
		t.Fatalf("stream invoke: %+v", out)
	}
}

// TestMCPBadArguments: each bad call is an MCP tool error that says what
// is wrong (never a protocol error or a crash), nothing is stored from it,
// and the daemon and the session go on working.
func TestMCPBadArguments(t *testing.T) {
	a, _, b, _ := pair(t)
	ms := mcpSession(t, a)
	toolOK(t, ms, "join", map[string]any{"space": "lab"}, nil)
	var kept struct{ ID string }
	toolOK(t, ms, "send", map[string]any{"space": "lab", "content": map[string]any{"text": "keep"}}, &kept)
	absent := newPeerID(t)
	tests := []struct {
		name, tool string
		args       any
		want       string // in the error text
	}{
		{"send without space", "send", map[string]any{"content": map[string]any{}}, "space"},
		{"send without content", "send", map[string]any{"space": "lab"}, "content"},
		{"content an array", "send", map[string]any{"space": "lab", "content": []int{1}}, `want "object"`},
		{"content a string", "send", map[string]any{"space": "lab", "content": "hello"}, `want "object"`},
		{"send to an unknown space", "send", map[string]any{"space": "nowhere", "content": map[string]any{}}, "join"},
		{"read an unknown space", "read", map[string]any{"space": "nowhere"}, "join"},
		{"wait on an unknown space", "wait", map[string]any{"space": "nowhere", "timeout_seconds": 1}, "join"},
		{"read nothing", "read", map[string]any{}, "space"},
		{"read space and thread", "read", map[string]any{"space": "lab", "thread": kept.ID}, "not both"},
		{"read a bad cursor", "read", map[string]any{"space": "lab", "after": "garbage"}, "cursor"},
		{"read a bad thread id", "read", map[string]any{"thread": "xyz"}, "xyz"},
		{"depth with a space", "read", map[string]any{"space": "lab", "depth": 2}, "thread"},
		{"limit too large", "read", map[string]any{"space": "lab", "limit": 5000}, "maximum"},
		{"bad direction", "read", map[string]any{"thread": kept.ID, "direction": "sideways"}, "direction"},
		{"wait too long", "wait", map[string]any{"timeout_seconds": 100000}, "maximum"},
		{"unknown argument", "join", map[string]any{"space": "lab", "colour": "red"}, "colour"},
		{"space a number", "join", map[string]any{"space": 7}, "string"},
		{"arguments an array", "join", []any{"lab"}, "object"},
		{"dm to a non-peer", "dm", map[string]any{"to": "bob", "content": map[string]any{}}, "peer"},
		{"dm of a bad kind", "dm", map[string]any{"to": b.ID().String(), "kind": "shout", "content": map[string]any{}}, "kind"},
		{"invoke a non-peer", "invoke", map[string]any{"peer": "bob", "name": "x"}, "peer"},
		{"invoke an unknown peer", "invoke", map[string]any{"peer": absent, "name": "x", "timeout_seconds": 5}, "unreachable"},
		{"invoke a missing handler", "invoke", map[string]any{"peer": b.ID().String(), "name": "nobody_home"}, "no_handler"},
		{"discover a bad name", "discover", map[string]any{"capability": "no spaces allowed"}, "capability"},
		{"outbox of a bad state", "outbox", map[string]any{"state": "lost"}, "state"},
		{"outbox to with delivered", "outbox", map[string]any{"state": "delivered", "to": absent}, "queued"},
		{"outbox paging the queue", "outbox", map[string]any{"limit": 5}, "queued"},
		{"outbox a bad cursor", "outbox", map[string]any{"state": "dead", "after": "garbage"}, "cursor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, isErr := callTool(t, ms, tc.tool, tc.args)
			if !isErr || !strings.Contains(text, tc.want) {
				t.Fatalf("%s %v = error %v, %q; want a tool error mentioning %q", tc.tool, tc.args, isErr, text, tc.want)
			}
		})
	}
	// Whole numbers written as floats are integers.
	var page mcpPage
	toolOK(t, ms, "read", map[string]any{"space": "lab", "limit": 10.0}, &page)
	if text, isErr := callTool(t, ms, "read", map[string]any{"space": "lab", "limit": 2.5}); !isErr || !strings.Contains(text, "integer") {
		t.Fatalf("limit 2.5 = %v %q, want a tool error", isErr, text)
	}
	// Nothing was stored; everything still works.
	toolOK(t, ms, "read", map[string]any{"space": "lab"}, &page)
	if len(page.Messages) != 1 || page.Messages[0].ID != kept.ID {
		t.Fatalf("lab holds %d messages after the bad calls, want only %s", len(page.Messages), kept.ID)
	}
	if ib, err := (&client.Client{Home: b.cfg.Home}).Inbox(t.Context(), "", 10); err != nil || len(ib.Messages) != 0 {
		t.Fatalf("b's inbox after bad DMs: %d messages, %v", len(ib.Messages), err)
	}
	toolOK(t, ms, "whoami", nil, nil)
	// An unknown tool is a protocol error, and the session survives it.
	if _, err := ms.CallTool(t.Context(), &mcp.CallToolParams{Name: "explode"}); err == nil {
		t.Fatal("an unknown tool answered")
	}
	toolOK(t, ms, "spaces", nil, nil)
}

// TestMCPDaemonDown: the tools of an MCP server whose daemon is not
// running answer a tool error saying how to start it.
func TestMCPDaemonDown(t *testing.T) {
	home := tempHome(t)
	srv := weftmcp.NewServer(&client.Client{Home: home}, node.Version, nil)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs := connectMCP(t, ct)
	text, isErr := callTool(t, cs, "join", map[string]any{"space": "lab"})
	if !isErr || !strings.Contains(text, "weft daemon") || !strings.Contains(text, filepath.Join(home, client.SocketName)) {
		t.Fatalf("join without a daemon = %v %q; want a tool error saying to start the daemon", isErr, text)
	}
}

// TestMCPLoopbackToken: with MCPListen the daemon also serves MCP on a
// loopback TCP port, only to requests with the token from <home>/mcp.token.
func TestMCPLoopbackToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:7777", "192.168.1.2:7777", ":7777", "example.com:80", "127.0.0.1"} {
		cfg := Default()
		cfg.MCPListen = addr
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "mcp listen address") {
			t.Fatalf("MCP address %q validated: %v", addr, err)
		}
	}
	n, _ := startNode(t, func(c *Config) { c.MCPListen = "127.0.0.1:0" })
	tokenPath := filepath.Join(n.cfg.Home, MCPTokenFile)
	raw, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(tokenPath); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	token := strings.TrimSpace(string(raw))
	url := "http://" + n.MCPAddr() + weftmcp.Path
	for _, bad := range []string{"", "Bearer wrong", "Bearer " + token + "x", token} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if bad != "" {
			req.Header.Set("Authorization", bad)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: status %d, want 401", bad, resp.StatusCode)
		}
	}
	cfg := Default()
	cfg.MCPListen, cfg.MCPToken = "127.0.0.1:0", "short"
	if err := cfg.Validate(); err == nil {
		t.Fatal("a 5-character MCP token validated")
	}
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc})
	var who struct{ ID string }
	toolOK(t, cs, "whoami", nil, &who)
	if who.ID != n.ID().String() {
		t.Fatalf("whoami over TCP = %s, want %s", who.ID, n.ID())
	}
	// A browser page cannot use it even with the token.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("request with an Origin: status %d, want 403", resp.StatusCode)
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "bearer "+b.token) // the scheme is case-insensitive
	return b.next.RoundTrip(r)
}

// newPeerID returns the ID of a peer that exists nowhere.
func newPeerID(t testing.TB) string {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// TestMCPWaitFromStart: a wait that times out on an empty space answers a
// cursor that, passed to the next wait, still gets the first message: a
// model following "pass next to the next wait" never loses one.
func TestMCPWaitFromStart(t *testing.T) {
	n, c := startNode(t, nil)
	ms := mcpSession(t, n)
	toolOK(t, ms, "join", map[string]any{"space": "empty"}, nil)
	var p mcpPage
	toolOK(t, ms, "wait", map[string]any{"space": "empty", "timeout_seconds": 1}, &p)
	if !p.TimedOut || len(p.Messages) != 0 || p.Next != "start" {
		t.Fatalf("wait on an empty space = %+v, want a timeout at \"start\"", p)
	}
	m, err := c.SendText(t.Context(), "empty", "first")
	if err != nil {
		t.Fatal(err)
	}
	toolOK(t, ms, "wait", map[string]any{"space": "empty", "after": p.Next, "timeout_seconds": 5}, &p)
	if len(p.Messages) != 1 || p.Messages[0].ID != m.ID || p.Next == "start" {
		t.Fatalf("wait after \"start\" = %+v, want the first message", p)
	}
	toolOK(t, ms, "read", map[string]any{"space": "empty", "after": "start"}, &p)
	if len(p.Messages) != 1 || p.Messages[0].ID != m.ID {
		t.Fatalf("read after \"start\" = %+v, want the first message", p)
	}
}

// TestMCPAnswerBudget: a page of large messages is cut to what fits in one
// tool answer, and next continues right after the last one included.
func TestMCPAnswerBudget(t *testing.T) {
	n, c := startNode(t, nil)
	ms := mcpSession(t, n)
	if _, err := c.Join(t.Context(), "big"); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 900<<10)
	var ids []string
	for range 5 {
		m, err := c.Send(t.Context(), "big", api.SendRequest{Content: json.RawMessage(`{"text":"` + big + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	var got []string
	after := "start"
	for range 10 {
		var p mcpPage
		toolOK(t, ms, "read", map[string]any{"space": "big", "after": after}, &p)
		if len(p.Messages) == 0 {
			break
		}
		if len(p.Messages) > 2 {
			t.Fatalf("one answer carried %d messages of 900 KiB", len(p.Messages))
		}
		for _, m := range p.Messages {
			got = append(got, m.ID)
		}
		after = p.Next
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("paging through the budget read %d messages, want all %d in order", len(got), len(ids))
	}
}
