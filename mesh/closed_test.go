package mesh

import (
	"context"
	"crypto/rand"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	relayclient "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
)

// tcpLoopback: private networks run over TCP only.
var tcpLoopback = []string{"/ip4/127.0.0.1/tcp/0"}

// allowOnly returns an Allow func that lets in only the given peers.
func allowOnly(ps ...peer.ID) func(peer.ID) bool {
	set := make(map[peer.ID]bool, len(ps))
	for _, p := range ps {
		set[p] = true
	}
	return func(p peer.ID) bool { return set[p] }
}

// connectErr connects from to to (as `weft connect` does) and returns the
// error.
func connectErr(t *testing.T, from, to *Mesh) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := from.Connect(ctx, to.Addrs()[0])
	return err
}

// neverConnected checks, for a second, that the closed node holds no
// connection to other, and then that other holds none to it. (A dialer
// that finishes its side of the handshake first may hold one for the
// moment it takes the closed node to drop it.)
func neverConnected(t *testing.T, closed, other *Mesh) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if n := len(closed.h.Network().ConnsToPeer(other.ID())); n > 0 {
			t.Fatalf("the closed node holds %d connections to %s", n, other.ID())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(other.h.Network().ConnsToPeer(closed.ID())); n > 0 {
		t.Fatalf("%s holds %d connections to the closed node", other.ID(), n)
	}
}

// TestNetworkKey: nodes with the same network key connect; a node without
// a key, or with another key, cannot connect to them nor they to it, and
// so never gossips or syncs with them either.
func TestNetworkKey(t *testing.T) {
	key, err := NewNetworkKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewNetworkKey()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := newTestMesh(t, Config{NetworkKey: key, ListenAddrs: tcpLoopback})
	b, _ := newTestMesh(t, Config{NetworkKey: key, ListenAddrs: tcpLoopback}, a)
	waitFor(t, 10*time.Second, "the two keyed nodes to connect", func() bool { return connected(a, b) })

	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no key", Config{ListenAddrs: tcpLoopback}},
		{"another key", Config{NetworkKey: other, ListenAddrs: tcpLoopback}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestMesh(t, tc.cfg)
			// The handshake fails: the keyless side cannot read the
			// keyed side's first message.
			if err := connectErr(t, s, a); err == nil || !strings.Contains(err.Error(), "security protocol") {
				t.Errorf("a node with %s dialling a keyed node: %v, want a failed handshake", tc.name, err)
			}
			if err := connectErr(t, a, s); err == nil {
				t.Errorf("a keyed node connected to a node with %s", tc.name)
			}
			neverConnected(t, a, s)
		})
	}
}

// TestAllowlist: a node with an allowlist connects with listed peers both
// ways; an unlisted peer can neither dial it nor be dialled by it, and
// never holds a connection to it, not even for a moment.
//
// Each direction has its own listed peer. With one peer dialled both ways
// the test had to drop the first connection, and then a redial by either
// side (autorelay and the DHT look for peers they knew) could meet the
// test's own: over TCP with port reuse both dial from their listening
// ports, the two dials become one TCP simultaneous open, and the Noise
// handshake fails with both sides the initiator. That is libp2p's and not
// the allowlist's; the test avoids it rather than retrying it.
func TestAllowlist(t *testing.T) {
	dialsIn, _ := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
	dialledOut, _ := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
	stranger, _ := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
	a, _ := newTestMesh(t, Config{ListenAddrs: tcpLoopback, Allow: allowOnly(dialsIn.ID(), dialledOut.ID())})

	if err := connectErr(t, dialsIn, a); err != nil {
		t.Fatalf("a listed peer dialling in: %v", err)
	}
	if err := connectErr(t, a, dialledOut); err != nil {
		t.Fatalf("dialling a listed peer: %v", err)
	}

	if err := connectErr(t, stranger, a); err == nil {
		t.Error("an unlisted peer dialled in")
	}
	if err := connectErr(t, a, stranger); err == nil {
		t.Error("the node dialled an unlisted peer")
	}
	neverConnected(t, a, stranger)
}

