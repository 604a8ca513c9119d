package netbed

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

const (
	churnSpace    = "churn"
	churnDuration = 60 * time.Second       // the figure
	churnSendEach = 500 * time.Millisecond // every live daemon sends this often
	// churnSync is every daemon's --sync-interval. The default (30 s)
	// would leave a gap that gossip lost to wait up to half a minute for
	// the next background sync; with 5 s anti-entropy runs many times
	// during the churn, not only on (re)joins.
	churnSync = 5 * time.Second
	// churnPort is the fixed TCP and QUIC port of the two bootstrap hosts,
	// so that they come back at the address the --bootstrap flags of
	// subnet 2 name, as a bootstrap server does. The other daemons listen
	// on random ports, weft's default, and come back elsewhere.
	churnPort = 4001
	// churnMaxDown is the most hosts disturbed (daemon killed or cable
	// pulled) at once: a mesh with churn, not a dead one.
	churnMaxDown = 2
)

// TestChurn: 8 hosts on two subnets joined by a router; for 60 s, while
// every live daemon sends a message every 500 ms, daemons are killed
// (SIGKILL) and restarted on their homes and cables are pulled and plugged
// back, at random (seeded: WEFT_CHURN_SEED replays a schedule). After the
// last heal every host must have every message a daemon accepted, and all
// the same messages; the summary says how long that took.
func TestChurn(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEFT_CHURN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WEFT_CHURN_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (WEFT_CHURN_SEED=%d replays this schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	n := netns.NewNet(t)
	lan1 := n.MustLAN(t, netip.MustParsePrefix("10.99.1.0/24"))
	lan2 := n.MustLAN(t, netip.MustParsePrefix("10.99.2.0/24"))
	if _, err := n.AddRouter(lan1, lan2); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		lan1.MustHost(t)
		lan2.MustHost(t)
	}
	common := []string{"--sync-interval", churnSync.String()}
	fixed := append([]string{
		"--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", churnPort),
		"--listen", fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", churnPort),
	}, common...)
	// Subnet 1 finds itself by mDNS; its first two hosts are the
	// bootstrap hosts. Subnet 2 knows both (so one being down does not
	// strand a restarting daemon) and finds the rest through the DHT.
	var nodes []*node
	for i, h := range lan1.Hosts {
		args := common
		if i < 2 {
			args = fixed
		}
		nodes = append(nodes, start(t, fmt.Sprintf("s1h%d", i+1), h, args...))
	}
	waitConnected(t, nodes, 60*time.Second)
	s2args := append(slices.Clone(common), "--bootstrap", nodes[0].addr(t, "tcp"), "--bootstrap", nodes[1].addr(t, "tcp"))
	for i, h := range lan2.Hosts {
		nodes = append(nodes, start(t, fmt.Sprintf("s2h%d", i+1), h, s2args...))
	}
	waitConnected(t, nodes, 90*time.Second)
	join(t, nodes, churnSpace)
	testbed.Poll(t, 60*time.Second, "every member to see the 7 others in the space", func() (bool, string) {
		for _, nd := range nodes {
			sps, err := nd.Client.Spaces(context.Background())
			if err != nil || len(sps) != 1 || sps[0].Peers < len(nodes)-1 {
				return false, fmt.Sprintf("%s: %v %v", nd.name, sps, err)
			}
		}
		return true, ""
	})

	// Every daemon incarnation's log, to show when the test fails.
	logs := make([][]*testbed.Buffer, len(nodes))
	for i, nd := range nodes {
		logs[i] = []*testbed.Buffer{nd.Log}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, nd := range nodes {
			for k, l := range logs[i] {
				t.Logf("%s daemon log (run %d), last lines:\n%s", nd.name, k+1, tail(l.String(), 60))
			}
		}
	})

	var (
		mu       sync.Mutex
		down     = make([]bool, len(nodes)) // killed and not yet answering again
		kills    = make([]int, len(nodes))  // per node, to tell a send lost to a kill
		accepted = map[string]int{}         // message ID → sending node
		skipped  int                        // sends not tried: daemon down
		lost     int                        // sends that failed because the daemon was killed meanwhile
		failures []string                   // sends a live daemon refused
	)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		tick := time.NewTicker(churnSendEach)
		defer tick.Stop()
		for round := 1; ; round++ {
			for i, nd := range nodes {
				mu.Lock()
				if down[i] {
					skipped++
					mu.Unlock()
					continue
				}
				c, epoch := nd.Client, kills[i] // restart replaces nd.Daemon only while down
				mu.Unlock()
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				m, err := c.SendText(sctx, churnSpace, fmt.Sprintf("%s #%d", nd.name, round))
				scancel()
				mu.Lock()
				switch {
				case err == nil:
					accepted[m.ID] = i
				case ctx.Err() != nil: // stopping
				case down[i] || kills[i] != epoch:
					lost++
				default:
					failures = append(failures, fmt.Sprintf("%s #%d: %v", nd.name, round, err))
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})

	// The chaos: every 2–5 s, kill a random daemon or pull a random
	// host's cable, and undo it 2–6 s later; at most churnMaxDown hosts
	// disturbed at once. It runs here, on the test's goroutine, because
	// restarting a daemon may fail the test.
	type undo struct {
		at   time.Time
		i    int
		kill bool // else a cut
	}
	var (
		pending                         []undo
		nKill, nRestart, nCut, nRestore int
		nHealRestart                    int
		nBusy                           int // actions skipped: churnMaxDown hosts already disturbed
		rejoinFailures                  []string
	)
	t0 := time.Now()
	elapsed := func() string { return fmt.Sprintf("%5.1fs", time.Since(t0).Seconds()) }
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	restart := func(i int) {
		nd := nodes[i]
		nd.restart(t)
		sps, err := nd.Client.Spaces(context.Background())
		if err != nil || !slices.ContainsFunc(sps, func(s api.Space) bool { return s.Name == churnSpace }) {
			rejoinFailures = append(rejoinFailures, nd.name)
			t.Errorf("%s: restarted daemon is not in space %s (%v, %v); joining again", nd.name, churnSpace, sps, err)
			if _, err := nd.Client.Join(context.Background(), churnSpace); err != nil {
				t.Errorf("%s: join %s: %v", nd.name, churnSpace, err)
			}
		}
		mu.Lock()
		logs[i] = append(logs[i], nd.Log)
		down[i] = false
		mu.Unlock()
		nRestart++
	}
	setLink := func(i int, up bool) {
		if err := nodes[i].host.SetLink(up); err != nil {
			t.Errorf("%s: set link up=%v: %v", nodes[i].name, up, err)
		}
	}
	deadline := t0.Add(churnDuration)
	next := t0.Add(between(2*time.Second, 5*time.Second))
	for {
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		// Undo what is due.
		pending = slices.DeleteFunc(pending, func(u undo) bool {
			if now.Before(u.at) {
				return false
			}
			if u.kill {
				t.Logf("%s restart %s", elapsed(), nodes[u.i].name)
				restart(u.i)
			} else {
				t.Logf("%s plug %s back in", elapsed(), nodes[u.i].name)
				setLink(u.i, true)
				nRestore++
			}
			return true
		})
		if now = time.Now(); !now.Before(next) {
			next = now.Add(between(2*time.Second, 5*time.Second))
			var calm []int
			for i := range nodes {
				if !slices.ContainsFunc(pending, func(u undo) bool { return u.i == i }) {
					calm = append(calm, i)
				}
			}
			if len(nodes)-len(calm) >= churnMaxDown {
				nBusy++
			} else {
				i := calm[rng.IntN(len(calm))]
				u := undo{at: now.Add(between(2*time.Second, 6*time.Second)), i: i, kill: rng.IntN(2) == 0}
				if u.kill {
					t.Logf("%s kill %s", elapsed(), nodes[i].name)
					mu.Lock()
					down[i] = true
					kills[i]++
					mu.Unlock()
					nodes[i].Kill()
					nKill++
				} else {
					t.Logf("%s pull %s's cable", elapsed(), nodes[i].name)
					setLink(i, false)
					nCut++
				}
				pending = append(pending, u)
			}
		}
		wait := min(time.Until(next), time.Until(deadline))
		for _, u := range pending {
			wait = min(wait, time.Until(u.at))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			t.Fatal("test context ended during the churn")
		case <-timer.C:
		}
	}

	// The last heal: stop sending, plug every cable back in, restart every
	// killed daemon.
	cancel()
	wg.Wait()
	tHeal := time.Now()
	for _, u := range pending {
		if !u.kill {
			t.Logf("%s heal: plug %s back in", elapsed(), nodes[u.i].name)
			setLink(u.i, true)
			nRestore++
		}
	}
	for _, u := range pending {
		if u.kill {
			t.Logf("%s heal: restart %s", elapsed(), nodes[u.i].name)
			restart(u.i)
			nHealRestart++
		}
	}
	healed := time.Now()
	heal := healed.Sub(tHeal)

	mu.Lock()
	want := make([]string, 0, len(accepted))
	for id := range accepted {
		want = append(want, id)
	}
	sent, nSkipped, nLost, nFailures := len(accepted), skipped, lost, failures
	mu.Unlock()
	for _, f := range nFailures {
		t.Errorf("a live daemon refused a send: %s", f)
	}

	var (
		convergence = "none"
		stored      = make([]int, len(nodes))
	)
	defer func() {
		t.Logf("summary churn: hosts=8 subnets=2 ports=fixed:s1h1,s1h2,random:others duration=%v sync_interval=%v seed=%d sent=%d (accepted by a daemon) sends_skipped_daemon_down=%d sends_lost_to_kill=%d send_failures=%d kills=%d restarts=%d (%d at the heal) cuts=%d restores=%d actions_skipped_busy=%d rejoin_failures=%v heal=%v convergence=%v (every host has every accepted message, from the last heal) stored=%v",
			churnDuration, churnSync, seed, sent, nSkipped, nLost, len(nFailures), nKill, nRestart, nHealRestart, nCut, nRestore, nBusy, rejoinFailures,
			heal.Round(time.Millisecond), convergence, stored)
	}()

	// Wait until every host has every accepted message (and, since a sent
	// message that a killed daemon did not acknowledge spreads as well,
	// the same messages as every other host). Counts first: reading every
	// ID from 8 daemons is done only when the counts say it might pass.
	lastCounts, lastNote := "", ""
	testbed.Poll(t, 120*time.Second, "every host to have every accepted message", func() (bool, string) {
		counts := make([]int, len(nodes))
		for i, nd := range nodes {
			sps, err := nd.Client.Spaces(context.Background())
			if err != nil || len(sps) != 1 {
				return false, fmt.Sprintf("%s: spaces %v %v", nd.name, sps, err)
			}
			counts[i] = sps[0].Messages
			if counts[i] < sent {
				return false, fmt.Sprintf("%s has %d messages, %d accepted (stored so far: %v)", nd.name, counts[i], sent, counts[:i+1])
			}
		}
		if s := fmt.Sprint(counts); s == lastCounts {
			return false, lastNote // no news since the last full read
		}
		lastCounts = fmt.Sprint(counts)
		ok, note := sameMessages(nodes, want, stored)
		lastNote = note
		return ok, note
	})
	convergence = time.Since(healed).Round(time.Millisecond).String()
}

