package agent_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/mesh/internal/meshtest"
	"github.com/weftmesh/weft/protocol"
)

// loopback is the only address tests listen on: no test traffic leaves the
// machine.
const loopback = "/ip4/127.0.0.1/tcp/0"

// testLogger logs to stderr when WEFT_TEST_LOG is set; otherwise discards.
func testLogger() *slog.Logger {
	if os.Getenv("WEFT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newHost starts a plain libp2p host on loopback TCP, closed when the test
// ends.
func newHost(tb testing.TB) host.Host {
	tb.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings(loopback), libp2p.DisableRelay())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

// newService starts an agent service on h, closed when the test ends
// (before h, which was created first).
func newService(tb testing.TB, h host.Host, disc discovery.Discovery, opts ...agent.Option) *agent.Service {
	tb.Helper()
	opts = append([]agent.Option{agent.WithLogger(testLogger())}, opts...)
	s, err := agent.New(h, disc, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

// connect dials b from a.
func connect(tb testing.TB, a, b host.Host) {
	tb.Helper()
	if err := a.Connect(tb.Context(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// newMesh starts a mesh node listening on loopback TCP only, mDNS off,
// bootstrapping to boot (if any); it is closed when the test ends.
func newMesh(tb testing.TB, cfg mesh.Config, boot *mesh.Mesh) *mesh.Mesh {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ListenAddrs = []string{loopback}
	cfg.MDNS = false
	if os.Getenv("WEFT_TEST_LOG") != "" {
		cfg.Logger = testLogger()
	}
	if boot != nil {
		for _, a := range boot.Addrs() {
			cfg.Bootstrap = append(cfg.Bootstrap, a.String())
		}
	}
	m, err := mesh.New(tb.Context(), key, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("close mesh: %v", err)
		}
	})
	return m
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	meshtest.WaitFor(tb, d, what, cond)
}

// cardOf returns a card offering caps (the ID is filled in by the service).
func cardOf(name string, caps ...string) protocol.Card {
	c := protocol.Card{Name: name}
	for _, n := range caps {
		c.Capabilities = append(c.Capabilities, protocol.Capability{Name: n})
	}
	return c
}

// liveCard holds a card that can be swapped while it is served.
type liveCard struct{ p atomic.Pointer[protocol.Card] }

func newLiveCard(c protocol.Card) *liveCard {
	l := &liveCard{}
	l.set(c)
	return l
}

func (l *liveCard) set(c protocol.Card)  { l.p.Store(&c) }
func (l *liveCard) get() protocol.Card   { return *l.p.Load() }
func (l *liveCard) option() agent.Option { return agent.WithCard(l.get) }
func providerIDs(ps []agent.Provider) []peer.ID {
	ids := make([]peer.ID, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

// sortedIDs returns ids sorted as Discover sorts providers.
func sortedIDs(ids ...peer.ID) []peer.ID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b peer.ID) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// frame encodes b as one frame: uvarint length, then b.
func frame(b []byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
}

// readAnswer reads one frame of at most 1 MiB.
func readAnswer(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(r)
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(n, 1<<20))
	_, err = io.ReadFull(br, b)
	return b, err
}

// gate is a connection gater that allows connections to and from one
// peer only, until opened.
type gate struct {
	only peer.ID
	open atomic.Bool
}

func (g *gate) allow(p peer.ID) bool                         { return g.open.Load() || p == g.only }
func (g *gate) InterceptPeerDial(p peer.ID) bool             { return g.allow(p) }
func (g *gate) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }
func (g *gate) InterceptAccept(network.ConnMultiaddrs) bool  { return true }
func (g *gate) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return g.allow(p)
}
func (g *gate) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }
