package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"
)

// TestPunchAgainKeepsCircuitItCannotRedial: hi has no reservation at the
// relay (the relay's per-IP limit is spent: many nodes behind one NAT),
// but reaches lo through lo's reservation. lo, the lower ID, must leave
// that circuit alone: it did close it to punch again, and dialled hi
// through the same relay, which cannot reach hi, so the two were left
// with no connection at all (found by an adversarial review). Now only
// the side that dialled a circuit tries, here hi, which lo's reservation
// lets back in.
func TestPunchAgainKeepsCircuitItCannotRedial(t *testing.T) {
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	relayAI := peer.AddrInfo{ID: relay.ID(), Addrs: relay.h.Addrs()}
	natted := Config{
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Reachability: ReachabilityPrivate,
		Gater: coneNAT{relay.ID()}, PunchAgain: 300 * time.Millisecond,
		punchGap: 600 * time.Millisecond,
	}
	k1, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	k2, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	id1, _ := peer.IDFromPrivateKey(k1)
	id2, _ := peer.IDFromPrivateKey(k2)
	if bytes.Compare([]byte(id1), []byte(id2)) > 0 {
		k1, k2 = k2, k1
	}
	hiID, _ := peer.IDFromPrivateKey(k2)
	var loDialledHi atomic.Int64 // lo's dials of hi through a relay: a try of lo's
	start := func(key crypto.PrivKey) *Mesh {
		cfg := natted
		if key == k1 {
			cfg.Gater = countCircuitDials{coneNAT{relay.ID()}, hiID, &loDialledHi}
		}
		cfg.MDNS = false
		cfg.Logger = testLogger()
		for _, a := range relay.Addrs() {
			cfg.Bootstrap = append(cfg.Bootstrap, a.String())
		}
		m, err := New(t.Context(), key, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	lo := start(k1)
	circ, _ := ma.NewMultiaddr(relay.h.Addrs()[0].String() + "/p2p/" + relay.ID().String() + "/p2p-circuit")
	reachable := func(id peer.ID) bool { // through the relay, by a stranger
		h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.EnableRelay(), libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ctx, cancel := context.WithTimeout(network.WithAllowLimitedConn(t.Context(), "test"), 3*time.Second)
		defer cancel()
		return h.Connect(ctx, peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{circ}}) == nil
	}
	waitFor(t, 30*time.Second, "lo's reservation", func() bool { return reachable(lo.ID()) })
	// Spend the rest of the relay's reservations for 127.0.0.1.
	for i := 0; ; i++ {
		h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.EnableRelay(), libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		if err := h.Connect(t.Context(), relayAI); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Reserve(t.Context(), h, relayAI); err != nil {
			t.Logf("relay full after %d more reservations: %v", i, err)
			break
		}
		if i > 50 {
			t.Fatal("relay never full")
		}
	}
	hi := start(k2)
	loAt := circ
	ctx, cancel := context.WithTimeout(network.WithAllowLimitedConn(t.Context(), "test"), 10*time.Second)
	defer cancel()
	if err := hi.h.Connect(ctx, peer.AddrInfo{ID: lo.ID(), Addrs: []ma.Multiaddr{loAt}}); err != nil {
		t.Fatal(err)
	}
	if reachable(hi.ID()) {
		t.Fatal("hi has a reservation after all")
	}
	time.Sleep(3 * time.Second) // several of lo's tries, were it to try
	if n := loDialledHi.Load(); n > 0 {
		t.Errorf("lo dialled hi through the relay %d times: it tried to punch again on a circuit it cannot dial again", n)
	}
	// hi's own tries close the circuit and dial it again, so the pair may
	// be between two circuits at any one moment (seconds, on a loaded
	// machine); but never left with none.
	waitFor(t, 20*time.Second, "lo–hi connected through the relay", func() bool {
		return lo.h.Network().Connectedness(hi.ID()) == network.Limited
	})
}

// countCircuitDials is coneNAT that counts the dials of one peer through a
// relay.
type countCircuitDials struct {
	coneNAT
	to peer.ID
	n  *atomic.Int64
}

func (g countCircuitDials) InterceptAddrDial(p peer.ID, a ma.Multiaddr) bool {
	if p == g.to && isCircuit(a) {
		g.n.Add(1)
	}
	return g.coneNAT.InterceptAddrDial(p, a)
}
