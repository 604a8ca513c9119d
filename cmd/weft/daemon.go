package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/weftmesh/weft/node"
	weftd "github.com/weftmesh/weft/node/daemon"
	"github.com/weftmesh/weft/node/localapi"
	"github.com/weftmesh/weft/protocol"
)

func runDaemon(ctx context.Context, e *env, args []string) error {
	fs := e.flags("daemon")
	var listen, bootstrap stringList
	fs.Var(&listen, "listen", "libp2p listen multiaddr (repeatable; default all interfaces, random TCP and QUIC ports; TCP only with --network-key)")
	fs.Var(&bootstrap, "bootstrap", "peer to join the mesh through, a multiaddr ending in /p2p/ID (repeatable)")
	noMDNS := fs.Bool("no-mdns", false, "do not discover peers on the LAN with mDNS")
	dhtMode := fs.String("dht-mode", "server", "Kademlia DHT mode: server, client or auto")
	reach := fs.String("reachability", "auto", "can peers dial this node? auto (AutoNAT asks peers to dial back), public (e.g. a relay or bootstrap node with a public address: relays for nodes behind NAT, see --relay) or private (behind NAT: reached through relays, upgraded by hole punching)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format on stderr: text (key=value lines) or json (one object per line)")
	keepCount := fs.Int("keep-count", 0, "default retention: keep the newest N messages of each space (0: no limit; `weft join --keep-count` sets it per space)")
	keepAge := fs.Duration("keep-age", 0, "default retention: keep messages younger than this, e.g. 720h (0: no limit)")
	syncEvery := fs.Duration("sync-interval", 0, "how often to sync each space with a random member (default 30s; negative: only on joins and gaps)")
	punchAgain := fs.Duration("punch-again", 0, "how long a peer may be reached only through relays before hole punching is tried again with it; the next try is at least 35s later, the wait doubling after each, up to 8m (default 15s; negative: never, only libp2p's one try per relayed connection)")
	syncWindow := fs.Duration("sync-window", 0, "fetch only history created this long ago or later, e.g. 168h (0: all history within --max-age)")
	maxAge := fs.Duration("max-age", protocol.DefaultMaxAge, "refuse messages from the network created longer ago than this, e.g. 720h (0: no bound; stored messages are always readable)")
	name := fs.String("name", "", "this agent's name, for its agent card (kept)")
	desc := fs.String("description", "", "what this agent does, for its agent card (kept)")
	webListen := fs.String("web", "127.0.0.1:0", "serve the loopback HTTP listener (web view, metrics, A2A) on this loopback address (port 0 picks one; \"off\" serves none), behind the token in <home>/web.token")
	mcpListen := fs.String("mcp-listen", "", "also serve MCP (streamable HTTP at /mcp) on this loopback address, e.g. 127.0.0.1:7777, behind a bearer token ($WEFT_MCP_TOKEN, else a random one; written to <home>/mcp.token)")
	socketGroup := fs.String("socket-group", "", "also let the members of this group use the API socket (the socket becomes 0660 and the home 0710, of that group); the daemon's user and root always may, nobody else")
	maxConns := fs.Int("api-max-conns", weftd.DefaultMaxConns, "most connections the API socket (and the MCP endpoint) serves at once; more wait their turn")
	bodyTimeout := fs.Duration("api-body-timeout", localapi.DefaultBodyTimeout, "how long a client of the API may take to send a request body (a stream call's frames: as long as the call lasts); negative: no bound")
	dmPolicy := fs.String("dm-policy", "anyone", "who may send this node direct messages: anyone (peers it does not trust within --dm-rate and --dm-quota) or trusted (peers on `weft trust list` only)")
	dmRate := fs.Float64("dm-rate", 0, "direct messages a second a peer this node does not trust may send (default 10)")
	dmBurst := fs.Int("dm-burst", 0, "bursts of direct messages such a peer may send at once (default 50)")
	dmQuota := fs.Int("dm-quota", 0, "direct messages of such a peer the inbox holds at most (default 1000; all such peers together: 10000)")
	netKey := fs.String("network-key", "", "a network key `FILE` (made by weft network-key new): only nodes with the same key can connect; TCP only, no QUIC")
	var allowPeers stringList
	fs.Var(&allowPeers, "allow-peer", "close the mesh: only this `PEER` ID (repeatable), those of --peers-file and the --bootstrap peers may connect")
	peersFile := fs.String("peers-file", "", "close the mesh to all but the peer IDs in this `FILE` (one per line, # comments) and the --allow-peer and --bootstrap peers")
	relay := fs.String("relay", "members", "whom the relay service (while this node is public) serves: members (peers this node keeps: bootstrap, weft connect, members of its spaces; in a closed mesh, the peers allowed in), open (anyone) or off")
	maxInbound := fs.Int("max-inbound", 0, "inbound connections peers this node does not keep may hold at once (default: libp2p's, scaled by memory); kept peers have 64 more to themselves")
	perIP := fs.Int("conns-per-ip", 0, "connections one IPv4 address (or IPv6 /56) may have at once (default 16; loopback is exempt)")
	var caps stringList
	fs.Var(&caps, "capability", "a capability this node offers, advertised in the DHT and on the LAN (repeatable; kept)")
	flood := addFloodFlags(fs)
	memLimit := fs.Int("memory-limit", 128, "soft limit of the Go heap in `MiB`: past it the garbage collector runs more often (0: none; $GOMEMLIMIT, if set, wins)")
	rcmgrMetrics := fs.Bool("resource-metrics", false, "also export libp2p's resource manager metrics (libp2p_rcmgr_…) on /metrics; they cost CPU on every stream, so they are off by default")
	profDir := fs.String("profile", "", "write a CPU profile of the whole run and a heap profile at shutdown into this `DIR` (cpu.pprof, heap.pprof; for go tool pprof)")
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
	cfg.PunchAgain = *punchAgain
	cfg.ResourceMetrics = *rcmgrMetrics
	cfg.SyncWindow = *syncWindow
	if *maxAge < 0 {
		return usageError{fmt.Sprintf("--max-age %v is negative", *maxAge)}
	}
	cfg.Limits.MaxAge = *maxAge
	if *dmRate < 0 || *dmBurst < 0 || *dmQuota < 0 {
		return usageError{"--dm-rate, --dm-burst and --dm-quota must not be negative"}
	}
	if *dmPolicy != "anyone" && *dmPolicy != "trusted" {
		return usageError{fmt.Sprintf("--dm-policy %q: want anyone or trusted", *dmPolicy)}
	}
	cfg.DM.Policy = *dmPolicy
	if *dmRate > 0 {
		cfg.DM.Rate = *dmRate
	}
	if *dmBurst > 0 {
		cfg.DM.Burst = *dmBurst
	}
	if *dmQuota > 0 {
		cfg.DM.Quota = *dmQuota
	}
	if err := flood.apply(&cfg.Config); err != nil {
		return err
	}
	cfg.Card.Name, cfg.Card.Description = *name, *desc
	cfg.NetworkKeyFile = *netKey
	if len(allowPeers) > 0 || *peersFile != "" {
		cfg.AllowPeers = append([]string{}, allowPeers...)
	}
	if *peersFile != "" {
		ps, err := node.ReadPeersFile(*peersFile)
		if err != nil {
			return err
		}
		cfg.AllowPeers = append(cfg.AllowPeers, ps...)
	}
	cfg.Relay = *relay
	cfg.Conns.Inbound, cfg.Conns.PerIP = *maxInbound, *perIP
	cfg.MCPListen, cfg.MCPToken = *mcpListen, os.Getenv("WEFT_MCP_TOKEN")
	if *webListen != "off" {
		cfg.WebListen = *webListen
	}
	cfg.SocketGroup = *socketGroup
	if *maxConns <= 0 {
		return usageError{fmt.Sprintf("--api-max-conns %d: want at least 1", *maxConns)}
	}
	cfg.MaxConns, cfg.BodyTimeout = *maxConns, *bodyTimeout
	for _, c := range caps {
		if err := protocol.CheckName(c); err != nil {
			return usageError{"--capability: " + err.Error()}
		}
		cfg.Card.Capabilities = append(cfg.Card.Capabilities, protocol.Capability{Name: c})
	}
	log, err := newLogger(e.stderr, *logFormat, lv)
	if err != nil {
		return err
	}
	routeLibraryLogs(log)
	cfg.Logger = log
	if *memLimit < 0 {
		return usageError{fmt.Sprintf("--memory-limit %d is negative", *memLimit)}
	}
	if *memLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// The heap's garbage, not only what is live, counts in RSS: Go's
		// default lets the heap grow to twice what is live before a GC.
		debug.SetMemoryLimit(int64(*memLimit) << 20)
	}
	prof, err := startProfile(*profDir)
	if err != nil {
		return err
	}
	defer func() { _ = prof.stop() }()
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
	if perr := prof.heap(); perr != nil {
		cfg.Logger.Warn("heap profile", "err", perr)
	}
	if cerr := n.Close(); err == nil {
		err = cerr
	}
	return err
}
