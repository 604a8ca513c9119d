package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/mcp/mcptest"
)

// mcpStdio starts `weft mcp` on the home's daemon as an MCP client would
// (a child process speaking MCP on stdin/stdout) and connects the go-sdk
// client to it.
func mcpStdio(t *testing.T, c cli) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(c.Bin, "mcp", "--home", c.Home)
	return mcpConnect(t, &mcp.CommandTransport{Command: cmd})
}

var (
	mcpConnect = mcptest.Connect
	mcpCall    = mcptest.Call
	mcpOK      = mcptest.OK
)

// TestMCPStdio: `weft mcp` processes on two daemons (separate processes),
// driven by the go-sdk client: list tools, join, send on one daemon, read
// on the other; bad arguments are tool errors and the daemon is fine.
func TestMCPStdio(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	ma, mb := mcpStdio(t, a), mcpStdio(t, b)

	tools, err := ma.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"join", "send", "read", "wait", "dm", "inbox", "discover", "invoke"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list = %v, missing %s", names, want)
		}
	}
	for _, cs := range []*mcp.ClientSession{ma, mb} {
		mcpOK(t, cs, "join", map[string]any{"space": "lab"}, nil)
	}
	b.waitSpacePeers(1)
	var sent struct{ ID string }
	mcpOK(t, ma, "send", map[string]any{"space": "lab", "content": map[string]any{"text": "hello from mcp"}}, &sent)
	var page struct {
		Messages []struct {
			ID, From string
			Content  json.RawMessage
		}
	}
	aID, _ := a.id()
	testbed.Poll(t, 20*time.Second, "the message on b", func() (bool, string) {
		mcpOK(t, mb, "read", map[string]any{"space": "lab"}, &page)
		return len(page.Messages) == 1, fmt.Sprint(page)
	})
	if m := page.Messages[0]; m.ID != sent.ID || m.From != aID || string(m.Content) != `{"text":"hello from mcp"}` {
		t.Fatalf("b read %+v, want %s from %s", m, sent.ID, aID)
	}
	// The CLI sees what MCP sent, on both daemons.
	if _, ok := hasText(b.readJSON("lab"), "hello from mcp"); !ok {
		t.Fatal("weft read on b does not show the message sent through MCP on a")
	}

	for _, bad := range []struct {
		tool string
		args map[string]any
	}{
		{"send", map[string]any{"content": map[string]any{"text": "no space"}}},
		{"send", map[string]any{"space": "lab", "content": "not an object"}},
		{"dm", map[string]any{"to": "nobody", "content": map[string]any{}}},
		{"invoke", map[string]any{"peer": "nobody", "name": "x"}},
	} {
		if text, isErr := mcpCall(t, ma, bad.tool, bad.args); !isErr || text == "" {
			t.Fatalf("%s %v = %v %q, want a tool error", bad.tool, bad.args, isErr, text)
		}
	}
	if got := a.readJSON("lab"); len(got) != 1 {
		t.Fatalf("a holds %d messages after the bad calls, want 1", len(got))
	}
	mcpOK(t, ma, "whoami", nil, nil)
	a.OK("id") // the daemon is fine
}

// TestMCPDaemonEndpoints: the daemon's own MCP endpoints. On loopback TCP
// (--mcp-listen) with the token from <home>/mcp.token; refused without it.
func TestMCPDaemonEndpoints(t *testing.T) {
	a := newCLI(t)
	d := startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0", "--mcp-listen", "127.0.0.1:0")
	raw, err := os.ReadFile(filepath.Join(a.Home, "mcp.token"))
	if err != nil {
		t.Fatal(err)
	}
	// The daemon logs the endpoint it bound: url=http://127.0.0.1:PORT/mcp.
	m := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`).FindStringSubmatch(d.Log.String())
	if m == nil {
		t.Fatalf("no MCP endpoint in the daemon's log:\n%s", d.Log.String())
	}
	url := m[1]
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", resp.StatusCode)
	}
	hc := &http.Client{Transport: tokenTransport(strings.TrimSpace(string(raw)))}
	cs := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc})
	mcpOK(t, cs, "join", map[string]any{"space": "tcp"}, nil)
	if out := a.OK("spaces"); !strings.Contains(out, "tcp") {
		t.Fatalf("weft spaces after join over MCP/TCP: %q", out)
	}
}

type tokenTransport string

func (tok tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}
