package daemon

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/protocol/api"
)

// BenchmarkMCPTool measures one MCP tool call through the daemon's socket
// endpoint (go-sdk client → streamable HTTP → tool → local API → store),
// next to the same operation straight through the API.
func BenchmarkMCPTool(b *testing.B) {
	n, c := startNode(b, nil)
	cs := mcpSession(b, n)
	ctx := context.Background()
	if _, err := c.Join(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := c.SendText(ctx, "bench", "first"); err != nil {
		b.Fatal(err)
	}
	call := func(b *testing.B, name string, args map[string]any) {
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", name, err, res)
			}
		}
	}
	b.Run("send/mcp", func(b *testing.B) {
		call(b, "send", map[string]any{"space": "bench", "content": map[string]any{"text": "hello"}})
	})
	b.Run("send/api", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Send(ctx, "bench", api.SendRequest{Content: json.RawMessage(`{"text":"hello"}`)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read10/mcp", func(b *testing.B) {
		call(b, "read", map[string]any{"space": "bench", "limit": 10})
	})
	b.Run("read10/api", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Read(ctx, "bench", "", 10); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whoami/mcp", func(b *testing.B) { call(b, "whoami", nil) })
}
