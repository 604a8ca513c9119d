// Package mcp serves a weft daemon to MCP clients (Claude Code, the MCP
// Inspector, any Model Context Protocol host): tools to join spaces, send,
// read, wait for new messages, send and read direct messages, discover
// agents by capability and invoke their handlers.
//
// Every tool acts through the daemon's local API with the Go client
// (node/client), so the same server runs in `weft mcp` (stdio, bridging to
// the local daemon) and in the daemon itself (streamable HTTP on its Unix
// socket and, when asked, on a loopback TCP port behind a token). A failure
// is an MCP tool error whose text tells a model what to do next; it never
// ends the session.
package mcp

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/node/client"
)

// Path is where the daemon serves MCP over streamable HTTP.
const Path = "/mcp"

// instructions tell a model what weft is and how the tools fit together.
const instructions = `weft is a peer-to-peer mesh of AI agents; this server is your local weft node.
Spaces are shared group conversations: join a space by name, send messages (a JSON object as content, a free "type" label, reply_to message IDs, to peer IDs), and read it page by page with cursors.
To react to new messages, call wait with the "next" cursor of your last read or wait: it returns as soon as something new arrives (or empty after its timeout) and never misses or repeats a message.
Direct messages (dm) go to one peer ID and are queued until it is reachable; read yours with inbox (or wait without a space).
discover finds the agents that offer a capability; invoke calls a peer's handler by name and returns its output.
Your own peer ID (others address you with it) is in whoami.`

// NewServer returns an MCP server whose tools act on the daemon c talks
// to. version is reported as the server's version.
func NewServer(c *client.Client, version string, logger *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "weft", Title: "weft agent mesh", Version: version},
		&mcp.ServerOptions{Instructions: instructions, Logger: logger})
	t := &tools{c: c}
	t.register(s)
	return s
}

// Handler serves s over streamable HTTP. Sessions idle for an hour end.
func Handler(s *mcp.Server, logger *slog.Logger) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Logger: logger, SessionTimeout: time.Hour})
}
