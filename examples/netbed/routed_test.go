package netbed

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/internal/testbed"
)

// TestRouted: two subnets joined by a router. mDNS does not cross it, so
// the hosts of subnet 2, which know only the bootstrap address of one host
// on subnet 1, must find the others there through the DHT. A space spans
// both subnets, and each side discovers a capability offered on the other.
func TestRouted(t *testing.T) {
	n := netns.NewNet(t)
	lan1 := n.MustLAN(t, netip.MustParsePrefix("10.99.1.0/24"))
	lan2 := n.MustLAN(t, netip.MustParsePrefix("10.99.2.0/24"))
	if _, err := n.AddRouter(lan1, lan2); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lan1.MustHost(t)
		lan2.MustHost(t)
	}
	// Subnet 1: no flags but one capability; they find each other by mDNS.
	boot := start(t, "s1h1", lan1.Hosts[0])
	s1 := []*node{boot,
		start(t, "s1h2", lan1.Hosts[1], "--capability", "summarize"),
		start(t, "s1h3", lan1.Hosts[2]),
	}
	waitConnected(t, s1, 30*time.Second)
	// Subnet 2: one bootstrap address on subnet 1. Each host must find
	// subnet 1's other hosts, which it was told nothing about, through the
	// DHT routing table it builds from the bootstrap peer.
	bootAddr := boot.addr(t, "tcp")
	t0 := time.Now()
	s2 := []*node{
		start(t, "s2h1", lan2.Hosts[0], "--bootstrap", bootAddr),
		start(t, "s2h2", lan2.Hosts[1], "--bootstrap", bootAddr),
		start(t, "s2h3", lan2.Hosts[2], "--bootstrap", bootAddr, "--capability", "translate"),
	}
	up := time.Since(t0)
	all := append(slices.Clone(s1), s2...)
	waitConnected(t, all, 60*time.Second)
	found := time.Since(t0)
	for _, a := range s2 {
		ps, _ := a.peers(context.Background())
		for _, b := range s1 {
			for _, addr := range ps[b.ID].Addrs {
				if !strings.Contains(addr, "/10.99.1.") {
					t.Errorf("%s reaches %s at %s, not across the router", a.name, b.name, addr)
				}
			}
		}
	}

	// A space across both: members find each other by rendezvous in the DHT.
	tJoin := time.Now()
	join(t, all, "routed")
	testbed.Poll(t, 60*time.Second, "every member to see the 5 others in the space", func() (bool, string) {
		for _, n := range all {
			sps, err := n.Client.Spaces(context.Background())
			if err != nil || len(sps) != 1 || sps[0].Peers < len(all)-1 {
				return false, fmt.Sprintf("%s: %v %v", n.name, sps, err)
			}
		}
		return true, ""
	})
	meshed := time.Since(tJoin)
	lat := exchange(t, all, "routed", 10, 60*time.Second)

	// Capability discovery across the router, both ways.
	tCap := time.Now()
	if got := discover(t, s1[2], "translate"); !slices.Equal(got, []string{s2[2].ID}) {
		t.Errorf("s1h3 discovered translate at %v, want s2h3 %s", got, s2[2].ID)
	}
	if got := discover(t, s2[0], "summarize"); !slices.Equal(got, []string{s1[1].ID}) {
		t.Errorf("s2h1 discovered summarize at %v, want s1h2 %s", got, s1[1].ID)
	}
	capTime := time.Since(tCap) / 2
	t.Logf("summary routed: hosts=6 subnets=2 subnet2_daemons_up=%v discovery=%v (every host connected to every other, from the first subnet-2 daemon's start) space_meshed=%v (from join) deliveries=%d latency_p50=%v latency_p99=%v discover_capability=%v",
		up.Round(time.Millisecond), found.Round(time.Millisecond), meshed.Round(time.Millisecond),
		len(lat), pct(lat, 50), pct(lat, 99), capTime.Round(time.Millisecond))
}
