// Package mcptest drives an MCP server with the go-sdk client in tests:
// connect, call a tool, decode its JSON answer.
package mcptest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect connects a go-sdk client session over tr; it is closed when the
// test ends.
func Connect(t testing.TB, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "weft-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Call calls a tool and returns its text answer and whether it is a tool
// error. A protocol error fails the test.
func Call(t testing.TB, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: protocol error %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

// OK calls a tool that must succeed and decodes its JSON answer into out
// (unless out is nil).
func OK(t testing.TB, cs *mcp.ClientSession, name string, args, out any) {
	t.Helper()
	text, isErr := Call(t, cs, name, args)
	if isErr {
		t.Fatalf("%s %v: tool error %s", name, args, text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s answered %q: %v", name, text, err)
		}
	}
}