// TestRelayAccess: a public node's relay serves a peer only as its
// Config.Relay says. By default (members) two strangers get no circuit
// through it: no reservation, and no circuit from a stranger even to a
// member with one; members (here of a space the relay has joined, or peers
// it connected to) get both. Off serves no one; in a keyed mesh every peer
// with the key is a member.
func TestRelayAccess(t *testing.T) {
	key, err := NewNetworkKey()
	if err != nil {
		t.Fatal(err)
	}
	space := protocol.SpaceID("test/relay-members")
	// keepBySpace makes every node a member of a space the relay has
	// joined, and waits until the relay sees them on its topic.
	keepBySpace := func(t *testing.T, relay *Mesh, others ...*Mesh) {
		for _, m := range append([]*Mesh{relay}, others...) {
			if err := m.JoinSpace(space, newRecorder()); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range others {
			if err := connectErr(t, o, relay); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 10*time.Second, "the relay to see the members on its topic", func() bool {
			ps := relay.SpacePeers(space)
			for _, o := range others {
				if !containsPeer(ps, o.ID()) {
					return false
				}
			}
			return true
		})
	}
	// keepByConnect has the relay connect to each (as `weft connect`).
	keepByConnect := func(t *testing.T, relay *Mesh, others ...*Mesh) {
		for _, o := range others {
			if err := connectErr(t, relay, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name             string
		cfg              Config
		keepTarget       func(t *testing.T, relay *Mesh, others ...*Mesh) // nil: strangers
		keepDialer       func(t *testing.T, relay *Mesh, others ...*Mesh)
		reserve, connect bool // want a reservation (of target), a circuit (from dialer)
	}{
		{name: "default, strangers", cfg: Config{}},
		{name: "default, member target, stranger dialer", keepTarget: keepByConnect, reserve: true},
		{name: "default, members of a space", keepTarget: keepBySpace, keepDialer: keepBySpace, reserve: true, connect: true},
		{name: "default, connected peers", keepTarget: keepByConnect, keepDialer: keepByConnect, reserve: true, connect: true},
		{name: "off, connected peers", cfg: Config{Relay: RelayOff}, keepTarget: keepByConnect, keepDialer: keepByConnect},
		{name: "open, strangers", cfg: Config{Relay: RelayOpen}, reserve: true, connect: true},
		{name: "keyed, strangers with the key", cfg: Config{NetworkKey: key}, reserve: true, connect: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.ListenAddrs, cfg.Reachability = tcpLoopback, ReachabilityPublic
			relay, _ := newTestMesh(t, cfg)
			peerCfg := Config{ListenAddrs: tcpLoopback, NetworkKey: tc.cfg.NetworkKey}
			target, _ := newTestMesh(t, peerCfg)
			dialer, _ := newTestMesh(t, peerCfg)
			if tc.keepTarget != nil {
				tc.keepTarget(t, relay, target)
			}
			if tc.keepDialer != nil {
				tc.keepDialer(t, relay, dialer)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := relayclient.Reserve(ctx, target.h, peer.AddrInfo{ID: relay.ID(), Addrs: relay.h.Addrs()})
			if got := err == nil; got != tc.reserve {
				t.Fatalf("reservation: %v, want it made: %v", err, tc.reserve)
			}
			if !tc.reserve {
				return // no circuit without a reservation
			}
			// The circuit is dialled on the relay transport itself: the
			// host's Connect would take any direct connection the dialer
			// has meanwhile (its DHT learns the target from the relay).
			circuit := relay.Addrs()[0].Encapsulate(ma.StringCast("/p2p-circuit/p2p/" + target.ID().String()))
			tpt := dialer.h.Network().(*swarm.Swarm).TransportForDialing(circuit)
			if tpt == nil {
				t.Fatalf("the dialer has no transport for %s", circuit)
			}
			c, err := tpt.Dial(ctx, circuit, target.ID())
			if err == nil {
				c.Close()
			}
			if got := err == nil; got != tc.connect {
				t.Fatalf("circuit: %v, want one: %v", err, tc.connect)
			}
		})
	}
}

// dialIn has a new plain libp2p host, with a fresh identity or key's,
// that listens on ip (TCP, so that it dials from there too) or nowhere,
// connect to m. It reports whether m then holds a connection from it,
// waiting up to 10 s for what the caller expects (in): m registers a
// connection a moment after the host, and drops one it refuses a moment
// after the host believes itself connected, moments a loaded machine
// stretches.
func dialIn(t *testing.T, m *Mesh, ip string, in bool, key ...crypto.PrivKey) bool {
	t.Helper()
	opts := []libp2p.Option{libp2p.NoListenAddrs, libp2p.DisableRelay(), libp2p.Transport(tcp.NewTCPTransport)}
	if ip != "" {
		opts[0] = libp2p.ListenAddrStrings("/ip4/" + ip + "/tcp/0")
	}
	if len(key) > 0 {
		opts = append(opts, libp2p.Identity(key[0]))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.Peerstore().AddAddrs(m.ID(), m.h.Addrs(), time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := h.Network().DialPeer(ctx, m.ID()); err != nil {
		return false
	}
	held := func() bool { return len(m.h.Network().ConnsToPeer(h.ID())) > 0 }
	if !in {
		time.Sleep(100 * time.Millisecond) // a connection that gets in is registered by then, unless the machine is very busy
	}
	for deadline := time.Now().Add(10 * time.Second); held() != in && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return held()
}

// strangersIn counts m's inbound connections of peers it does not keep.
func strangersIn(m *Mesh) int {
	n := 0
	for _, c := range m.h.Network().Conns() {
		if c.Stat().Direction == network.DirInbound && !m.access.kept(c.RemotePeer()) {
			n++
		}
	}
	return n
}

// TestInboundLimitKeepsPeers: strangers with fresh identities fill a node's
// inbound connections; one more is refused, but the peers it keeps still
// get in, on new connections, after this node had lost them: a bootstrap
// peer, a peer connected with Connect, a member of a joined space (which
// left it by disconnecting), a peer Config.Keep names. (Each comes back as
// a plain host with its key, which does nothing but connect.) In a closed
// mesh the strangers get nothing and a listed peer gets in.
func TestInboundLimitKeepsPeers(t *testing.T) {
	const limit = 8
	space := protocol.SpaceID("test/kept")
	boot, bootKey := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
	manual, manualKey := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
	member, memberKey := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
	trustedKey, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	trusted, _ := peer.IDFromPrivateKey(trustedKey)
	a, _ := newTestMesh(t, Config{
		ListenAddrs: tcpLoopback,
		Conns:       ConnLimits{Inbound: limit, Reserve: 4},
		Keep:        func(p peer.ID) bool { return p == trusted },
	}, boot)

	waitFor(t, 10*time.Second, "the bootstrap connection", func() bool { return connected(a, boot) })
	if err := connectErr(t, a, manual); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Mesh{a, member} {
		if err := m.JoinSpace(space, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	if err := connectErr(t, member, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the member on a's topic", func() bool { return containsPeer(a.SpacePeers(space), member.ID()) })
	for _, p := range []*Mesh{boot, manual, member} {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "a to lose every connection", func() bool { return len(a.h.Network().Conns()) == 0 })
	waitFor(t, 10*time.Second, "the member to leave a's topic", func() bool { return !containsPeer(a.SpacePeers(space), member.ID()) })

	for i := range limit {
		if !dialIn(t, a, "", true) {
			t.Fatalf("stranger %d refused below the limit", i)
		}
	}
	if dialIn(t, a, "", false) {
		t.Fatalf("a stranger got in beyond the limit (%d strangers in)", strangersIn(a))
	}
	for _, k := range []struct {
		name string
		key  crypto.PrivKey
	}{{"bootstrap peer", bootKey}, {"connected peer", manualKey}, {"space member", memberKey}, {"kept peer", trustedKey}} {
		if !dialIn(t, a, "", true, k.key) {
			t.Errorf("the %s was refused", k.name)
		}
	}
	if got := strangersIn(a); got != limit {
		t.Errorf("%d strangers in, want %d", got, limit)
	}

	t.Run("closed", func(t *testing.T) {
		listed, _ := newTestMesh(t, Config{ListenAddrs: tcpLoopback})
		c, _ := newTestMesh(t, Config{
			ListenAddrs: tcpLoopback,
			Conns:       ConnLimits{Inbound: limit},
			Allow:       allowOnly(listed.ID()),
		})
		for i := range 2 * limit {
			if dialIn(t, c, "", false) {
				t.Fatalf("stranger %d got into a closed mesh", i)
			}
		}
		if err := connectErr(t, listed, c); err != nil {
			t.Errorf("the listed peer was refused: %v", err)
		}
	})
}

// TestConnsPerIPAndPeer: with loopback not exempt, one address gets PerIP
// connections and another address more; one peer gets PerPeer inbound
// connections.
func TestConnsPerIPAndPeer(t *testing.T) {
	const perIP, perPeer = 3, 2
	a, _ := newTestMesh(t, Config{
		ListenAddrs: tcpLoopback,
		Conns:       ConnLimits{PerIP: perIP, PerPeer: perPeer, Exempt: []netip.Prefix{}},
	})
	for i := range perIP {
		if !dialIn(t, a, "127.0.0.1", true) {
			t.Fatalf("connection %d from 127.0.0.1 refused below the limit", i)
		}
	}
	if dialIn(t, a, "127.0.0.1", false) {
		t.Fatal("a connection from 127.0.0.1 beyond the per-IP limit got in")
	}
	// One peer, on another address: hosts sharing a key.
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range perPeer {
		if !dialIn(t, a, "127.0.0.2", true, key) {
			t.Fatalf("connection %d of one peer from another address refused below the limits", i)
		}
	}
	dialIn(t, a, "127.0.0.2", true, key) // held either way: the peer's first connections are
	id, _ := peer.IDFromPrivateKey(key)
	time.Sleep(100 * time.Millisecond) // a third that got in is registered by then, unless the machine is very busy
	waitFor(t, 10*time.Second, "one peer holding perPeer inbound connections", func() bool {
		return len(a.h.Network().ConnsToPeer(id)) == perPeer
	})
}
