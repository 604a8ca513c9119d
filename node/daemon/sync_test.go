package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
)

// sendMany sends n messages from node into space from workers goroutines.
func sendMany(t testing.TB, nd *Daemon, space protocol.ID, n, workers int, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				p := node.Post{Content: fmt.Appendf(nil, `{"text":"%s %d"}`, tag, i)}
				if _, err := nd.node.Send(context.Background(), space, p); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// spaceIDs returns the IDs a node holds in space, sorted (for set equality).
func spaceIDs(t testing.TB, nd *Daemon, space protocol.ID) []protocol.ID {
	t.Helper()
	keys, err := nd.node.Store().Keys(space, protocol.MinSyncKey, protocol.MaxSyncKey, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]protocol.ID, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	slices.SortFunc(ids, func(a, b protocol.ID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

func count(t testing.TB, nd *Daemon, space protocol.ID) int {
	t.Helper()
	n, err := nd.node.Store().Count(space)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func bootstrapTo(n *Daemon) func(*Config) {
	return func(c *Config) { c.Bootstrap = []string{n.Addrs()[0].String()} }
}

// TestLateJoinGetsHistory: A and B exchange 10,000 messages; C joins
// afterwards knowing only A's address and ends with exactly the same set,
// which `read` on C lists in full.
func TestLateJoinGetsHistory(t *testing.T) {
	const total = 10_000
	// Rates off: this is about catching up, and a node's own posts are
	// paced to 40/s in an open space by default (5,000 each took minutes).
	noRates := func(c *Config) { c.Rates = mesh.RateLimits{Off: true} }
	a, _ := startNode(t, noRates)
	b, _ := startNode(t, func(c *Config) { noRates(c); bootstrapTo(a)(c) })
	sp, _, err := a.node.Join("history", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.node.Join("history", nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { sendMany(t, a, sp.ID, total/2, 8, "from a") })
	wg.Go(func() { sendMany(t, b, sp.ID, total/2, 8, "from b") })
	wg.Wait()
	eventually(t, 3*time.Minute, "A and B to hold all 10,000 messages", func() bool {
		return count(t, a, sp.ID) == total && count(t, b, sp.ID) == total
	})

	start := time.Now()
	c, cc := startNode(t, bootstrapTo(a))
	if _, err := cc.Join(context.Background(), "history"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "C to catch up on 10,000 messages", func() bool {
		return count(t, c, sp.ID) == total
	})
	took := time.Since(start)
	if !slices.Equal(spaceIDs(t, c, sp.ID), spaceIDs(t, a, sp.ID)) {
		t.Fatal("C's set differs from A's")
	}
	read := readAll(t, cc, "history")
	if len(read) != total {
		t.Fatalf("read on C lists %d messages, want %d", len(read), total)
	}
	st := c.node.Mesh().SyncStats()
	t.Logf("C caught up on %d messages in %v (daemon start and join included): sync received %d messages, %d bytes in, %d bytes out, %d sessions",
		total, took.Round(time.Millisecond), st.Received, st.BytesReceived, st.BytesSent, st.Sessions)
}

// partition is a connection gater that, while split, refuses connections
// between peers on different sides.
type partition struct {
	mu    sync.Mutex
	side  map[peer.ID]int
	split bool
}

func (g *partition) blocked(p peer.ID, self peer.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	sp, ok1 := g.side[p]
	ss, ok2 := g.side[self]
	return g.split && ok1 && ok2 && sp != ss
}

// gaterFor returns the gater of the node that will have ID self (set
// once known): the gater interface does not name the local peer.
type nodeGater struct {
	g    *partition
	self peer.ID
	mu   sync.Mutex
}

func (n *nodeGater) me() peer.ID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.self
}

func (n *nodeGater) InterceptPeerDial(p peer.ID) bool { return !n.g.blocked(p, n.me()) }
func (n *nodeGater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool {
	return !n.g.blocked(p, n.me())
}
func (n *nodeGater) InterceptAccept(network.ConnMultiaddrs) bool { return true }
func (n *nodeGater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !n.g.blocked(p, n.me())
}
func (n *nodeGater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}

// TestPartitionHeal: six nodes in one space split 3|3; each side sends
// 1,000 messages; after the heal all six hold the identical set and the
// identical heads.
func TestPartitionHeal(t *testing.T) {
	const perSide = 1000
	g := &partition{side: make(map[peer.ID]int)}
	var nodes []*Daemon
	for i := range 6 {
		ng := &nodeGater{g: g}
		mutate := func(c *Config) {
			c.Gater = ng
			if i > 0 {
				c.Bootstrap = []string{nodes[0].Addrs()[0].String()}
			}
		}
		n, _ := startNode(t, mutate)
		ng.mu.Lock()
		ng.self = n.ID()
		ng.mu.Unlock()
		g.mu.Lock()
		g.side[n.ID()] = i / 3
		g.mu.Unlock()
		nodes = append(nodes, n)
	}
	var space protocol.ID
	for _, n := range nodes {
		sp, _, err := n.node.Join("partition", nil)
		if err != nil {
			t.Fatal(err)
		}
		space = sp.ID
	}
	sendMany(t, nodes[0], space, 10, 1, "before")
	eventually(t, time.Minute, "everyone to hold the first 10", func() bool {
		for _, n := range nodes {
			if count(t, n, space) != 10 {
				return false
			}
		}
		return true
	})

	// Split: refuse new cross connections and cut the open ones.
	g.mu.Lock()
	g.split = true
	g.mu.Unlock()
	for i, n := range nodes {
		for j, o := range nodes {
			if i/3 != j/3 {
				_ = n.node.Mesh().Host().Network().ClosePeer(o.ID())
			}
		}
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		share := perSide / 3
		if i%3 == 0 {
			share += perSide % 3
		}
		wg.Go(func() { sendMany(t, n, space, share, 4, fmt.Sprintf("side %d node %d", i/3, i)) })
	}
	wg.Wait()
	eventually(t, 2*time.Minute, "each side to converge on its own", func() bool {
		for _, n := range nodes {
			if count(t, n, space) != 10+perSide {
				return false
			}
		}
		return true
	})
	for i, n := range nodes {
		for j, o := range nodes {
			if i/3 != j/3 && n.node.Mesh().Host().Network().Connectedness(o.ID()) == network.Connected {
				t.Fatalf("nodes %d and %d still connected across the partition", i, j)
			}
		}
	}

	// Heal: allow connections again and dial one bridge.
	g.mu.Lock()
	g.split = false
	g.mu.Unlock()
	healed := time.Now()
	if _, err := nodes[3].node.Mesh().Connect(context.Background(), nodes[0].Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	want := 10 + 2*perSide
	eventually(t, 2*time.Minute, "all six to converge after the heal", func() bool {
		for _, n := range nodes {
			if count(t, n, space) != want {
				return false
			}
		}
		return true
	})
	took := time.Since(healed)
	ref := spaceIDs(t, nodes[0], space)
	refHeads, _ := nodes[0].node.Store().Heads(space)
	for i, n := range nodes {
		if !slices.Equal(spaceIDs(t, n, space), ref) {
			t.Errorf("node %d holds a different set", i)
		}
		heads, err := n.node.Store().Heads(space)
		if err != nil || !slices.Equal(heads, refHeads) {
			t.Errorf("node %d heads %v, node 0 heads %v (%v)", i, heads, refHeads, err)
		}
	}
	var st struct {
		sessions, msgs int
		bytes          int64
	}
	for _, n := range nodes {
		s := n.node.Mesh().SyncStats()
		st.sessions += s.Sessions
		st.msgs += s.Received
		st.bytes += s.BytesSent
	}
	t.Logf("converged %v after the heal: %d messages on every node, %d heads; sync totals since start: %d sessions, %d messages fetched, %d bytes sent",
		took.Round(time.Millisecond), want, len(refHeads), st.sessions, st.msgs, st.bytes)
}

// TestGapRepair: a message gossip never delivered (here stored on A
// without publishing) is fetched as soon as a later message naming it in
// prev arrives, without waiting for a periodic sync (turned off here).
func TestGapRepair(t *testing.T) {
	noTimer := func(c *Config) { c.SyncInterval = -1 }
	a, _ := startNode(t, noTimer)
	b, _ := startNode(t, func(c *Config) { noTimer(c); bootstrapTo(a)(c) })
	sp, _, err := a.node.Join("gaps", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.node.Join("gaps", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a and b to be topic peers", func() bool {
		return len(a.node.Mesh().SpacePeers(sp.ID)) == 1 && len(b.node.Mesh().SpacePeers(sp.ID)) == 1
	})
	// On a join both members start a session: the one with the lower peer
	// ID at once, the other a little later.
	eventually(t, 30*time.Second, "the join-time syncs to finish", func() bool {
		return a.node.Mesh().SyncStats().Initiated > 0 && b.node.Mesh().SyncStats().Initiated > 0 && a.node.Mesh().SyncIdle() && b.node.Mesh().SyncIdle()
	})

	// A message a stored but never published: gossip lost it.
	heads, err := a.node.Store().Heads(sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := protocol.Sign(keyOf(t, a), protocol.Draft{Space: sp.ID, CreatedAt: time.Now(), Prev: heads, Type: "text",
		Content: []byte(`{"text":"lost in gossip"}`)}, a.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.node.Accept(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	next, err := a.node.Send(context.Background(), sp.ID, node.Post{Content: []byte(`{"text":"names it in prev"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(next.Prev, lost.ID) {
		t.Fatalf("next message's prev %v does not name the lost one", next.Prev)
	}
	eventually(t, 30*time.Second, "b to fetch the lost message", func() bool {
		has, err := b.node.Store().Has(lost.ID)
		return err == nil && has
	})
}
