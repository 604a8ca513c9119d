package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// flooder is a stranger: a plain libp2p host with gossipsub (no weft code
// but the message format), subscribed to a space's topic and connected
// directly to every member, publishing validly signed messages.
type flooder struct {
	key     crypto.PrivKey
	id      peer.ID
	h       host.Host
	topic   *pubsub.Topic
	space   protocol.ID
	members []peer.AddrInfo
	sent    atomic.Int64
	bytes   atomic.Int64
	redials atomic.Int64
	busy    time.Duration // time spent connected to a member, publishing
}

func newFlooder(t *testing.T, space protocol.ID, ds []*testbed.Daemon) *flooder {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ps, err := pubsub.NewGossipSub(context.Background(), h,
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithMaxMessageSize(4<<20),
		pubsub.WithFloodPublish(true), // to every member at once
		pubsub.WithPeerOutboundQueueSize(4096),
		pubsub.WithMessageIdFn(func(m *pb.Message) string { s := sha256.Sum256(m.Data); return string(s[:]) }))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(protocol.Topic(space))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	f := &flooder{key: key, id: h.ID(), h: h, topic: topic, space: space}
	for _, d := range ds {
		ai, err := peer.AddrInfoFromP2pAddr(ma.StringCast(d.Addrs[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Connect(t.Context(), *ai); err != nil {
			t.Fatal(err)
		}
		f.members = append(f.members, *ai)
	}
	testbed.Poll(t, 30*time.Second, "the flooder to see every member in the topic", func() (bool, string) {
		got := topic.ListPeers()
		return len(got) >= len(ds), fmt.Sprintf("%d of %d", len(got), len(ds))
	})
	return f
}

// flood publishes messages of size bytes as fast as it can until ctx ends.
// Disconnected, it dials the members again at once, as a persistent
// attacker would, and signs nothing while it has no one to send to (this
// machine's CPU is the members' too).
func (f *flooder) flood(ctx context.Context, t *testing.T, size int) {
	var redial sync.WaitGroup
	defer redial.Wait()
	redial.Go(func() {
		for ctx.Err() == nil {
			for _, ai := range f.members {
				if f.h.Network().Connectedness(ai.ID) != network.Connected {
					cctx, cancel := context.WithTimeout(ctx, time.Second)
					if f.h.Connect(cctx, ai) == nil {
						f.redials.Add(1)
					}
					cancel()
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	pad := strings.Repeat("f", size)
	last := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		now := time.Now()
		if len(f.topic.ListPeers()) == 0 {
			time.Sleep(10 * time.Millisecond)
			last = time.Now()
			continue
		}
		f.busy += now.Sub(last)
		last = now
		content := fmt.Appendf(nil, `{"flood":%d,"pad":%q}`, i, pad)
		m, err := protocol.Sign(f.key, protocol.Draft{Space: f.space, CreatedAt: time.Now(), Type: "text", Content: content}, protocol.DefaultLimits())
		if err != nil {
			t.Error(err)
			return
		}
		if err := f.topic.Publish(ctx, m.Encode()); err != nil {
			return
		}
		f.sent.Add(1)
		f.bytes.Add(int64(len(m.Encode())))
	}
}

// probe is what a member's message carries, to time it.
type probe struct {
	Member int   `json:"member"`
	Seq    int   `json:"seq"`
	Sent   int64 `json:"sent"` // Unix ns
}

// floodLatencies collects the delivery times of members' messages.
type floodLatencies struct {
	mu   sync.Mutex
	got  map[[3]int]time.Duration // member, seq, receiver → latency
	sent map[[2]int]string        // member, seq → the phase it was sent in
}

// phase names of the measured parts of the test.
const (
	phaseQuiet = "no flood"
	phaseFlood = "1 KiB flood"
	phaseBig   = "64 KiB flood"
)

// summary returns the count, the missing, p50, p99 and max of the
// deliveries of the messages sent in phase (all phases if "").
func (l *floodLatencies) summary(phase string, receivers int) (n, missing int, p50, p99, worst time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all []time.Duration
	for k, ph := range l.sent {
		if phase != "" && ph != phase {
			continue
		}
		for r := range receivers {
			if r == k[0] {
				continue
			}
			d, ok := l.got[[3]int{k[0], k[1], r}]
			if !ok {
				missing++
				d = time.Duration(math.MaxInt64) // never: as late as can be
			}
			all = append(all, d)
		}
	}
	if len(all) == 0 {
		return 0, 0, 0, 0, 0
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	return len(all), missing, pct(0.50), pct(0.99), all[len(all)-1]
}

// TestFloodResistance: three real daemons share a space; their members talk
// at 10 messages a second each while a stranger, with a fresh peer ID,
// connected to all three, floods the space as fast as it can with valid
// signed 1 KiB messages for 20 s, then a second stranger with 64 KiB ones.
// The members' messages must still arrive promptly, each daemon must
// throttle then graylist each flooder, and what they store and the memory
// they use must stay bounded. The figures are logged.
//
// The members' authors are made known (members with rates of their own)
// by a short probation and a warm-up in which they talk; the default
// probation is 10 minutes.
func TestFloodResistance(t *testing.T) {
	const (
		nMembers   = 3
		memberRate = 10 // messages/s per member
		floodFor   = 20 * time.Second
		bigFor     = 10 * time.Second
		senderCap  = 4 << 20
		spaceCap   = 64 << 20
	)
	ds := testbed.Mesh(t, nMembers, "--stranger-probation", "3s",
		"--sender-quota", "4MiB", "--space-quota", "64MiB", "--log-level", "info")
	ctx := context.Background()
	var space protocol.ID
	for _, d := range ds {
		sp, err := d.Client.Join(ctx, "flooded")
		if err != nil {
			t.Fatal(err)
		}
		space, _ = protocol.ParseID(sp.ID)
	}
	for i, d := range ds {
		testbed.Poll(t, 30*time.Second, fmt.Sprintf("daemon %d to see the other members in the space", i), func() (bool, string) {
			sps, err := d.Client.Spaces(ctx)
			if err != nil || len(sps) != 1 {
				return false, fmt.Sprint(err)
			}
			return sps[0].Peers >= nMembers-1, fmt.Sprintf("%d peers", sps[0].Peers)
		})
	}

	// Every daemon follows the space; members' messages are timed.
	lat := &floodLatencies{got: map[[3]int]time.Duration{}, sent: map[[2]int]string{}}
	var floodSeen [nMembers]atomic.Int64
	fctx, stopFollow := context.WithCancel(ctx)
	var followers sync.WaitGroup
	for r, d := range ds {
		followers.Go(func() {
			_ = d.Client.Follow(fctx, "flooded", api.EndCursor, func(m api.Message) error {
				now := time.Now()
				var p probe
				// A probe is a few dozen bytes: the flood's contents (up to
				// 64 KiB) are not parsed, so that this process's own work
				// under -race does not count in the members' latency.
				if len(m.Content) > 256 || json.Unmarshal(m.Content, &p) != nil || p.Sent == 0 {
					floodSeen[r].Add(1)
					return nil
				}
				lat.mu.Lock()
				lat.got[[3]int{p.Member, p.Seq, r}] = now.Sub(time.Unix(0, p.Sent))
				lat.mu.Unlock()
				return nil
			})
		})
	}

	// Members talk throughout: a warm-up (so that they are known to each
	// other after the probation), the floods, and a little after.
	var talking sync.WaitGroup
	tctx, stopTalking := context.WithCancel(ctx)
	var phase atomic.Value // the phase being measured, "" for none
	phase.Store("")
	for i, d := range ds {
		talking.Go(func() {
			tick := time.NewTicker(time.Second / memberRate)
			defer tick.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-tctx.Done():
					return
				case <-tick.C:
				}
				p := probe{Member: i, Seq: seq, Sent: time.Now().UnixNano()}
				content, _ := json.Marshal(p)
				if _, err := d.Client.Send(tctx, "flooded", api.SendRequest{Content: content, Type: "text"}); err != nil {
					if tctx.Err() == nil {
						t.Errorf("member %d send %d: %v", i, seq, err)
					}
					continue
				}
				if ph := phase.Load().(string); ph != "" {
					lat.mu.Lock()
					lat.sent[[2]int{i, seq}] = ph
					lat.mu.Unlock()
				}
			}
		})
	}
	time.Sleep(5 * time.Second) // warm-up: past the probation
	// The same, measured: the figures to compare the floods with, on this
	// machine at this moment.
	phase.Store(phaseQuiet)
	time.Sleep(10 * time.Second)

	// The 1 KiB flood.
	phase.Store("")
	f1 := newFlooder(t, space, ds)
	phase.Store(phaseFlood)
	start := time.Now()
	floodCtx, stopFlood := context.WithTimeout(ctx, floodFor)
	var flooding sync.WaitGroup
	flooding.Go(func() { f1.flood(floodCtx, t, 1000) })
	flooding.Wait()
	stopFlood()
	floodTook := time.Since(start)

	// The 64 KiB flood, from another stranger.
	phase.Store("")
	f2 := newFlooder(t, space, ds)
	phase.Store(phaseBig)
	bigStart := time.Now()
	bigCtx, stopBig := context.WithTimeout(ctx, bigFor)
	flooding.Go(func() { f2.flood(bigCtx, t, 64<<10) })
	flooding.Wait()
	stopBig()
	bigTook := time.Since(bigStart)

	phase.Store("")
	time.Sleep(2 * time.Second) // the last members' messages arrive
	stopTalking()
	talking.Wait()
	time.Sleep(time.Second)
	stopFollow()
	followers.Wait()

	t.Logf("machine: %d CPUs, load %s", numCPU(), loadAvg())
	for _, ph := range []string{phaseQuiet, phaseFlood, phaseBig} {
		n, missing, p50, p99, worst := lat.summary(ph, len(ds))
		t.Logf("members, %s: %d deliveries (3 members × 10 msg/s, each to 2 others), %d missing; latency p50 %v, p99 %v, max %v",
			ph, n, missing, fmtDur(p50), fmtDur(p99), fmtDur(worst))
	}
	if os.Getenv("WEFT_FLOOD_LOG") != "" {
		lat.mu.Lock()
		var worst []string
		for k, d := range lat.got {
			if lat.sent[[2]int{k[0], k[1]}] != "" && d > 100*time.Millisecond {
				worst = append(worst, fmt.Sprintf("%v member %d seq %d to %d: %v", lat.sent[[2]int{k[0], k[1]}], k[0], k[1], k[2], d))
			}
		}
		lat.mu.Unlock()
		slices.Sort(worst)
		_ = os.WriteFile(os.Getenv("WEFT_FLOOD_LOG")+"/slow.txt", []byte(strings.Join(worst, "\n")), 0o644)
	}
	_, _, _, p99, _ := lat.summary(phaseFlood, len(ds))
	_, _, _, p99Big, _ := lat.summary(phaseBig, len(ds))
	p99 = max(p99, p99Big)
	for i, f := range []*flooder{f1, f2} {
		took := []time.Duration{floodTook, bigTook}[i]
		t.Logf("flood %d: %d messages (%.1f MB) sent in %v by %s: %.0f msg/s while connected to a member (%v of it), %d reconnections",
			i+1, f.sent.Load(), float64(f.bytes.Load())/1e6, took.Round(time.Millisecond), f.id, float64(f.sent.Load())/f.busy.Seconds(), f.busy.Round(time.Millisecond), f.redials.Load())
	}

	graylistRE := regexp.MustCompile(`time=(\S+) level=WARN msg="gossip: peer flooding: graylisted"[^\n]*? peer=(\S+)`)
	throttleRE := regexp.MustCompile(`time=(\S+) level=WARN msg="gossip: peer over its publish rate[^"]*"[^\n]*? peer=(\S+)`)
	firstLog := func(re *regexp.Regexp, log string, p peer.ID) (time.Time, bool) {
		for _, m := range re.FindAllStringSubmatch(log, -1) {
			if m[2] == p.String() {
				at, err := time.Parse(time.RFC3339Nano, m[1])
				return at, err == nil
			}
		}
		return time.Time{}, false
	}
	for i, d := range ds {
		log := d.Log.String()
		if os.Getenv("WEFT_FLOOD_LOG") != "" {
			_ = os.WriteFile(fmt.Sprintf("%s/daemon%d.log", os.Getenv("WEFT_FLOOD_LOG"), i), []byte(log), 0o644)
		}
		sps, err := d.Client.Spaces(ctx)
		if err != nil || len(sps) != 1 {
			t.Fatalf("daemon %d spaces: %v", i, err)
		}
		n1, b1, n2, b2 := countFrom(t, d.Client, f1.id, f2.id)
		rss := peakRSS(d.Pid())
		t.Logf("daemon %d: flood 1 stored %d (%.1f msg/s over the flood), flood 2 stored %d (%.1f MB); space holds %d messages, %.1f MB; store dir %.1f MB; peak RSS %.0f MB",
			i, n1, float64(n1)/floodTook.Seconds(), n2, float64(b2)/1e6, sps[0].Messages, float64(sps[0].Bytes)/1e6, float64(dirSize(filepath.Join(d.Home, "store")))/1e6, float64(rss)/1e6)
		for j, f := range []struct {
			id    peer.ID
			start time.Time
		}{{f1.id, start}, {f2.id, bigStart}} {
			thr, okT := firstLog(throttleRE, log, f.id)
			gl, okG := firstLog(graylistRE, log, f.id)
			switch {
			case !okT:
				t.Errorf("daemon %d never throttled flooder %d", i, j+1)
			case !okG:
				t.Errorf("daemon %d never graylisted flooder %d", i, j+1)
			default:
				t.Logf("daemon %d: flooder %d throttled %v and graylisted %v after its flood began", i, j+1, thr.Sub(f.start).Round(time.Millisecond), gl.Sub(f.start).Round(time.Millisecond))
				if limit := loadScaled(10 * time.Second); gl.Sub(f.start) > limit {
					t.Errorf("daemon %d graylisted flooder %d only after %v (limit %v at load %s)", i, j+1, gl.Sub(f.start), limit, loadAvg())
				}
			}
		}
		_ = b1
		if n1 > 3000 {
			t.Errorf("daemon %d stored %d of the 1 KiB flood, want it throttled (burst 200, then 50/s or less)", i, n1)
		}
		if b2 > senderCap {
			t.Errorf("daemon %d stored %d bytes from the 64 KiB flooder, over its quota of %d", i, b2, senderCap)
		}
		if sps[0].Bytes > spaceCap {
			t.Errorf("daemon %d: the space holds %d bytes, over its quota of %d", i, sps[0].Bytes, spaceCap)
		}
		if rss > 1<<30 {
			t.Errorf("daemon %d: peak RSS %d MB", i, rss>>20)
		}
	}
	// Loose: the machine is shared. The target is 100 ms.
	if limit := floodLatencyLimit(); p99 > limit {
		t.Errorf("members' p99 latency %v during the floods, want at most %v (load %s)", fmtDur(p99), fmtDur(limit), loadAvg())
	}
	if p99 > 100*time.Millisecond {
		t.Logf("members' p99 %v is over the 100 ms target", fmtDur(p99))
	}
}

func fmtDur(d time.Duration) string {
	if d == time.Duration(math.MaxInt64) {
		return "never"
	}
	return d.Round(100 * time.Microsecond).String()
}

// countFrom counts the messages (and their bytes) of the two flooders that
// the daemon stores.
func countFrom(t *testing.T, c *client.Client, a, b peer.ID) (na int, ba int64, nb int, bb int64) {
	t.Helper()
	cursor := ""
	for {
		page, err := c.Read(context.Background(), "flooded", cursor, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			switch m.From {
			case a.String():
				na++
				ba += int64(len(m.Content))
			case b.String():
				nb++
				bb += int64(len(m.Content))
			}
		}
		if len(page.Messages) == 0 {
			return
		}
		cursor = page.Next
	}
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// dirSize is the disk a directory's files take (blocks allocated, not
// apparent sizes: Badger's value log is a sparse file).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				} else {
					n += fi.Size()
				}
			}
		}
		return nil
	})
	return n
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// floodLatencyLimit is the most members' p99 latency may reach during the
// floods: 1 s while the machine has a CPU for each runnable thread, and as
// many times 1 s as it has more (the 1-minute load per CPU) when other work
// shares it, since the daemons then wait for a CPU as long again. Seen: on
// 2 CPUs at load 15–18, the same tree passed and failed a flat 1 s bound.
func floodLatencyLimit() time.Duration { return loadScaled(time.Second) }

// loadScaled is d on a machine with a CPU for each runnable thread, and as
// many times d as it has more (see floodLatencyLimit).
func loadScaled(d time.Duration) time.Duration {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return d
	}
	f := strings.Fields(string(b))
	cpus := numCPU()
	if len(f) == 0 || cpus == 0 {
		return d
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil || load <= float64(cpus) {
		return d
	}
	return time.Duration(float64(d) * load / float64(cpus))
}
