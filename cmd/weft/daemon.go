package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	weftd "github.com/weftmesh/weft/node/daemon"
	"github.com/weftmesh/weft/protocol"
)

func runDaemon(ctx context.Context, e *env, args []string) error {
	fs := e.flags("daemon")
	var listen, bootstrap stringList
	fs.Var(&listen, "listen", "libp2p listen multiaddr (repeatable; default all interfaces, random TCP and QUIC ports)")
	fs.Var(&bootstrap, "bootstrap", "peer to join the mesh through, a multiaddr ending in /p2p/ID (repeatable)")
	noMDNS := fs.Bool("no-mdns", false, "do not discover peers on the LAN with mDNS")
	dhtMode := fs.String("dht-mode", "server", "Kademlia DHT mode: server, client or auto")
	reach := fs.String("reachability", "auto", "can peers dial this node? auto (AutoNAT asks peers to dial back), public (e.g. a relay or bootstrap node with a public address: relays for nodes behind NAT) or private (behind NAT: reached through relays, upgraded by hole punching)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	keepCount := fs.Int("keep-count", 0, "default retention: keep the newest N messages of each space (0: no limit; `weft join --keep-count` sets it per space)")
	keepAge := fs.Duration("keep-age", 0, "default retention: keep messages younger than this, e.g. 720h (0: no limit)")
	syncEvery := fs.Duration("sync-interval", 0, "how often to sync each space with a random member (default 30s; negative: only on joins and gaps)")
	syncWindow := fs.Duration("sync-window", 0, "fetch only history created this long ago or later, e.g. 168h (0: all history)")
	name := fs.String("name", "", "this agent's name, for its agent card (kept)")
	desc := fs.String("description", "", "what this agent does, for its agent card (kept)")
	mcpListen := fs.String("mcp-listen", "", "also serve MCP (streamable HTTP at /mcp) on this loopback address, e.g. 127.0.0.1:7777, behind a bearer token ($WEFT_MCP_TOKEN, else a random one; written to <home>/mcp.token)")
	var caps stringList
	fs.Var(&caps, "capability", "a capability this node offers, advertised in the DHT and on the LAN (repeatable; kept)")
	flood := addFloodFlags(fs)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Sprintf("bad --log-level %q", *level)}
	}
	cfg := weftd.Default()
	cfg.Home = e.home
	cfg.Listen = listen
	cfg.Bootstrap = bootstrap
	cfg.MDNS = !*noMDNS
	cfg.DHTMode = *dhtMode
	cfg.Reachability = *reach
	cfg.Retention.MaxCount = *keepCount
	cfg.Retention.MaxAge = *keepAge
	cfg.SyncInterval = *syncEvery
	cfg.SyncWindow = *syncWindow
	if err := flood.apply(&cfg.Config); err != nil {
		return err
	}
	cfg.Card.Name, cfg.Card.Description = *name, *desc
	cfg.MCPListen, cfg.MCPToken = *mcpListen, os.Getenv("WEFT_MCP_TOKEN")
	for _, c := range caps {
		if err := protocol.CheckName(c); err != nil {
			return usageError{"--capability: " + err.Error()}
		}
		cfg.Card.Capabilities = append(cfg.Card.Capabilities, protocol.Capability{Name: c})
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))
	n, err := weftd.New(ctx, cfg)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- n.Serve() }()
	select {
	case <-ctx.Done():
		cfg.Logger.Info("shutting down")
	case err = <-errc:
	}
	if cerr := n.Close(); err == nil {
		err = cerr
	}
	return err
}
