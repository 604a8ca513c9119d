package mesh

import (
	"context"
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

func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// TestDialThroughRelay: a node that accepts nothing directly holds a
// reservation on a public node's relay; a third node, which knows only
// the relay, reaches it through the relay: Dial finds the way although the
// addresses it learns do not work, and the peer shows as relayed.
func TestDialThroughRelay(t *testing.T) {
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic})
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
	var lastErr error
	waitFor(t, 30*time.Second, "a dial through the relay", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		lastErr = dialer.Dial(ctx, private.ID())
		return lastErr == nil
	})
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
