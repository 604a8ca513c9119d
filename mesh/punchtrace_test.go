package mesh

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/internal/testbed"
)

// logTo is a debug-level (or level) text logger writing to b.
func logTo(b *testbed.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}

// TestPunchTracer: every kind of libp2p hole punching event becomes one
// debug line naming the peer and how it went; above debug, only the first
// punch over TCP alone is said, once.
func TestPunchTracer(t *testing.T) {
	p := peer.ID("remote")
	quic := []string{"/ip4/11.0.0.1/udp/4001/quic-v1", "/ip4/11.0.0.1/tcp/4001"}
	events := []struct {
		evt  any
		want string
	}{
		{&holepunch.DirectDialEvt{Success: false, EllapsedTime: 5 * time.Second, Error: "timeout"}, `msg="hole punch: direct dial" peer=` + p.String() + ` ok=false took=5s err=timeout`},
		{&holepunch.ProtocolErrorEvt{Error: "stream reset"}, `msg="hole punch: protocol error" peer=` + p.String() + ` err="stream reset"`},
		{&holepunch.StartHolePunchEvt{RemoteAddrs: quic, RTT: 1234567}, `msg="hole punch: punching" peer=` + p.String() + ` addrs="[` + strings.Join(quic, " ") + `]" rtt=1.2ms`},
		{&holepunch.StartHolePunchEvt{RemoteAddrs: []string{"/dns4/quic.example/tcp/4001"}, RTT: 1234567}, `msg="hole punch: punching" peer=` + p.String() + ` addrs=[/dns4/quic.example/tcp/4001] rtt=1.2ms`},
		{&holepunch.HolePunchAttemptEvt{Attempt: 2}, `msg="hole punch: attempt" peer=` + p.String() + ` n=2`},
		{&holepunch.EndHolePunchEvt{Success: true, EllapsedTime: 6543210}, `msg="hole punch: punch ended" peer=` + p.String() + ` ok=true took=6.5ms err=""`},
		{&holepunch.StartHolePunchEvt{RemoteAddrs: []string{"/ip4/11.0.0.2/tcp/4002"}, RTT: 1234567}, `msg="hole punch: punching" peer=` + p.String() + ` addrs=[/ip4/11.0.0.2/tcp/4002] rtt=1.2ms`},
		{"something new", `msg="hole punch: Later" peer=` + p.String()},
	}
	const tcpOnly = `level=INFO msg="hole punching over TCP only: `
	var debug, info, noQUIC testbed.Buffer
	tracers := []*punchTracer{
		{log: logTo(&debug, slog.LevelDebug), quic: true},
		{log: logTo(&info, slog.LevelInfo), quic: true},
		{log: logTo(&noQUIC, slog.LevelInfo)}, // a node that cannot punch over QUIC
	}
	for _, tr := range tracers {
		for _, e := range events {
			typ := "Later"
			if _, ok := e.evt.(string); !ok {
				typ = "ignored for known events"
			}
			tr.Trace(&holepunch.Event{Remote: p, Type: typ, Evt: e.evt})
		}
	}
	var lines []string
	for l := range strings.Lines(debug.String()) {
		if !strings.Contains(l, tcpOnly) {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(events) {
		t.Fatalf("%d debug lines for %d events:\n%s", len(lines), len(events), debug.String())
	}
	for i, e := range events {
		if !strings.Contains(lines[i], "level=DEBUG "+e.want) {
			t.Errorf("line %d: %s\nwant it to contain: %s", i, lines[i], e.want)
		}
	}
	// The first TCP-only punch (the 4th event: a name with "quic" in it is
	// no QUIC address), not the QUIC one before it nor the TCP-only one
	// after it, at either level; and never on a node without QUIC.
	for name, b := range map[string]*testbed.Buffer{"debug": &debug, "info": &info} {
		got := b.String()
		if n := strings.Count(got, tcpOnly); n != 1 || !strings.Contains(got, "addrs=[/dns4/quic.example/tcp/4001]\n") {
			t.Errorf("%s logger: %d TCP-only lines, want 1 naming the first TCP-only punch's addresses:\n%s", name, n, got)
		}
	}
	if l := strings.Count(info.String(), "\n"); l != 1 {
		t.Errorf("%d lines above debug level, want the TCP-only one:\n%s", l, info.String())
	}
	if noQUIC.String() != "" {
		t.Errorf("a node without QUIC was told to punch over QUIC:\n%s", noQUIC.String())
	}
}

// openableNAT is coneNAT until open is set, then lets everything through.
type openableNAT struct {
	coneNAT
	open *atomic.Bool
}

func (g openableNAT) InterceptAddrDial(p peer.ID, a ma.Multiaddr) bool {
	return g.open.Load() || g.coneNAT.InterceptAddrDial(p, a)
}
func (g openableNAT) InterceptAccept(cm network.ConnMultiaddrs) bool {
	return g.open.Load() || g.coneNAT.InterceptAccept(cm)
}
func (g openableNAT) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
func (g openableNAT) InterceptSecured(d network.Direction, p peer.ID, cm network.ConnMultiaddrs) bool {
	return g.open.Load() || g.coneNAT.InterceptSecured(d, p, cm)
}

// TestPeerPathLogged: a peer reached through a relay that becomes reached
// directly, and then through the relay only again, is logged each time
// (at debug level), so that a log tells when a pair went direct.
func TestPeerPathLogged(t *testing.T) {
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	var open atomic.Bool
	var log testbed.Buffer
	natted := Config{
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Reachability: ReachabilityPrivate,
		Gater: openableNAT{coneNAT{relay.ID()}, &open}, PunchAgain: -1,
	}
	b, _ := newTestMesh(t, natted, relay)
	natted.Logger = logTo(&log, slog.LevelDebug)
	a, _ := newTestMesh(t, natted, relay)
	waitFor(t, 30*time.Second, "a reaches b through the relay", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return a.Dial(ctx, b.ID()) == nil
	})
	if c := a.h.Network().Connectedness(b.ID()); c != network.Limited {
		t.Fatalf("a–b connectedness %v, want Limited", c)
	}
	changed := func(now string) func() bool {
		line := `msg="peer path changed" peer=` + b.ID().String() + " now=" + now + "\n"
		return func() bool { return strings.Contains(log.String(), line) }
	}
	if changed("relayed")() || changed("direct")() {
		t.Fatalf("a path change logged before any:\n%s", log.String())
	}

	open.Store(true)
	ctx, cancel := context.WithTimeout(network.WithForceDirectDial(t.Context(), "test"), 10*time.Second)
	defer cancel()
	if err := a.h.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a to log b as direct", changed("direct"))

	for _, c := range a.h.Network().ConnsToPeer(b.ID()) {
		if !isCircuit(c.RemoteMultiaddr()) {
			_ = c.Close()
		}
	}
	waitFor(t, 10*time.Second, "a to log b as relayed again", changed("relayed"))
}
