// Package node is the weft daemon: it wires the mesh (libp2p) to the store
// (Badger) and serves the local API on a Unix socket. Package node/client is
// the Go client of that API.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/mesh/direct"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// Node is a running daemon.
type Node struct {
	cfg   Config
	log   *slog.Logger
	key   crypto.PrivKey
	store *store.Store
	mesh  *mesh.Mesh
	api   *http.Server
	ln    net.Listener

	mcpSrv *http.Server // MCP on loopback TCP, when configured
	mcpLn  net.Listener

	direct   *direct.Service
	calls    *call.Service
	handlers *handlers
	outbox   *outbox
	agent    *agent.Service
	card     cardState
	started  time.Time

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New starts a daemon: it opens the store, starts the mesh, rejoins the
// spaces the node had joined, and binds the API socket (which appears only
// now, when the daemon is ready). Serve the API with Serve.
func New(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("home: %w", err)
	}
	key, err := mesh.LoadOrCreateIdentity(cfg.identityPath())
	if err != nil {
		return nil, err
	}
	st, err := store.Open(store.Options{
		Dir:           cfg.storeDir(),
		Logger:        log.With("part", "store"),
		Retention:     cfg.Retention,
		SweepInterval: cfg.SweepInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	n := &Node{cfg: cfg, log: log, key: key, store: st, handlers: newHandlers(), started: time.Now()}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	n.mesh, err = mesh.New(ctx, key, mesh.Config{
		ListenAddrs:  cfg.Listen,
		Bootstrap:    cfg.Bootstrap,
		MDNS:         cfg.MDNS,
		DHTMode:      cfg.DHTMode,
		Reachability: cfg.Reachability,
		Limits:       cfg.Limits,
		Logger:       log.With("part", "mesh"),
		History:      st,
		SyncInterval: cfg.SyncInterval,
		SyncWindow:   cfg.SyncWindow,
		Gater:        cfg.gater,
	})
	if err != nil {
		return nil, err
	}
	n.mesh.OnPeerConnected(n.rememberPeer)
	h := n.mesh.Host()
	n.direct, err = direct.New(h, n,
		direct.WithLimits(cfg.Limits),
		direct.WithLogger(log.With("part", "direct")))
	if err != nil {
		return nil, err
	}
	n.calls, err = call.New(h, n.handlers, call.WithLimits(cfg.Limits))
	if err != nil {
		return nil, err
	}
	n.outbox = newOutbox(n)
	n.mesh.OnPeerConnected(n.outbox.peerConnected)
	if err := n.loadCard(); err != nil {
		return nil, fmt.Errorf("agent card: %w", err)
	}
	n.agent, err = agent.New(h, n.mesh.Discovery(),
		agent.WithCard(n.Card),
		agent.WithHealth(n.Health),
		agent.WithLogger(log.With("part", "agent")))
	if err != nil {
		return nil, err
	}
	n.handlers.onCaps = n.advertise
	n.advertise()
	spaces, err := st.Spaces()
	if err != nil {
		return nil, err
	}
	for _, sp := range spaces {
		if err := n.mesh.JoinSpace(sp.ID, n); err != nil {
			return nil, fmt.Errorf("rejoin space %s: %w", sp.Name, err)
		}
	}
	var bg context.Context
	bg, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.reconnectKnownPeers(bg)
	}()
	n.wg.Go(func() { n.outbox.run(bg) })
	n.api = &http.Server{
		Handler:           n.Handler(),
		BaseContext:       func(net.Listener) context.Context { return bg }, // Close ends streams
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cfg.MCPListen != "" {
		if err := n.listenMCP(bg); err != nil {
			return nil, err
		}
	}
	n.ln, err = listenSocket(cfg.SocketPath())
	if err != nil {
		return nil, err
	}
	log.Info("weft daemon ready", "id", n.mesh.ID(), "socket", cfg.SocketPath(), "addrs", n.mesh.Addrs())
	return n, nil
}

// Serve serves the local API until Close; it returns nil after Close.
func (n *Node) Serve() error {
	err := n.api.Serve(n.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.mesh.ID() }

// Addrs returns the node's full libp2p addresses.
func (n *Node) Addrs() []ma.Multiaddr { return n.mesh.Addrs() }

// Close stops serving, leaves the network and closes the store. It waits
// for in-flight API requests for up to five seconds.
func (n *Node) Close() error {
	var errs []error
	n.once.Do(func() {
		if n.cancel != nil {
			n.cancel() // ends event streams and background loops
		}
		if n.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := n.api.Shutdown(ctx); err != nil {
				n.api.Close()
			}
			cancel()
		}
		if n.ln != nil {
			n.ln.Close()
		}
		if n.mcpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := n.mcpSrv.Shutdown(ctx); err != nil {
				n.mcpSrv.Close()
			}
			cancel()
		}
		n.wg.Wait()
		if n.agent != nil {
			errs = append(errs, n.agent.Close())
		}
		if n.calls != nil {
			errs = append(errs, n.calls.Close())
		}
		if n.direct != nil {
			errs = append(errs, n.direct.Close())
		}
		if n.mesh != nil {
			errs = append(errs, n.mesh.Close())
		}
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
	})
	return errors.Join(errs...)
}

// Deliver stores a valid message that arrived from the mesh (mesh.Sink).
func (n *Node) Deliver(ctx context.Context, m *protocol.Message) error {
	_, added, err := n.store.Put(ctx, storeMessage(m))
	if err != nil {
		n.log.Warn("store message from mesh", "id", m.ID, "err", err)
		return err
	}
	if added {
		n.log.Debug("message stored", "id", m.ID, "space", m.Space, "from", m.From)
	}
	return nil
}

func storeMessage(m *protocol.Message) store.Message {
	sm := store.Message{
		ID:      m.ID,
		Space:   m.Space,
		Prev:    m.Prev,
		ReplyTo: m.Refs.Messages,
		Time:    m.CreatedAt,
		Raw:     m.Encode(),
	}
	if exp, ok := m.Expiry(); ok {
		sm.Expires = exp.UnixMilli()
	}
	return sm
}

func (n *Node) rememberPeer(id peer.ID, addrs []ma.Multiaddr) {
	p := store.Peer{ID: id.String(), LastSeen: time.Now().UTC()}
	for _, a := range addrs {
		p.Addrs = append(p.Addrs, a.String())
	}
	if err := n.store.PutPeer(p); err != nil {
		n.log.Debug("remember peer", "peer", id, "err", err)
	}
}

// reconnectKnownPeers dials the peers this node knew before a restart, so
// a restarted daemon rejoins its mesh even without --bootstrap.
func (n *Node) reconnectKnownPeers(ctx context.Context) {
	peers, err := n.store.Peers()
	if err != nil {
		n.log.Warn("load known peers", "err", err)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, p := range peers {
		ai := peer.AddrInfo{}
		id, err := peer.Decode(p.ID)
		if err != nil || id == n.mesh.ID() {
			continue
		}
		ai.ID = id
		for _, s := range p.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
		if len(ai.Addrs) == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := n.mesh.Host().Connect(cctx, ai); err != nil {
				n.log.Debug("reconnect known peer", "peer", ai.ID, "err", err)
			}
		}()
	}
	wg.Wait()
}
