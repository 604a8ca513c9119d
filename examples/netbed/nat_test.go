package netbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// internet is the NAT scenario's public side. libp2p's AutoNAT and hole
// punching act only on globally routable addresses, so it cannot be a
// private range; the namespaces have no link to the machine's network, so
// these addresses exist only inside the test bed.
var internet = netip.MustParsePrefix("11.99.0.0/24")

// TestNAT: hosts behind NATs with no inbound reachability. Four public weft
// nodes (one, the bootstrap, says it is public and relays for anyone; the
// others find out by AutoNAT). Behind a cone NAT each: a and b; behind a symmetric NAT:
// c. Each NATed host knows only the bootstrap address. They must learn they
// are private, reserve a relay slot, be reached through it, and where the
// NAT allows (cone to cone, cone to public), get a direct connection by
// hole punching; messages flow both ways.
func TestNAT(t *testing.T) {
	if err := netns.CheckNAT(); err != nil {
		t.Skip(err)
	}
	n := netns.NewNet(t)
	wan := n.MustLAN(t, internet)
	var pubHosts []*netns.Host
	for range 4 {
		pubHosts = append(pubHosts, wan.MustHost(t))
	}
	behind := func(subnet string, kind netns.NATKind) (*netns.Host, *netns.Router) {
		lan := n.MustLAN(t, netip.MustParsePrefix(subnet))
		r, err := n.AddNAT(lan, wan, kind)
		if err != nil {
			t.Fatal(err)
		}
		return lan.MustHost(t), r
	}
	ha, _ := behind("192.168.1.0/24", netns.Cone)
	hb, _ := behind("192.168.2.0/24", netns.Cone)
	hc, _ := behind("192.168.3.0/24", netns.Symmetric)

	// The relay serves strangers: the NATed nodes are none of its members.
	// At debug level, so that the sealed space's check below reads all
	// the relay says.
	relay := start(t, "relay", pubHosts[0], "--reachability", "public", "--relay", "open", "--log-level", "debug")
	boot := relay.addr(t, "tcp")
	pub := []*node{relay}
	for i, h := range pubHosts[1:] {
		pub = append(pub, start(t, fmt.Sprintf("pub%d", i+1), h, "--bootstrap", boot))
	}
	t0 := time.Now()
	a := start(t, "a", ha, "--bootstrap", boot)
	b := start(t, "b", hb, "--bootstrap", boot)
	c := start(t, "c", hc, "--bootstrap", boot)
	natted := []*node{a, b, c}

	// Each NATed node learns it is private and gets a relay address.
	var relayed time.Duration
	testbed.Poll(t, 90*time.Second, "NATed nodes to be private with a relay address", func() (bool, string) {
		for _, x := range natted {
			nd, err := x.Client.Node(context.Background())
			if err != nil {
				return false, err.Error()
			}
			if nd.Reachability != "private" || !slices.ContainsFunc(nd.Addrs, func(s string) bool { return strings.Contains(s, "/p2p-circuit") }) {
				return false, fmt.Sprintf("%s: %s %v", x.name, nd.Reachability, nd.Addrs)
			}
		}
		return true, ""
	})
	relayed = time.Since(t0)
	for _, x := range natted {
		nd, _ := x.Client.Node(context.Background())
		t.Logf("%s: %s %v", x.name, nd.Reachability, nd.Addrs)
	}

	// Direct messages between every pair that needs the NAT crossed
	// inwards: to a, b and c from each other and from a public node.
	type pair struct{ from, to *node }
	pairs := []pair{{a, b}, {b, a}, {a, c}, {c, b}, {pub[1], a}, {pub[2], c}}
	var dmLat []time.Duration
	for _, p := range pairs {
		d := dm(t, p.from, p.to, "hello from "+p.from.name)
		dmLat = append(dmLat, d)
		t.Logf("dm %s → %s: %v, %s", p.from.name, p.to.name, d.Round(time.Microsecond), describe(t, p.from, p.to))
	}
	// Hole punching: cone to cone and public to cone become direct.
	for _, p := range []pair{{a, b}, {pub[1], a}} {
		testbed.Poll(t, 60*time.Second, p.from.name+"–"+p.to.name+" direct", func() (bool, string) {
			ph := path(t, p.from, p.to)
			return ph == "direct", ph
		})
	}
	paths := map[string]string{}
	for _, p := range pairs {
		paths[p.from.name+"-"+p.to.name] = path(t, p.from, p.to)
		t.Logf("%s – %s: %s", p.from.name, p.to.name, describe(t, p.from, p.to))
	}
	// Messages both ways once more, on the paths now in use.
	for _, p := range pairs {
		dmLat = append(dmLat, dm(t, p.from, p.to, "again from "+p.from.name), dm(t, p.to, p.from, "back from "+p.to.name))
	}
	slices.Sort(dmLat)

	all := append(slices.Clone(pub), natted...)
	join(t, all, "nat")
	lat := exchange(t, all, "nat", 5, 60*time.Second)
	t.Logf("summary nat: public=4 natted=3 (a, b cone; c symmetric) private_with_relay_addr=%v paths=%v dm_deliveries=%d dm_p50=%v dm_p99=%v space_deliveries=%d space_p50=%v space_p99=%v",
		relayed.Round(time.Millisecond), paths, len(dmLat), pct(dmLat, 50), pct(dmLat, 99), len(lat), pct(lat, 50), pct(lat, 99))

	sealedThroughRelay(t, relay, a, c)
}

