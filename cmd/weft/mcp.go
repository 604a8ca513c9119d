package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/internal/version"
	weftmcp "github.com/weftmesh/weft/node/mcp"
)

// runMCP serves MCP on stdin/stdout, bridging every tool to the home's
// daemon: an MCP client's whole configuration is {"command": "weft",
// "args": ["mcp"]}. It serves even while the daemon is down (the tools then
// say how to start it), so the client keeps a working session.
func runMCP(ctx context.Context, e *env, args []string) error {
	fs := e.flags("mcp")
	level := fs.String("log-level", "warn", "log level on stderr: debug, info, warn or error")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Sprintf("bad --log-level %q", *level)}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))
	c := e.client()
	probe, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := c.Node(probe); err != nil {
		log.Warn("weft daemon not reachable yet; tools will fail until it runs", "socket", c.SocketPath(), "err", err)
	}
	cancel()
	err := weftmcp.NewServer(c, version.String(), log).Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil // interrupted: a clean stop
	}
	return err
}
