// Package node is the weft daemon's backend: it wires the mesh (libp2p) to
// the store (Badger) and offers the daemon's operations as methods with
// domain types and typed errors (*Error, *protocol.CallError, protocol's
// validation errors). It speaks no HTTP: node/localapi serves these methods
// on the local API, node/daemon runs the two on the Unix socket, and a Go
// program can embed a Node directly.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/admit"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/mesh/call"
	"github.com/weftmesh/weft/mesh/direct"
	"github.com/weftmesh/weft/node/outbox"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// Node is a running daemon's backend. Its methods are safe for concurrent
// use.
type Node struct {
	cfg Config
	log *slog.Logger
	key crypto.PrivKey
	// signer signs with key; the node's own messages.
	signer *protocol.Signer
	// tracer records spans (a no-op one without Config.Tracer); metrics
	// are Config.Metrics, whose methods do nothing on nil.
	tracer trace.Tracer
	store  *store.Store
	mesh   *mesh.Mesh

	direct   *direct.Service
	calls    *call.Service
	handlers *handlers
	outbox   *outbox.Outbox
	agent    *agent.Service
	card     cardState
	started  time.Time
	outgoing outCalls    // calls in flight to peers
	limits   spaceLimits // each joined space's own limits
	pacer    *pacer      // this node's own posts, below its peers' rates
	declined declinedLog
	private  privSpaces     // the private spaces joined (private.go)
	admitSvc *admit.Service // joins presented to this node (private.go)
	anycast  anycastState   // calls by capability

	trust      *policy.TrustList // who may call the handlers that allow "trusted"
	gate       *policy.Gate      // the inbox's DM policy
	inboxCount inboxCount
	recent     recentCache // received messages, decoded (recent.go)
	group      groupCommit // received messages waiting to be stored (group.go)

	// bg is the node's own context, for work it starts in the background;
	// Close cancels it (cancel) and waits for that work (wg). Work is
	// started only through spawn, which starts none once Close has begun
	// (closing, under spawnMu): a WaitGroup must not grow from zero while
	// Wait runs, and messages keep arriving until the mesh is closed.
	bg      context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	spawnMu sync.Mutex
	closing bool
	once    sync.Once
}

// spawn runs f in the background on the node's wait group, unless Close
// has begun; it reports whether f was started. f must end when n.bg ends.
func (n *Node) spawn(f func()) bool {
	n.spawnMu.Lock()
	defer n.spawnMu.Unlock()
	if n.closing {
		return false
	}
	n.wg.Go(f)
	return true
}