// sealedThroughRelay: a and c, whose only path is a circuit through the
// relay (c's NAT is symmetric, so hole punching fails), share a sealed
// space of which the relay is no member. Both read each other's messages in
// plaintext; the relay, stopped so that its store is flushed, holds no byte
// of their marker in its home or in its debug log.
func sealedThroughRelay(t *testing.T, relay, a, c *node) {
	t.Helper()
	ctx := context.Background()
	if p := settled(t, a, c); p != "relayed" {
		t.Fatalf("a – c is %s: the check needs the relay between them", p)
	}
	sp, err := a.Client.CreateSealed(ctx, "sealed-nat")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := a.Client.Invite(ctx, sp.ID, api.InviteRequest{Peer: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.JoinInvite(ctx, inv.Token); err != nil {
		t.Fatalf("c: join: %v", err)
	}
	marker := fmt.Sprintf("sealed-nat-%d", time.Now().UnixNano())
	for _, n := range []*node{a, c} {
		if _, err := n.Client.SendText(ctx, sp.ID, marker+" from "+n.name); err != nil {
			t.Fatalf("%s: send: %v", n.name, err)
		}
	}
	for _, n := range []*node{a, c} {
		testbed.Poll(t, 60*time.Second, n.name+" to read both in plaintext", func() (bool, string) {
			page, err := n.Client.Read(ctx, sp.ID, "", 100)
			if err != nil {
				return false, err.Error()
			}
			got := 0
			for _, m := range page.Messages {
				if strings.Contains(string(m.Content), marker+" from ") {
					got++
				}
			}
			return got == 2, fmt.Sprintf("%d of 2 among %d", got, len(page.Messages))
		})
	}
	if p := settled(t, a, c); p != "relayed" {
		t.Fatalf("a – c became %s: the relay may have carried nothing", p)
	}
	sps, err := relay.Client.Spaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sps {
		if s.ID == sp.ID {
			t.Fatalf("the relay is in the sealed space")
		}
	}
	if err := relay.Stop(); err != nil {
		t.Fatal(err)
	}
	log := relay.Log.String()
	if !strings.Contains(log, "level=DEBUG") {
		t.Fatalf("the relay's log is not at debug level: the scan proves less than it says")
	}
	if strings.Contains(log, marker) || testbed.DirHolds(t, relay.Home, []byte(marker)) {
		t.Errorf("the relay holds the marker in plaintext")
	}
	t.Logf("sealed through the relay: a and c read both messages; the relay's home and log hold no plaintext")
}

// dm sends a direct message and waits until it is in the recipient's
// inbox; it returns how long that took.
func dm(t *testing.T, from, to *node, text string) time.Duration {
	t.Helper()
	content, _ := json.Marshal(map[string]string{"text": text})
	t0 := time.Now()
	res, err := from.Client.DM(context.Background(), api.DMRequest{To: to.ID, Content: content})
	if err != nil {
		t.Fatalf("dm %s → %s: %v", from.name, to.name, err)
	}
	testbed.Poll(t, 60*time.Second, "dm "+from.name+" → "+to.name, func() (bool, string) {
		page, err := to.Client.Inbox(context.Background(), "", 1000)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range page.Messages {
			if m.ID == res.Message.ID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %s, %d in the inbox", res.Status, len(page.Messages))
	})
	return time.Since(t0)
}

// path says how from is connected to to: "direct", "relayed" or "none".
func path(t *testing.T, from, to *node) string { return kind(link(t, from, to)) }

// settled is path, waiting out a moment with no connection: a node closes
// an idle circuit to dial it again when it has hole punching tried again
// (mesh.Config.PunchAgain).
func settled(t *testing.T, from, to *node) string {
	t.Helper()
	var p string
	testbed.Poll(t, 15*time.Second, from.name+"–"+to.name+" connected", func() (bool, string) {
		p = path(t, from, to)
		return p != "none", p
	})
	return p
}

// describe says how from is connected to to, with the connections'
// direction and remote addresses.
func describe(t *testing.T, from, to *node) string {
	t.Helper()
	p, ok := link(t, from, to)
	if !ok {
		return "not connected"
	}
	return fmt.Sprintf("%s, %s, at %v", kind(p, ok), p.Direction, p.Addrs)
}

// link returns from's view of its connections to to, if any.
func link(t *testing.T, from, to *node) (api.Peer, bool) {
	t.Helper()
	ps, err := from.peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, ok := ps[to.ID]
	return p, ok
}

// kind names a connection's path.
func kind(p api.Peer, connected bool) string {
	switch {
	case !connected:
		return "none"
	case p.Relayed:
		return "relayed"
	}
	return "direct"
}
