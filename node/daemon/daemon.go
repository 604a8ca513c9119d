// Package daemon runs a weft daemon: a node.Node, its local API
// (node/localapi) on the Unix socket, and MCP on the socket and, when
// configured, on a loopback TCP port.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/a2abridge"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/node/localapi"
	weftmcp "github.com/weftmesh/weft/node/mcp"
	"github.com/weftmesh/weft/node/web"
	"github.com/weftmesh/weft/node/webui"
)

// Config configures a daemon: its node, and what the daemon serves.
type Config struct {
	node.Config

	// MCPListen, when set, also serves MCP (streamable HTTP at /mcp) on
	// this loopback TCP address (host:port; port 0 picks one), behind a
	// bearer token. The Unix socket always serves MCP at /mcp.
	MCPListen string
	// MCPToken is that endpoint's bearer token; empty: a random one. Either
	// way it is written to <home>/mcp.token (mode 0600) at start.
	MCPToken string

	// WebListen, when set, serves the loopback HTTP listener (node/web:
	// what a browser or an HTTP-only local tool reaches) on this loopback
	// TCP address (host:port; port 0 picks one), behind the token in
	// <home>/web.token.
	WebListen string

	// SocketGroup, when set, is a group (name or number) whose members may
	// use the API socket too. The socket admits only the daemon's own user
	// and root otherwise, checked by the peer's credentials, whatever the
	// socket file's mode.
	SocketGroup string

	// MaxConns bounds the connections the API socket (and the MCP
	// endpoint, each) serves at once; more wait to be accepted
	// (0: DefaultMaxConns).
	MaxConns int
	// BodyTimeout bounds how long a client may take to send a request
	// body; a stream call's frames may take as long as the call lasts
	// (0: localapi.DefaultBodyTimeout; negative: no bound).
	BodyTimeout time.Duration
}

// Default returns the configuration of `weft daemon` without flags.
func Default() Config { return Config{Config: node.Default()} }

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.MCPListen != "" {
		if err := checkLoopback(c.MCPListen); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if c.WebListen != "" {
		if err := web.CheckLoopback(c.WebListen); err != nil {
			return fmt.Errorf("config: web: %w", err)
		}
	}
	if t := strings.TrimSpace(c.MCPToken); t != "" && len(t) < minMCPToken {
		return fmt.Errorf("config: the MCP token is %d characters; use at least %d", len(t), minMCPToken)
	}
	if _, err := c.socketGID(); err != nil {
		return err
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("config: negative max connections %d", c.MaxConns)
	}
	return nil
}

// maxConns is the cap on the API's connections.
func (c Config) maxConns() int { return cmp.Or(c.MaxConns, DefaultMaxConns) }

// bodyTimeout is the bound on reading a request body (0: none).
func (c Config) bodyTimeout() time.Duration {
	if c.BodyTimeout < 0 {
		return 0
	}
	return cmp.Or(c.BodyTimeout, localapi.DefaultBodyTimeout)
}

// socketGID is the gid of the socket group, or -1 for none.
func (c Config) socketGID() (int, error) {
	if c.SocketGroup == "" {
		return -1, nil
	}
	gid, err := lookupGroup(c.SocketGroup)
	if err != nil {
		return -1, fmt.Errorf("config: socket group %q: %w", c.SocketGroup, err)
	}
	return gid, nil
}

// SocketPath returns the socket the daemon serves its API on.
func (c Config) SocketPath() string { return filepath.Join(c.Home, client.SocketName) }

// Daemon is a running daemon.
type Daemon struct {
	cfg  Config
	log  *slog.Logger
	node *node.Node
	api  *http.Server
	ln   net.Listener
	mem  *memListener // the API in memory, for the daemon's own MCP server

	mcpSrv *http.Server // MCP on loopback TCP, when configured
	mcpLn  net.Listener

	tracer *sdktrace.TracerProvider // made from OTEL_* variables, when they configure tracing

	web    *web.Server  // the loopback HTTP listener's routes, when configured
	webSrv *http.Server // and its server
	webLn  net.Listener
	a2a    *a2abridge.Bridge // A2A on the loopback listener
	lock   *homeLock         // the home's lock, released by Close

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New starts a daemon: it starts the node, then binds the API socket
// (which appears only now, when the daemon is ready). Serve the API with
// Serve.
func New(ctx context.Context, cfg Config) (_ *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := client.CheckSocketPath(cfg.SocketPath(), len(".new")); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, mem: newMemListener()}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.lock, err = lockHome(cfg.Home); err != nil {
		return nil, err
	}
	if err := d.setupObs(ctx, &cfg.Config); err != nil {
		d.shutdownTracer()
		d.lock.release()
		return nil, err
	}
	d.node, err = node.New(ctx, cfg.Config)
	if err != nil {
		d.shutdownTracer()
		d.lock.release()
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	var bg context.Context
	bg, d.cancel = context.WithCancel(context.Background())
	api := localapi.New(localapi.FromNode(d.node), weftmcp.Path, d.mcpHandler(), append(d.apiObs(), localapi.WithBodyTimeout(cfg.bodyTimeout()), localapi.WithWebURL(d.webURL))...)
	d.api = d.newServer(bg, api) // Close ends streams through bg
	if cfg.MCPListen != "" {
		if err := d.listenMCP(bg); err != nil {
			return nil, err
		}
	}
	if cfg.WebListen != "" {
		if err := d.listenWeb(bg); err != nil {
			return nil, err
		}
		webui.Mount(d.web, api.ForBrowsers()) // the web view at /, the API under /api/v1/
		d.mountObs()
		if err := d.mountA2A(); err != nil {
			return nil, err
		}
	}
	gid, err := cfg.socketGID()
	if err != nil {
		return nil, err
	}
	ln, err := listenSocket(cfg.SocketPath(), gid)
	if err != nil {
		return nil, err
	}
	d.ln = d.limitConns(newCredListener(ln, gid, d.log.With("part", "api")))
	d.wg.Go(func() { _ = d.api.Serve(d.mem) })
	d.log.Info("weft daemon ready", "id", d.node.ID(), "socket", cfg.SocketPath(), "addrs", d.node.Addrs())
	return d, nil
}

// Node returns the daemon's backend.
func (d *Daemon) Node() *node.Node { return d.node }

// Serve serves the local API until Close; it returns nil after Close.
func (d *Daemon) Serve() error {
	err := d.api.Serve(d.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving and closes the node. It waits for in-flight API
// requests for up to five seconds.
func (d *Daemon) Close() error {
	var err error
	d.once.Do(func() {
		if d.cancel != nil {
			d.cancel() // ends event streams
		}
		if d.a2a != nil {
			d.a2a.Close() // ends the calls of running A2A tasks
		}
		for _, srv := range []*http.Server{d.api, d.mcpSrv, d.webSrv} {
			if srv == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if serr := srv.Shutdown(ctx); serr != nil {
				srv.Close()
			}
			cancel()
		}
		if d.ln != nil {
			d.ln.Close()
		}
		d.wg.Wait()
		err = errors.Join(d.node.Close(), d.shutdownTracer())
		d.lock.release()
	})
	return err
}

// shutdownTracer flushes and stops the tracer provider, if the daemon
// made one.
func (d *Daemon) shutdownTracer() error {
	if d.tracer == nil {
		return nil
	}
	tp := d.tracer
	d.tracer = nil
	return shutdownTracer(tp)
}

// ID returns the node's peer ID.
func (d *Daemon) ID() peer.ID { return d.node.ID() }

// Addrs returns the node's full libp2p addresses.
func (d *Daemon) Addrs() []ma.Multiaddr { return d.node.Addrs() }