// New starts a node: it opens the store, starts the mesh and rejoins the
// spaces the node had joined. It runs until Close.
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
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	signer, err := protocol.NewSigner(key)
	if err != nil {
		return nil, err
	}
	trust, err := policy.LoadTrust(filepath.Join(cfg.Home, trustFile))
	if err != nil {
		return nil, err
	}
	st, err := store.Open(store.Options{
		Dir:           cfg.storeDir(),
		Logger:        log.With("part", "store"),
		Retention:     cfg.Retention,
		SweepInterval: cfg.SweepInterval,
		// The DM policy's quotas bound the inbox per sender instead (see
		// inbox.go).
		CountExempt: []protocol.ID{protocol.InboxSpace(id)},
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	n := &Node{cfg: cfg, log: log, key: key, signer: signer, store: st, handlers: newHandlers(), started: time.Now(), tracer: cfg.tracer(),
		trust: trust, gate: policy.NewGate(cfg.DM),
		limits: spaceLimits{own: make(map[protocol.ID]store.SpaceLimits)}}
	member, stranger := cfg.paceRates()
	n.pacer = newPacer(member, stranger, func(space protocol.ID) bool { return n.private.get(space) != nil })
	n.handlers.rel = trust
	n.handlers.self, n.handlers.tracer, n.handlers.metrics = id, n.tracer, cfg.Metrics
	n.handlers.tracing = cfg.Tracer != nil
	n.bg, n.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := n.startMesh(ctx); err != nil {
		return nil, err
	}
	if err := n.recountInbox(ctx); err != nil {
		return nil, fmt.Errorf("count the inbox: %w", err)
	}
	n.resumePrivate()
	n.spawn(func() { n.reconnectKnownPeers(n.bg) })
	n.spawn(func() { n.outbox.Run(n.bg) })
	return n, nil
}

// startMesh starts the mesh and the protocols on its host, and rejoins the
// stored spaces.
func (n *Node) startMesh(ctx context.Context) (err error) {
	cfg, log := n.cfg, n.log
	mcfg := mesh.Config{
		ListenAddrs:  cfg.Listen,
		Bootstrap:    cfg.Bootstrap,
		MDNS:         cfg.MDNS,
		DHTMode:      cfg.DHTMode,
		Reachability: cfg.Reachability,
		PunchAgain:   cfg.PunchAgain,
		Limits:       cfg.Limits,
		Logger:       log.With("part", "mesh"),
		History:      n.store,
		SyncInterval: cfg.SyncInterval,
		SyncWindow:   cfg.syncWindow(),
		Gater:        cfg.Gater,
		Rates:        cfg.Rates,
		OnSync:       n.syncSession,
	}
	if cfg.Metrics != nil {
		mcfg.Registerer = cfg.Metrics.Registry()
		mcfg.ResourceMetrics = cfg.ResourceMetrics
	}
	if err := n.meshAccess(&mcfg); err != nil {
		return err
	}
	if err := n.configurePrivate(&mcfg); err != nil {
		return err
	}
	n.mesh, err = mesh.New(ctx, n.key, mcfg)
	if err != nil {
		return err
	}
	n.startPrivate()
	n.mesh.OnPeerConnected(n.rememberPeer)
	h := n.mesh.Host()
	n.direct, err = direct.New(h, inboxSink{n},
		direct.WithLimits(cfg.Limits),
		direct.WithLogger(log.With("part", "direct")))
	if err != nil {
		return err
	}
	n.calls, err = call.New(h, n.handlers, call.WithLimits(cfg.Limits))
	if err != nil {
		return err
	}
	n.outbox, err = outbox.New(n.store, dmTransport{n}, outbox.WithLogger(log.With("part", "outbox")), outbox.WithObserver(cfg.Metrics))
	if err != nil {
		return err
	}
	n.mesh.OnPeerConnected(func(p peer.ID, _ []ma.Multiaddr) { n.outbox.PeerConnected(p) })
	if err := n.loadCard(); err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	n.agent, err = agent.New(h, n.mesh.Discovery(),
		agent.WithCard(n.Card),
		agent.WithHealth(n.Health),
		agent.WithLogger(log.With("part", "agent")))
	if err != nil {
		return err
	}
	n.handlers.onCaps = n.advertise
	n.advertise()
	spaces, err := n.store.Spaces()
	if err != nil {
		return err
	}
	for _, sp := range spaces {
		if n.unusable(sp) { // private.go
			continue
		}
		n.limits.set(sp.ID, sp.Limits)
		cfg.Metrics.SpaceJoined(sp.ID.String(), sp.Name)
		if err := n.mesh.JoinSpace(sp.ID, spaceSink{n}); err != nil {
			return fmt.Errorf("rejoin space %s: %w", sp.Name, err)
		}
		n.log.Info("rejoined space", "name", sp.Name, "space", sp.ID)
	}
	n.watchGauges()
	return nil
}

// Close leaves the network and closes the store.
func (n *Node) Close() error {
	var errs []error
	n.once.Do(func() {
		n.spawnMu.Lock()
		n.closing = true
		n.spawnMu.Unlock()
		if n.cancel != nil {
			n.cancel() // ends background loops
		}
		n.wg.Wait()
		if n.admitSvc != nil {
			errs = append(errs, n.admitSvc.Close())
		}
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

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }

// Mesh returns the node's mesh, for embedders and tests that need the
// libp2p host itself.
func (n *Node) Mesh() *mesh.Mesh { return n.mesh }

// Store returns the node's store, for embedders and tests.
func (n *Node) Store() *store.Store { return n.store }

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.mesh.ID() }

// Addrs returns the node's full libp2p addresses.
func (n *Node) Addrs() []ma.Multiaddr { return n.mesh.Addrs() }

// Info describes this node.
type Info struct {
	ID           peer.ID
	Addrs        []ma.Multiaddr // full addresses, ending in /p2p/ID
	Version      string
	Home         string
	Reachability string // "public", "private" or "unknown"
	Started      time.Time
	// Syncing is true while a sync session is in flight; SyncSessions
	// counts the sessions run since the start.
	Syncing      bool
	SyncSessions int
}

// Info describes this node.
func (n *Node) Info() Info {
	return Info{ID: n.mesh.ID(), Addrs: n.mesh.Addrs(), Version: Version, Home: n.cfg.Home, Reachability: n.mesh.Reachability(),
		Started: n.started, Syncing: !n.mesh.SyncIdle(), SyncSessions: n.mesh.SyncStats().Sessions}
}

// Peers returns the connected peers.
func (n *Node) Peers() []mesh.PeerInfo { return n.mesh.Peers() }

// connectWait bounds Connect.
const connectWait = 15 * time.Second

// Connect dials the peer at addr (ending in /p2p/ID) and keeps the
// connection.
func (n *Node) Connect(ctx context.Context, addr ma.Multiaddr) (peer.ID, error) {
	if _, err := addr.ValueForProtocol(ma.P_P2P); err != nil {
		return "", errorf(api.CodeBadAddr, "multiaddr %q must end in /p2p/<peer id>", addr)
	}
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	id, err := n.mesh.Connect(ctx, addr)
	if err != nil {
		return "", wrap(api.CodeConnectFailed, err)
	}
	return id, nil
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
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := n.mesh.Host().Connect(cctx, ai); err != nil {
				n.log.Debug("reconnect known peer", "peer", ai.ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// pause waits for d, reporting false if the node stops first.
func (n *Node) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.bg.Done():
		return false
	}
}
