package netbed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// node is a weft daemon running on a host of the test bed.
type node struct {
	*testbed.Daemon
	name string
	host *netns.Host
	args []string
}

// start runs `weft daemon` with args on host h, with a home of its own.
func start(t *testing.T, name string, h *netns.Host, args ...string) *node {
	t.Helper()
	n := &node{name: name, host: h, args: args}
	n.Daemon = testbed.StartVia(t, h.Argv, testbed.Home(t), args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's log, last lines:\n%s", name, tail(n.Log.String(), 60))
		}
	})
	return n
}

// restart starts the node's daemon again on its home, after a Kill or Stop.
func (n *node) restart(t *testing.T) {
	t.Helper()
	n.Daemon = testbed.StartVia(t, n.host.Argv, n.Home, n.args...)
}

// addr is the node's multiaddr for transport tr ("tcp" or "udp") on its
// LAN address.
func (n *node) addr(t *testing.T, tr string) string {
	t.Helper()
	for _, a := range n.Addrs {
		if strings.HasPrefix(a, "/ip4/"+n.host.Addr.String()+"/"+tr+"/") {
			return a
		}
	}
	t.Fatalf("%s has no %s address on %s: %v", n.name, tr, n.host.Addr, n.Addrs)
	return ""
}

// peers returns the node's connected peers by ID.
func (n *node) peers(ctx context.Context) (map[string]api.Peer, error) {
	ps, err := n.Client.Peers(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]api.Peer, len(ps))
	for _, p := range ps {
		out[p.ID] = p
	}
	return out, nil
}

// waitConnected waits until every node is connected to every other one and
// returns how long that took.
func waitConnected(t *testing.T, nodes []*node, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	testbed.Poll(t, timeout, "every node connected to every other", func() (bool, string) {
		for _, a := range nodes {
			ps, err := a.peers(context.Background())
			if err != nil {
				return false, err.Error()
			}
			for _, b := range nodes {
				if _, ok := ps[b.ID]; b != a && !ok {
					return false, a.name + " not connected to " + b.name
				}
			}
		}
		return true, ""
	})
	return time.Since(t0)
}

// join joins every node to space.
func join(t *testing.T, nodes []*node, space string) {
	t.Helper()
	for _, n := range nodes {
		if _, err := n.Client.Join(context.Background(), space); err != nil {
			t.Fatalf("%s: join %s: %v", n.name, space, err)
		}
	}
}

// exchange has every node send perNode messages to space, which all have
// joined, and waits until every node has every message. It returns the
// delivery latencies (send to arrival, at each other node), sorted.
func exchange(t *testing.T, nodes []*node, space string, perNode int, timeout time.Duration) []time.Duration {
	t.Helper()
	var (
		mu      sync.Mutex
		sentAt  = map[string]time.Time{}
		latency []time.Duration
		got     = make([]map[string]bool, len(nodes))
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i, n := range nodes {
		got[i] = map[string]bool{}
		wg.Go(func() {
			n.Client.Follow(ctx, space, "", func(m api.Message) error {
				at := time.Now()
				mu.Lock()
				defer mu.Unlock()
				got[i][m.ID] = true
				if t0, ok := sentAt[m.ID]; ok && m.From != n.ID {
					latency = append(latency, at.Sub(t0))
				}
				return nil
			})
		})
	}
	var ids []string
	send := func(round int, timed bool) {
		for _, n := range nodes {
			mu.Lock() // the send time is recorded before a follower can see the message
			m, err := n.Client.SendText(ctx, space, fmt.Sprintf("%s #%d", n.name, round))
			if err == nil {
				if timed {
					sentAt[m.ID] = time.Now()
				}
				ids = append(ids, m.ID)
			}
			mu.Unlock()
			if err != nil {
				t.Fatalf("%s: send: %v", n.name, err)
			}
		}
	}
	all := func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for i, n := range nodes {
			for _, id := range ids {
				if !got[i][id] {
					return false, fmt.Sprintf("%s has %d of %d", n.name, len(got[i]), len(ids))
				}
			}
		}
		return true, ""
	}
	// A first, untimed round: every follower is attached and the space's
	// mesh carries messages before the clock starts.
	send(0, false)
	testbed.Poll(t, timeout, "every node to have the first round", all)
	for k := range perNode {
		send(k+1, true)
	}
	testbed.Poll(t, timeout, "every node to have every message", all)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latency)
	return slices.Clone(latency)
}

// pct is the p-th percentile of sorted durations.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/100)].Round(10 * time.Microsecond)
}

// discover asks n for the providers of capability and returns their IDs.
func discover(t *testing.T, n *node, capability string) []string {
	t.Helper()
	ps, err := n.Client.Discover(context.Background(), capability, 10, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: discover %s: %v", n.name, capability, err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.Card.ID)
	}
	return ids
}
