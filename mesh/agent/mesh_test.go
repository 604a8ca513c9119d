package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/util"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/protocol"
)

// meshNode is a mesh node with an agent service.
type meshNode struct {
	m    *mesh.Mesh
	svc  *agent.Service
	card *liveCard
}

func newMeshNode(tb testing.TB, cfg mesh.Config, boot *mesh.Mesh, card protocol.Card, advertise []string, opts ...agent.Option) *meshNode {
	tb.Helper()
	n := &meshNode{m: newMesh(tb, cfg, boot), card: newLiveCard(card)}
	n.svc = newService(tb, n.m.Host(), n.m.Discovery(), append(opts, n.card.option())...)
	if err := n.svc.Advertise(advertise); err != nil {
		tb.Fatal(err)
	}
	return n
}

// The required scenario: ten mesh nodes bootstrapped to node 0, three of
// them offering code_review, one advertising it without offering it, one
// offering a similar name, the rest other things or nothing. A node that
// knows only the bootstrap peer (a DHT client, connected to node 0 alone
// until Discover starts) finds exactly the three, through the DHT. When one
// of them stops advertising and drops the capability from its card, it is
// dropped from the results although its DHT record remains.
func TestDiscoverTenNodes(t *testing.T) {
	const capName = "code_review"
	start := time.Now()

	roles := []struct {
		caps, ads []string
	}{
		0: {caps: []string{"summarize"}, ads: []string{"summarize"}}, // bootstrap
		1: {caps: []string{"translate"}, ads: []string{"translate"}},
		2: {caps: []string{capName, "translate"}, ads: []string{capName, "translate"}},
		3: {},
		4: {caps: []string{"translate"}, ads: []string{capName}}, // a liar
		5: {caps: []string{capName}, ads: []string{capName}},
		6: {caps: []string{capName + "_lite"}, ads: []string{capName + "_lite"}},
		7: {caps: []string{capName}, ads: []string{capName}}, // retires below
		8: {caps: []string{"translate"}},
		// 9: the searcher
	}
	nodes := make([]*meshNode, 0, 10)
	for i, r := range roles {
		var boot *mesh.Mesh
		if i > 0 {
			boot = nodes[0].m
		}
		nodes = append(nodes, newMeshNode(t, mesh.Config{DHTMode: mesh.DHTServer}, boot, cardOf(fmt.Sprintf("node %d", i), r.caps...), r.ads))
	}
	g := &gate{only: nodes[0].m.ID()}
	searcher := newMeshNode(t, mesh.Config{DHTMode: mesh.DHTClient, Gater: g}, nodes[0].m, cardOf("searcher"), nil,
		agent.WithCardCacheTTL(200*time.Millisecond))
	nodes = append(nodes, searcher)
	name := make(map[peer.ID]string)
	for i, n := range nodes {
		name[n.m.ID()] = fmt.Sprintf("node %d", i)
	}
	names := func(ids []peer.ID) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = name[id]
		}
		return out
	}

	waitFor(t, 10*time.Second, "the searcher connected to node 0", func() bool {
		return slices.Equal(searcher.m.Host().Network().Peers(), []peer.ID{nodes[0].m.ID()})
	})
	if ps := searcher.m.Host().Network().Peers(); len(ps) != 1 {
		t.Fatalf("searcher connected to %v before Discover, want node 0 only", names(ps))
	}
	g.open.Store(true)
	opened := time.Now()

	// discoverUntil polls Discover from n until it returns want. A
	// provider outside allowed fails the test at once.
	discoverUntil := func(n *meshNode, timeout time.Duration, want, allowed []peer.ID) (calls int, last time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			began := time.Now()
			ps, err := n.svc.Discover(ctx, capName, 0)
			last = time.Since(began)
			cancel()
			calls++
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			got := providerIDs(ps)
			for _, p := range ps {
				if !slices.Contains(allowed, p.ID) {
					t.Fatalf("Discover found %s, which does not offer %s (result %v)", name[p.ID], capName, names(got))
				}
				if p.Card.ID != p.ID.String() || !p.Card.Has(capName) {
					t.Fatalf("provider %s came with card %+v", name[p.ID], p.Card)
				}
			}
			if !slices.IsSortedFunc(ps, func(a, b agent.Provider) int { return compareIDs(a.ID, b.ID) }) {
				t.Fatalf("providers not sorted: %v", names(got))
			}
			if slices.Equal(got, want) {
				return calls, last
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s Discover finds %v, want %v", timeout, names(got), names(want))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	want := sortedIDs(nodes[2].m.ID(), nodes[5].m.ID(), nodes[7].m.ID())
	calls, last := discoverUntil(searcher, 30*time.Second, want, want)
	t.Logf("searcher discovered %v %s after the gate opened (%s after the first node started), in %d Discover calls; the last took %s",
		names(want), time.Since(opened).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), calls, last.Round(time.Millisecond))

	ps, err := searcher.svc.Discover(t.Context(), capName, 2)
	if err != nil || !slices.Equal(providerIDs(ps), want[:2]) {
		t.Errorf("Discover with limit 2 = %v, %v; want %v", names(providerIDs(ps)), err, names(want[:2]))
	}
	// A provider finds itself among the others.
	began := time.Now()
	discoverUntil(nodes[2], 30*time.Second, want, want)
	t.Logf("node 2 found all three, itself included, in %s", time.Since(began).Round(time.Millisecond))

	// The liar's record is in the DHT: the card check kept it out.
	records := func() []peer.ID {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		found, err := util.FindPeers(ctx, searcher.m.Discovery(), protocol.CapabilityNamespace(capName))
		if err != nil {
			t.Fatal(err)
		}
		var ids []peer.ID
		for _, ai := range found {
			ids = append(ids, ai.ID)
		}
		return ids
	}
	if recs := records(); !slices.Contains(recs, nodes[4].m.ID()) {
		t.Errorf("the liar's record is not in the DHT (records: %v)", names(recs))
	}

	// Node 7 retires: it stops advertising and drops the capability.
	retired := nodes[7]
	if err := retired.svc.Advertise(nil); err != nil {
		t.Fatal(err)
	}
	retired.card.set(cardOf("node 7", "gardening"))
	began = time.Now()
	remaining := sortedIDs(nodes[2].m.ID(), nodes[5].m.ID())
	discoverUntil(searcher, 15*time.Second, remaining, want)
	t.Logf("retired node 7 dropped from the results after %s", time.Since(began).Round(time.Millisecond))
	if recs := records(); !slices.Contains(recs, retired.m.ID()) {
		t.Errorf("node 7's record left the DHT (records: %v); the card check was not what dropped it", names(recs))
	}
}

func compareIDs(a, b peer.ID) int { return strings.Compare(a.String(), b.String()) }
