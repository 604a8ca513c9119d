package mesh

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// behindNAT gates a node as a NAT would, and keeps it to itself: it dials
// out only to its relay, and accepts an inbound connection only when it
// comes through a relay.
type behindNAT struct{ relay peer.ID }

func (g behindNAT) InterceptPeerDial(p peer.ID) bool           { return p == g.relay }
func (behindNAT) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }
func (behindNAT) InterceptAccept(cm network.ConnMultiaddrs) bool {
	return isCircuit(cm.RemoteMultiaddr())
}
func (behindNAT) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
func (behindNAT) InterceptSecured(d network.Direction, _ peer.ID, cm network.ConnMultiaddrs) bool {
	return d == network.DirOutbound || isCircuit(cm.RemoteMultiaddr())
}

// TestDialThroughRelay: a node that accepts nothing directly holds a
// reservation on a public node's relay; a third node, which knows only
// the relay, reaches it through the relay: Dial finds the way although the
// addresses it learns do not work, and the peer shows as relayed. The relay
// is open: the two others are strangers to it (closed_test.go has the
// relay's access rules).
func TestDialThroughRelay(t *testing.T) {
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	// TCP only: the gate refuses an inbound TCP connection before its
	// handshake, so a dial fails as it would at a NAT (a QUIC client can
	// finish its side of the handshake before the server refuses).
	private, _ := newTestMesh(t, Config{
		ListenAddrs:  []string{"/ip4/127.0.0.1/tcp/0"},
		Reachability: ReachabilityPrivate,
		Gater:        behindNAT{relay.ID()},
	}, relay)
	dialer, _ := newTestMesh(t, Config{}, relay)

	if got := relay.Reachability(); got != ReachabilityPublic {
		t.Errorf("relay reachability %q", got)
	}
	if got := private.Reachability(); got != ReachabilityPrivate {
		t.Errorf("private reachability %q", got)
	}
	// The private node advertises no relay address here (libp2p
	// advertises only public relay addresses, and this is loopback), so
	// only Dial's try through every relay among the peers can work, once
	// the reservation is made.
	waitFor(t, 30*time.Second, "a dial through the relay", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return dialer.Dial(ctx, private.ID()) == nil
	})

	// Again, now that the reservation is known to be there, with an
	// address of the private node that drops every packet (as its LAN
	// address, learnt through identify, does from outside the LAN): one
	// dial within the deadline the daemon gives it (5 s) must still get
	// through the relay.
	if err := dialer.h.Network().ClosePeer(private.ID()); err != nil {
		t.Fatal(err)
	}
	hole, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	dead := ma.StringCast("/ip4/127.0.0.1/udp/" + strconv.Itoa(hole.LocalAddr().(*net.UDPAddr).Port) + "/quic-v1")
	dialer.h.Peerstore().AddAddr(private.ID(), dead, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := dialer.Dial(ctx, private.ID()); err != nil {
		t.Fatalf("dial with a dead address known: %v", err)
	}
	var info PeerInfo
	for _, p := range dialer.Peers() {
		if p.ID == private.ID() {
			info = p
		}
	}
	if !info.Relayed || len(info.Addrs) == 0 || !isCircuit(info.Addrs[0]) {
		t.Fatalf("dialer's view of the private node: %+v, want a relayed connection", info)
	}
	for _, p := range dialer.Peers() {
		if p.ID == relay.ID() && p.Relayed {
			t.Errorf("the relay itself shows as relayed: %+v", p)
		}
	}
}