// sameMessages reports whether every node has every message in want and
// all have the same messages; it sets stored[i] to node i's count.
func sameMessages(nodes []*node, want []string, stored []int) (bool, string) {
	var first map[string]bool
	for i, nd := range nodes {
		have, err := messageIDs(nd.Client, churnSpace)
		if err != nil {
			return false, fmt.Sprintf("%s: read: %v", nd.name, err)
		}
		stored[i] = len(have)
		var lacks []string
		for _, id := range want {
			if !have[id] {
				lacks = append(lacks, id)
			}
		}
		if len(lacks) > 0 {
			return false, fmt.Sprintf("%s lacks %d of %d accepted messages, e.g. %s", nd.name, len(lacks), len(want), lacks[0])
		}
		if i == 0 {
			first = have
		} else if !maps.Equal(have, first) {
			return false, fmt.Sprintf("%s and %s have different messages (%d, %d)", nd.name, nodes[0].name, len(have), len(first))
		}
	}
	return true, ""
}

// messageIDs reads every message of the space from c and returns their IDs.
func messageIDs(c *client.Client, space string) (map[string]bool, error) {
	ids := map[string]bool{}
	after := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p, err := c.Read(ctx, space, after, 1000)
		cancel()
		if err != nil {
			return nil, err
		}
		if len(p.Messages) == 0 {
			return ids, nil
		}
		for _, m := range p.Messages {
			ids[m.ID] = true
		}
		after = p.Next
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
