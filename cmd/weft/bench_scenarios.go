package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// The scenarios of weft bench. Each starts its own daemons and stops them
// before it returns; its figures go into its result even when it fails
// half way.

// benchContent is the content of the i-th message the bench sends: about
// what an agent's short message is (~100 bytes). Each is different: two
// sends of the same content with the same parents in the same millisecond
// are one message (its ID is the hash of the signed body).
func benchContent(i int) json.RawMessage {
	return fmt.Appendf(nil, `{"text":"bench: a short agent message, like a status update or a reply.","n":%d}`, i)
}

// largeText is the text of benchLargeContent: lines of prose and code with
// the quotes and line ends that JSON escapes, as an agent's document or
// patch has them.
var largeText = strings.Repeat(`func (s *Store) Put(m Message) error { return s.put(m, \"durable\") }\n`+
	`A paragraph of an agent's report, with \"quotes\", commas, and a figure: 12.5 ms.\n`, 110)

// benchLargeContent is the content of the i-th large message the bench
// sends: ~16 KiB, as an agent's document, diff or tool output.
func benchLargeContent(i int) json.RawMessage {
	return fmt.Appendf(nil, `{"text":"%s","n":%d}`, largeText, i)
}

// 1. Durable sends.

type sendsResult struct {
	benchCommon
	ContentBytes int     `json:"content_bytes"`
	One          sendRun `json:"one_client"`
	Eight        sendRun `json:"eight_clients"`
	// LargeBytes is the content size of Large's sends, one client's.
	LargeBytes int     `json:"large_content_bytes"`
	Large      sendRun `json:"large_one_client"`
}

// sendRun is a run of sends through one daemon's API.
type sendRun struct {
	Clients   int          `json:"clients"`
	Sends     int          `json:"sends"`
	PerSecond float64      `json:"per_s"`
	Latency   benchLatency `json:"latency"` // of one send, request to answer
	// DaemonCPUPerSendUs is the daemon's CPU time (user + system) over the
	// run divided by the sends.
	DaemonCPUPerSendUs float64 `json:"daemon_cpu_per_send_us"`
	// ClientCPUPerSendUs is the bench process's CPU time over the run
	// divided by the sends: what the clients (node/client's encoding,
	// HTTP exchange and decoding) cost, on the same cores as the daemon.
	ClientCPUPerSendUs float64 `json:"client_cpu_per_send_us"`
}

func (r *sendsResult) rows() [][2]string {
	row := func(s sendRun) string {
		return fmt.Sprintf("%s sends/s; %s; CPU per send: daemon %.0f µs, clients %.0f µs", fmtCount(s.PerSecond), s.Latency, s.DaemonCPUPerSendUs, s.ClientCPUPerSendUs)
	}
	return [][2]string{
		{fmt.Sprintf("durable sends, 1 client (%d-byte content)", r.ContentBytes), row(r.One)},
		{"durable sends, 8 concurrent clients", row(r.Eight)},
		{fmt.Sprintf("durable sends, 1 client, %s-byte content", fmtCount(float64(r.LargeBytes))), row(r.Large)},
	}
}

func benchSends(ctx context.Context, b *bench, r *sendsResult) error {
	ds, err := b.startN(ctx, 1)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	const space = "bench-sends"
	if _, err := ds[0].c.Join(ctx, space); err != nil {
		return err
	}
	r.ContentBytes = len(benchContent(0))
	if _, err := sendLoop(ctx, ds[0], 1, space, 20, 0, nil); err != nil { // warm up
		return err
	}
	if r.One, err = sendLoop(ctx, ds[0], 1, space, 0, b.sizes.sendFor, nil); err != nil {
		return err
	}
	if r.Eight, err = sendLoop(ctx, ds[0], 8, space, 0, b.sizes.sendFor, nil); err != nil {
		return err
	}
	r.LargeBytes = len(benchLargeContent(0))
	r.Large, err = sendContentLoop(ctx, ds[0], 1, space, 0, b.sizes.sendFor/2, benchLargeContent, nil)
	return err
}

// clients returns n clients of d, each with its own connections.
func clients(d *benchDaemon, n int) []*client.Client {
	cs := make([]*client.Client, n)
	for i := range cs {
		cs[i] = d.client()
	}
	return cs
}

// sendLoop sends benchContent to space through d's API from that many
// clients at once, each as fast as the daemon answers, until n messages
// are sent (n > 0) or dur has passed. onSent, if not nil, gets the index
// and answer of every send (concurrently).
func sendLoop(ctx context.Context, d *benchDaemon, nClients int, space string, n int, dur time.Duration, onSent func(int, api.Message)) (sendRun, error) {
	return sendContentLoop(ctx, d, nClients, space, n, dur, benchContent, onSent)
}

// sendContentLoop is sendLoop sending content(i) as the i-th message.
func sendContentLoop(ctx context.Context, d *benchDaemon, nClients int, space string, n int, dur time.Duration, content func(int) json.RawMessage, onSent func(int, api.Message)) (sendRun, error) {
	var next atomic.Int64
	cs := clients(d, nClients)
	lats := make([][]time.Duration, len(cs))
	cpu0, _ := procCPU(d.pid())
	self0, _ := procCPU(os.Getpid())
	start := time.Now()
	err := parallel(len(cs), len(cs), func(w int) error {
		for {
			i := int(next.Add(1) - 1)
			if (n > 0 && i >= n) || (dur > 0 && time.Since(start) >= dur) {
				return nil
			}
			t := time.Now()
			m, err := cs[w].Send(ctx, space, api.SendRequest{Content: content(i)})
			if err != nil {
				return fmt.Errorf("send: %w", err)
			}
			lats[w] = append(lats[w], time.Since(t))
			if onSent != nil {
				onSent(i, m)
			}
		}
	})
	elapsed := time.Since(start)
	cpu1, _ := procCPU(d.pid())
	self1, _ := procCPU(os.Getpid())
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	run := sendRun{Clients: len(cs), Sends: len(all), PerSecond: perSecond(len(all), elapsed), Latency: latencies(all)}
	if len(all) > 0 {
		run.DaemonCPUPerSendUs = round(float64((cpu1-cpu0).Microseconds())/float64(len(all)), 1)
		run.ClientCPUPerSendUs = round(float64((self1-self0).Microseconds())/float64(len(all)), 1)
	}
	return run, err
}

// joinAll has every daemon join space.
func joinAll(ctx context.Context, ds []*benchDaemon, space string) error {
	return parallel(len(ds), 8, func(i int) error {
		_, err := ds[i].c.Join(ctx, space)
		return err
	})
}

// topicPeers returns the fewest and the mean number of peers the daemons
// see in space's gossip topic.
func topicPeers(ctx context.Context, ds []*benchDaemon, space string) (least int, mean float64, err error) {
	least, total := -1, 0
	for _, d := range ds {
		sps, err := d.c.Spaces(ctx)
		if err != nil {
			return 0, 0, err
		}
		n := 0
		for _, s := range sps {
			if s.Name == space {
				n = s.Peers
			}
		}
		if least < 0 || n < least {
			least = n
		}
		total += n
	}
	return least, float64(total) / float64(len(ds)), nil
}

// waitMesh waits up to timeout until every daemon sees at least want peers
// in space's topic, and returns how long it waited and the fewest seen.
// Not getting there is not an error: the figures say so.
func waitMesh(ctx context.Context, ds []*benchDaemon, space string, want int, timeout time.Duration) (time.Duration, int, error) {
	start := time.Now()
	least := 0
	var err error
	werr := waitFor(ctx, timeout, func() bool {
		least, _, err = topicPeers(ctx, ds, space)
		return err != nil || least >= want
	})
	if err == nil && ctx.Err() != nil {
		err = werr
	}
	return time.Since(start), least, err
}

// held returns how many messages d holds in space.
func held(ctx context.Context, d *benchDaemon, space string) (int, error) {
	sps, err := d.c.Spaces(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range sps {
		if s.Name == space {
			return s.Messages, nil
		}
	}
	return 0, fmt.Errorf("%s has not joined %s", d.name, space)
}

// 2. Broadcast at a fixed rate.

type broadcastResult struct {
	benchCommon
	Daemons int `json:"daemons"`
	// MeshS is how long the daemons took, after joining, until each saw
	// every other in the space's gossip topic (or the wait of 30 s ended:
	// then MinTopicPeers is below daemons − 1).
	MeshS         float64 `json:"mesh_s"`
	MinTopicPeers int     `json:"min_topic_peers"`
	// SettleS is how long the sync sessions that joining starts took to
	// end (every daemon syncs with the members it finds), waited for
	// before the first rate so that its figures are those of a space in
	// use, not of one being joined (at most 30 s).
	SettleS float64        `json:"settle_s"`
	Runs    []broadcastRun `json:"runs"`
}

// broadcastRun is one rate: publishers send at it for a while, a follower
// (SSE) on every daemon records what arrives from the others.
type broadcastRun struct {
	TargetPerS   int     `json:"target_per_s"`
	Publishers   int     `json:"publishers"` // on as many daemons, 4 concurrent senders each
	SendS        float64 `json:"send_s"`
	Sent         int     `json:"sent"`
	SendErrors   int     `json:"send_errors"`
	AchievedPerS float64 `json:"achieved_per_s"`
	Expected     int     `json:"expected"` // arrivals: sent × (daemons − 1)
	Arrived      int     `json:"arrived"`  // distinct arrivals at the followers
	Duplicates   int     `json:"duplicates"`
	// Lost is expected − arrived: sent but not at a follower GraceS after
	// the last send (under overload, still queued counts as lost).
	Lost   int     `json:"lost"`
	GraceS float64 `json:"grace_s"`
	// StoredMin is the fewest messages any daemon stored from the run's
	// start to the end of its grace period (its own included; at most
	// sent; late ones of an earlier run count too).
	StoredMin int `json:"stored_min"`
	// Latency is from just before the publisher's send call to the
	// message's arrival at a follower, over every arrival.
	Latency benchLatency `json:"latency"`
	// CPU time a daemon spent in the run (sending, receiving, storing,
	// forwarding) divided by the messages it received; mean and max over
	// the daemons.
	CPUPerMsgUsMean float64 `json:"cpu_per_msg_us_mean"`
	CPUPerMsgUsMax  float64 `json:"cpu_per_msg_us_max"`
	// CPUPerMsgUsReceivers is the mean over the daemons that publish
	// nothing: a publisher's CPU includes its sends (the API, signing,
	// storing durably, flooding each message to every member), divided by
	// the fewer messages it receives.
	CPUPerMsgUsReceivers float64 `json:"cpu_per_msg_us_receivers"`
	// WritesPerMsgReceivers and ReadsPerMsgReceivers are the write and
	// read system calls (/proc/PID/io syscw, syscr: network, disk and
	// the API's socket alike) of the daemons that publish nothing,
	// divided by the messages they received; the mean over them.
	WritesPerMsgReceivers float64 `json:"writes_per_msg_receivers"`
	ReadsPerMsgReceivers  float64 `json:"reads_per_msg_receivers"`
	// CopiesPerMsg is how many copies of each message gossip brought a
	// daemon that did not publish it: (delivered + duplicate) / delivered
	// of weft_gossip_messages_total summed over the daemons, less the
	// messages sent (gossipsub counts a publisher's own as delivered).
	CopiesPerMsg float64 `json:"copies_per_msg"`
	// SyncSessions is the sync sessions the daemons ran in the run (each
	// counted by both sides), SyncFetched the messages they fetched by
	// sync rather than gossip (gap repair, spreading): summed over the
	// daemons.
	SyncSessions int `json:"sync_sessions"`
	SyncFetched  int `json:"sync_fetched"`
	// BusyDaemons and BusyBench are the CPU time the daemons (all of
	// them) and the bench process (publishers' clients, followers) spent
	// while the publishers sent, divided by that time: how many of the
	// machine's cores they kept busy. At or near all of them, arrivals
	// queue for a core and the latency is mostly that wait: every daemon
	// of the space runs on this one machine.
	BusyDaemons float64 `json:"busy_daemons_cores"`
	BusyBench   float64 `json:"busy_bench_cores"`
}

// joinSyncWait is how long after joining a member may start its first
// sync sessions (mesh.joinSyncDelay, plus a margin).
const joinSyncWait = 3 * time.Second

// syncSettled waits, up to limit, until joinSyncWait has passed and no
// daemon has a sync session running, and returns how long that took.
func syncSettled(ctx context.Context, ds []*benchDaemon, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	idle := func() bool {
		if time.Since(start) < joinSyncWait {
			return false
		}
		for _, d := range ds {
			n, err := d.c.Node(ctx)
			if err != nil || n.Sync != nil && n.Sync.Active {
				return false
			}
		}
		return true
	}
	_ = waitFor(ctx, limit, idle) // not settled: measure anyway
	return time.Since(start), ctx.Err()
}

// syncCounts returns each daemon's sync sessions and messages fetched by
// sync so far.
func syncCounts(ctx context.Context, ds []*benchDaemon) (sessions, fetched []int, err error) {
	for _, d := range ds {
		n, err := d.c.Node(ctx)
		if err != nil {
			return nil, nil, err
		}
		st, err := d.c.Status(ctx)
		if err != nil {
			return nil, nil, err
		}
		var s int
		if n.Sync != nil {
			s = n.Sync.Sessions
		}
		sessions, fetched = append(sessions, s), append(fetched, st.Sync.Received)
	}
	return sessions, fetched, nil
}

func (r *broadcastResult) rows() [][2]string {
	rows := [][2]string{{fmt.Sprintf("space of %d daemons: gossip mesh formed", r.Daemons),
		fmt.Sprintf("%.1f s after joining (fewest topic peers: %d of %d); joining's syncs over %.1f s after", r.MeshS, r.MinTopicPeers, r.Daemons-1, r.SettleS)}}
	for _, run := range r.Runs {
		rows = append(rows,
			[2]string{fmt.Sprintf("%s msg/s target, %d publisher(s) → %d followers", fmtCount(float64(run.TargetPerS)), run.Publishers, r.Daemons),
				fmt.Sprintf("achieved %s/s; publish→arrival %s, max %s ms", fmtCount(run.AchievedPerS), run.Latency, fmtMs(run.Latency.MaxMs))},
			[2]string{"  lost / stored / CPU", fmt.Sprintf("%s of %s arrivals missing %.0f s after the last send (%d dup, %d send errors); fewest stored by a daemon %s of %s; CPU %.0f µs per received msg per daemon (max %.0f; %.0f on those that publish nothing)",
				fmtCount(float64(run.Lost)), fmtCount(float64(run.Expected)), run.GraceS, run.Duplicates, run.SendErrors,
				fmtCount(float64(run.StoredMin)), fmtCount(float64(run.Sent)), run.CPUPerMsgUsMean, run.CPUPerMsgUsMax, run.CPUPerMsgUsReceivers)},
			[2]string{"  copies, system calls", fmt.Sprintf("gossip brought %.2f copies of each new message; %.1f writes and %.1f reads per received msg on a daemon that publishes nothing",
				run.CopiesPerMsg, run.WritesPerMsgReceivers, run.ReadsPerMsgReceivers)},
			[2]string{"  sync", fmt.Sprintf("%s sessions (both sides count), %s messages fetched by sync instead of gossip",
				fmtCount(float64(run.SyncSessions)), fmtCount(float64(run.SyncFetched)))},
			[2]string{"  cores busy while sending", busyRow(run.BusyDaemons, run.BusyBench, runtime.NumCPU())})
	}
	return rows
}

func benchBroadcast(ctx context.Context, b *bench, r *broadcastResult) error {
	n := b.sizes.bcastDaemons
	ds, err := b.startN(ctx, n)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	r.Daemons = n
	const space = "bench-broadcast"
	if err := joinAll(ctx, ds, space); err != nil {
		return err
	}
	wait, least, err := waitMesh(ctx, ds, space, n-1, 30*time.Second)
	r.MeshS, r.MinTopicPeers = round(wait.Seconds(), 1), least
	if err != nil {
		return err
	}
	settle, err := syncSettled(ctx, ds, 30*time.Second)
	r.SettleS = round(settle.Seconds(), 1)
	if err != nil {
		return err
	}
	for i, rate := range b.sizes.bcastRates {
		b.logf("broadcast: %d msg/s for %v", rate, b.sizes.bcastFor)
		run, err := broadcastAt(ctx, b, ds, space, i+1, rate)
		r.Runs = append(r.Runs, run)
		if err != nil {
			return err
		}
	}
	return nil
}

// bcastContent is what broadcast messages carry.
type bcastContent struct {
	Text   string `json:"text"`
	Run    int    `json:"run"`
	Seq    int    `json:"seq"`
	SentNs int64  `json:"sent_ns"` // unix ns just before the send call
}

// bcastFollower records what one daemon's follower receives in a run.
type bcastFollower struct {
	mu   sync.Mutex
	seen []bool // by seq
	lats []time.Duration
	got  int
	dups int
}

// broadcastAt runs one rate: publishers on the first daemons send at rate
// (8 concurrent sends each, so a slow answer does not hold the rate back)
// for bcastFor; what is not sent by then is not sent.
func broadcastAt(ctx context.Context, b *bench, ds []*benchDaemon, space string, runID, rate int) (broadcastRun, error) {
	total := int(float64(rate) * b.sizes.bcastFor.Seconds())
	pubs := min(len(ds), max(1, rate/250))
	const perPub = 8
	run := broadcastRun{TargetPerS: rate, Publishers: pubs, GraceS: b.sizes.bcastGrace.Seconds()}

	// Followers, from each daemon's current end: they replay what
	// arrives before their stream is up.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	var arrived atomic.Int64
	fs := make([]*bcastFollower, len(ds))
	held0 := make([]int, len(ds))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, d := range ds {
		p, err := d.c.Read(ctx, space, api.EndCursor, 1)
		if err != nil {
			return run, err
		}
		if held0[i], err = held(ctx, d, space); err != nil {
			return run, err
		}
		f := &bcastFollower{seen: make([]bool, total)}
		fs[i] = f
		wg.Go(func() {
			_ = d.client().Follow(fctx, space, p.Next, func(m api.Message) error {
				now := time.Now()
				var c bcastContent
				if m.From == d.info.ID || json.Unmarshal(m.Content, &c) != nil || c.Run != runID || c.Seq < 0 || c.Seq >= total {
					return nil
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				if f.seen[c.Seq] {
					f.dups++
					return nil
				}
				f.seen[c.Seq] = true
				f.got++
				f.lats = append(f.lats, now.Sub(time.Unix(0, c.SentNs)))
				arrived.Add(1)
				return nil
			})
		})
	}

	sess0, fetched0, err := syncCounts(ctx, ds)
	if err != nil {
		return run, err
	}
	// The metrics scrape first: what it costs the daemons is the bench's,
	// not the messages' (as the closing one falls after cpu1).
	g0 := gossipCounts(ctx, ds)
	cpu0, io0 := cpuOf(ds), syscallsOf(ds)
	self0, _ := procCPU(os.Getpid())
	var next, sent, failed atomic.Int64
	interval := time.Second / time.Duration(rate)
	start := time.Now().Add(20 * time.Millisecond)
	err = parallel(pubs*perPub, pubs*perPub, func(w int) error {
		c := ds[w%pubs].client()
		for {
			i := int(next.Add(1) - 1)
			if i >= total || time.Since(start) >= b.sizes.bcastFor {
				return nil
			}
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
			content, _ := json.Marshal(bcastContent{Text: "broadcast", Run: runID, Seq: i, SentNs: time.Now().UnixNano()})
			if _, err := c.Send(ctx, space, api.SendRequest{Content: content}); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				failed.Add(1)
				continue
			}
			sent.Add(1)
		}
	})
	sendFor := time.Since(start)
	cpuSent := cpuOf(ds)
	self1, _ := procCPU(os.Getpid())
	if busy := sendFor.Seconds(); busy > 0 {
		var daemons time.Duration
		for i := range ds {
			daemons += cpuSent[i] - cpu0[i]
		}
		run.BusyDaemons = round(daemons.Seconds()/busy, 2)
		run.BusyBench = round((self1-self0).Seconds()/busy, 2)
	}
	run.SendS = round(sendFor.Seconds(), 2)
	run.Sent, run.SendErrors = int(sent.Load()), int(failed.Load())
	run.AchievedPerS = perSecond(run.Sent, sendFor)
	run.Expected = run.Sent * (len(ds) - 1)
	if err != nil {
		return run, err
	}
	_ = waitFor(ctx, b.sizes.bcastGrace, func() bool { return int(arrived.Load()) >= run.Expected })
	cpu1, io1, g1 := cpuOf(ds), syscallsOf(ds), gossipCounts(ctx, ds)
	// gossipsub counts what a daemon publishes as delivered there.
	if received := g1[0] - g0[0] - int64(run.Sent); received > 0 {
		run.CopiesPerMsg = round(float64(received+g1[1]-g0[1])/float64(received), 2)
	}
	sess1, fetched1, err := syncCounts(ctx, ds)
	if err != nil {
		return run, err
	}
	for i := range ds {
		run.SyncSessions += sess1[i] - sess0[i]
		run.SyncFetched += fetched1[i] - fetched0[i]
	}
	run.StoredMin = run.Sent
	for i, d := range ds {
		h, err := held(ctx, d, space)
		if err != nil {
			return run, err
		}
		run.StoredMin = min(run.StoredMin, h-held0[i])
	}
	stopFollow()
	wg.Wait()
	var lats []time.Duration
	var perMsg []float64
	var receivers []float64
	for i, f := range fs {
		run.Arrived += f.got
		run.Duplicates += f.dups
		lats = append(lats, f.lats...)
		if f.got > 0 {
			v := float64((cpu1[i] - cpu0[i]).Microseconds()) / float64(f.got)
			perMsg = append(perMsg, v)
			if i >= pubs {
				receivers = append(receivers, v)
				nr := float64(len(fs) - pubs)
				run.WritesPerMsgReceivers += float64(io1[i][1]-io0[i][1]) / float64(f.got) / nr
				run.ReadsPerMsgReceivers += float64(io1[i][0]-io0[i][0]) / float64(f.got) / nr
			}
		}
	}
	for _, v := range receivers {
		run.CPUPerMsgUsReceivers += v / float64(len(receivers))
	}
	run.CPUPerMsgUsReceivers = round(run.CPUPerMsgUsReceivers, 1)
	run.WritesPerMsgReceivers = round(run.WritesPerMsgReceivers, 2)
	run.ReadsPerMsgReceivers = round(run.ReadsPerMsgReceivers, 2)
	run.Lost = run.Expected - run.Arrived
	run.Latency = latencies(lats)
	for _, v := range perMsg {
		run.CPUPerMsgUsMean += v / float64(len(perMsg))
		run.CPUPerMsgUsMax = max(run.CPUPerMsgUsMax, v)
	}
	run.CPUPerMsgUsMean = round(run.CPUPerMsgUsMean, 1)
	run.CPUPerMsgUsMax = round(run.CPUPerMsgUsMax, 1)
	return run, ctx.Err()
}

// syscallsOf reads each daemon's read and write system calls so far
// (/proc/PID/io syscr, syscw); zeros where it cannot.
func syscallsOf(ds []*benchDaemon) [][2]int64 {
	out := make([][2]int64, len(ds))
	for i, d := range ds {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", d.pid()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "syscr":
				out[i][0] = n
			case "syscw":
				out[i][1] = n
			}
		}
	}
	return out
}

// gossipCounts sums the daemons' gossip messages delivered and duplicate
// (weft_gossip_messages_total on GET /v1/metrics); a daemon it cannot
// read counts nothing.
func gossipCounts(ctx context.Context, ds []*benchDaemon) [2]int64 {
	var out [2]int64
	for _, d := range ds {
		text, err := d.c.Metrics(ctx)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(text, "\n") {
			for i, l := range []string{`weft_gossip_messages_total{result="delivered"} `, `weft_gossip_messages_total{result="duplicate"} `} {
				if v, ok := strings.CutPrefix(line, l); ok {
					f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					out[i] += int64(f)
				}
			}
		}
	}
	return out
}

// 3. A page in a large space.

type pageResult struct {
	benchCommon
	Messages    int     `json:"messages"`
	FillClients int     `json:"fill_clients"`
	FillS       float64 `json:"fill_s"` // filling the space through the API
	FillPerS    float64 `json:"fill_per_s"`
	// Latencies of reading a 10-message page (GET …/messages?limit=10)
	// at the start, in the middle and near the end (the last 50) of the
	// space.
	Start  benchLatency `json:"start"`
	Middle benchLatency `json:"middle"`
	Tail   benchLatency `json:"tail"`
	// The same reads again once the daemon has gone quiet: the fill's
	// flushes and compactions over (or settleMax passed: Settled false,
	// also where its CPU cannot be read), as a space written over days
	// would be read. SettleS is how long that took after the first reads.
	Settled       bool         `json:"settled"`
	SettleS       float64      `json:"settle_s"`
	SettledStart  benchLatency `json:"settled_start"`
	SettledMiddle benchLatency `json:"settled_middle"`
	SettledTail   benchLatency `json:"settled_tail"`
}

func (r *pageResult) rows() [][2]string {
	return [][2]string{
		{fmt.Sprintf("fill %s messages through the API, %d clients", fmtCount(float64(r.Messages)), r.FillClients),
			fmt.Sprintf("%.1f s (%s sends/s)", r.FillS, fmtCount(r.FillPerS))},
		{"10-message page at the start", r.Start.String()},
		{"10-message page in the middle", r.Middle.String()},
		{"10-message page at the tail", r.Tail.String()},
		{fmt.Sprintf("%s (%.0f s later): start", r.settledAs(), r.SettleS), r.SettledStart.String()},
		{r.settledAs() + ": middle", r.SettledMiddle.String()},
		{r.settledAs() + ": tail", r.SettledTail.String()},
	}
}

// settledAs names the second reads: once quiet, or not.
func (r *pageResult) settledAs() string {
	if r.Settled {
		return "once quiet"
	}
	return "again, not quiet"
}

func benchPage(ctx context.Context, b *bench, r *pageResult) error {
	ds, err := b.startN(ctx, 1)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	d, n := ds[0], b.sizes.pageMessages
	const space = "bench-page"
	if _, err := d.c.Join(ctx, space); err != nil {
		return err
	}
	r.Messages, r.FillClients = n, b.sizes.fillClients
	var middle, tail string
	fill, err := fillSpace(ctx, b, d, space, n, func(i int, m api.Message) {
		switch i {
		case n / 2:
			middle = m.Cursor
		case n - 50: // concurrent sends: a page after it still has 10
			tail = m.Cursor
		}
	})
	r.FillS, r.FillPerS = round(fill.Seconds(), 1), perSecond(n, fill)
	if err != nil {
		return err
	}
	reads := func(start, mid, end *benchLatency) error {
		for _, at := range []struct {
			after string
			into  *benchLatency
		}{{"", start}, {middle, mid}, {tail, end}} {
			if *at.into, err = pageReads(ctx, d.client(), space, at.after, b.sizes.pageReads); err != nil {
				return err
			}
		}
		return nil
	}
	if err := reads(&r.Start, &r.Middle, &r.Tail); err != nil {
		return err
	}
	t := time.Now()
	if r.Settled, err = quiet(ctx, d.pid(), settleMax); err != nil {
		return err
	}
	r.SettleS = round(time.Since(t).Seconds(), 1)
	return reads(&r.SettledStart, &r.SettledMiddle, &r.SettledTail)
}

// settleMax bounds how long the page scenario waits for its daemon to go
// quiet before it reads again.
const settleMax = 2 * time.Minute

// quiet waits until the process pid has used under 2 % of a core over a
// second (its background work, Badger's flushes and compactions, done),
// reporting true, or for at most limit (false). Where the process's CPU
// cannot be read (no /proc), it does not wait: false.
func quiet(ctx context.Context, pid int, limit time.Duration) (bool, error) {
	const window = time.Second
	deadline := time.Now().Add(limit)
	last, err := procCPU(pid)
	if err != nil {
		return false, nil
	}
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(window):
		}
		now, err := procCPU(pid)
		if err != nil {
			return false, nil
		}
		if now-last < window/50 {
			return true, nil
		}
		last = now
	}
	return false, nil
}

// fillSpace sends n messages to space through d's API from fillClients
// clients at once, reporting progress every 15 s, and returns how long it
// took.
func fillSpace(ctx context.Context, b *bench, d *benchDaemon, space string, n int, onSent func(int, api.Message)) (time.Duration, error) {
	b.logf("filling %s with %s messages through the API (%d clients)", d.name, fmtCount(float64(n)), b.sizes.fillClients)
	var done atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.logf("  %s of %s", fmtCount(float64(done.Load())), fmtCount(float64(n)))
			}
		}
	}()
	start := time.Now()
	_, err := sendLoop(ctx, d, b.sizes.fillClients, space, n, 0, func(i int, m api.Message) {
		done.Add(1)
		if onSent != nil {
			onSent(i, m)
		}
	})
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	if got, err := held(ctx, d, space); err != nil || got != n {
		return took, fmt.Errorf("%d messages sent, the space holds %d (%v)", n, got, err)
	}
	return took, nil
}

// pageReads reads a 10-message page after cursor reads times, one at a time.
func pageReads(ctx context.Context, c *client.Client, space, after string, reads int) (benchLatency, error) {
	lats := make([]time.Duration, 0, reads)
	for range reads {
		t := time.Now()
		p, err := c.Read(ctx, space, after, 10)
		if err != nil {
			return benchLatency{}, err
		}
		lats = append(lats, time.Since(t))
		if len(p.Messages) != 10 {
			return benchLatency{}, fmt.Errorf("a page after %q has %d messages, want 10", after, len(p.Messages))
		}
	}
	return latencies(lats), nil
}

// 4. Calls through two daemons.

type invokeResult struct {
	benchCommon
	Calls   int          `json:"calls"`
	Latency benchLatency `json:"latency"` // one caller, one call at a time
	// Concurrent8PerS is calls/s with 8 callers at once.
	Concurrent8PerS float64 `json:"concurrent8_per_s"`
	// CPU time per call of those 8 callers' calls: of the caller's
	// daemon, of the callee's, and of the bench process (the callers'
	// client and the handler agent).
	CallerCPUUs  float64 `json:"caller_daemon_cpu_per_call_us"`
	CalleeCPUUs  float64 `json:"callee_daemon_cpu_per_call_us"`
	AgentsCPUUs  float64 `json:"agents_cpu_per_call_us"`
	StreamFrames int     `json:"stream_frames"` // deltas of one stream call
	StreamPerS   float64 `json:"stream_frames_per_s"`
	// StreamRTT is a libp2p stream round trip between the two daemons,
	// timed inside the calling daemon: a health query on a new stream
	// (the rtt_ms of GET /v1/peers/{peer}/health). HealthAPI is the same
	// query timed by the bench, through the API.
	StreamRTT benchLatency `json:"libp2p_stream_rtt"`
	HealthAPI benchLatency `json:"health_api"`
	// The parts of Latency, timed in turn with it: a request to the
	// caller's API that does no work (GET /v1/node), and a call answered
	// by the callee's daemon itself (no handler serves its name), which
	// is Latency without the hop to the handler agent and back.
	APIRoundTrip benchLatency `json:"api_round_trip"`
	NoAgent      benchLatency `json:"invoke_no_agent"`
}

func (r *invokeResult) rows() [][2]string {
	return [][2]string{
		{"invoke through 2 daemons' APIs, 1 caller, 1 at a time", r.Latency.String()},
		{"  its parts: the caller's API round trip (GET /v1/node)", r.APIRoundTrip.String()},
		{"  an invoke the callee's daemon answers (no agent hop)", r.NoAgent.String()},
		{"invoke, 8 concurrent callers", fmt.Sprintf("%s calls/s; CPU per call: caller's daemon %.0f µs, callee's %.0f µs, agents %.0f µs",
			fmtCount(r.Concurrent8PerS), r.CallerCPUUs, r.CalleeCPUUs, r.AgentsCPUUs)},
		{fmt.Sprintf("stream invoke (%s deltas)", fmtCount(float64(r.StreamFrames))), fmtCount(r.StreamPerS) + " frames/s"},
		{"libp2p stream round trip (health query, timed in the daemon)", r.StreamRTT.String()},
		{"the same health query through the API", r.HealthAPI.String()},
	}
}

func benchInvoke(ctx context.Context, b *bench, r *invokeResult) error {
	ds, err := b.startN(ctx, 2)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	a, h := ds[0], ds[1]
	if b.profile != "" {
		// The bench process is one end of every call (the caller and the
		// handler agent): its CPU counts as the agents' share.
		p, err := startProfile(filepath.Join(b.profile, "bench-invoke"))
		if err != nil {
			return err
		}
		defer p.stop()
	}
	// Handlers take calls from trusted peers (by default): h trusts a.
	if _, err := h.c.Trust(ctx, a.info.ID, "bench caller"); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	// The handler agent serves echo (its input back) and count (N deltas).
	sctx, stopServe := context.WithCancel(ctx)
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- h.client().Serve(sctx, api.HandlerRequest{Names: []string{"echo", "count"}, Concurrency: 64},
			func(ctx context.Context, call api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
				if call.Name != "count" {
					return call.Input, nil, nil
				}
				n, err := strconv.Atoi(string(call.Input))
				if err != nil {
					return nil, nil, err
				}
				for i := range n {
					if err := send(json.RawMessage(strconv.Itoa(i))); err != nil {
						return nil, nil, err
					}
				}
				return json.RawMessage(`"done"`), nil, nil
			}, func() { close(ready) })
	}()
	defer func() { stopServe(); <-served }()
	select {
	case <-ready:
	case err := <-served:
		served <- err
		return fmt.Errorf("handler: %w", err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("handler: not registered after 30 s")
	}

	echo := api.InvokeRequest{Peer: h.info.ID, Name: "echo", Input: json.RawMessage(`{"ping":1}`)}
	invoke := func(c *client.Client) error {
		out, err := c.Invoke(ctx, echo)
		if err == nil && string(out.Output) != string(echo.Input) {
			err = fmt.Errorf("echo answered %s", out.Output)
		}
		return err
	}
	ca := a.client()
	// The first call may come before the two daemons have found each
	// other (a started daemon answers its API before its bootstrap dial
	// ends): it is tried again for up to 30 s, then the warm-up's calls
	// must all succeed.
	reached := time.Now().Add(30 * time.Second)
	for err := invoke(ca); err != nil; err = invoke(ca) {
		if time.Now().After(reached) || ctx.Err() != nil {
			return fmt.Errorf("invoke: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 50 { // warm up: connections, streams
		if err := invoke(ca); err != nil {
			return fmt.Errorf("invoke: %w", err)
		}
	}
	// The parts of a call, each timed in turn with it: the socket's round
	// trip alone, and a call answered by the callee's daemon without its
	// agent (no handler serves the name).
	nobody := api.InvokeRequest{Peer: h.info.ID, Name: "bench-nobody"}
	n := b.sizes.invokeCalls
	lats, nodes, bares := make([]time.Duration, 0, n), make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := invoke(ca); err != nil {
			return fmt.Errorf("invoke: %w", err)
		}
		lats = append(lats, time.Since(t))
		t = time.Now()
		if _, err := ca.Node(ctx); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		nodes = append(nodes, time.Since(t))
		t = time.Now()
		if _, err := ca.Invoke(ctx, nobody); !client.IsCode(err, "no_handler") {
			return fmt.Errorf("invoke of a name nobody serves: %v, want no_handler", err)
		}
		bares = append(bares, time.Since(t))
	}
	r.Calls, r.Latency, r.APIRoundTrip, r.NoAgent = len(lats), latencies(lats), latencies(nodes), latencies(bares)

	var calls atomic.Int64
	callers := clients(a, 8)
	cpu0 := cpuOf(ds)
	self0, _ := procCPU(os.Getpid())
	start := time.Now()
	err = parallel(len(callers), len(callers), func(w int) error {
		for calls.Add(1) <= int64(2*b.sizes.invokeCalls) {
			if err := invoke(callers[w]); err != nil {
				return fmt.Errorf("invoke: %w", err)
			}
		}
		return nil
	})
	r.Concurrent8PerS = perSecond(2*b.sizes.invokeCalls, time.Since(start))
	cpu1 := cpuOf(ds)
	self1, _ := procCPU(os.Getpid())
	if err != nil {
		return err
	}
	perCall := func(d time.Duration) float64 {
		return round(float64(d.Microseconds())/float64(2*b.sizes.invokeCalls), 1)
	}
	r.CallerCPUUs, r.CalleeCPUUs, r.AgentsCPUUs = perCall(cpu1[0]-cpu0[0]), perCall(cpu1[1]-cpu0[1]), perCall(self1-self0)

	deltas := 0
	start = time.Now()
	err = ca.InvokeStream(ctx, api.InvokeRequest{Peer: h.info.ID, Name: "count", Input: json.RawMessage(strconv.Itoa(b.sizes.streamFrames))},
		func(f api.Frame) error {
			if f.Kind == "delta" {
				deltas++
			}
			return nil
		})
	r.StreamFrames, r.StreamPerS = deltas, perSecond(deltas, time.Since(start))
	if err != nil {
		return fmt.Errorf("stream invoke: %w", err)
	}
	if deltas != b.sizes.streamFrames {
		return fmt.Errorf("stream invoke: %d deltas, want %d", deltas, b.sizes.streamFrames)
	}

	var rtts, apis []time.Duration
	for range b.sizes.healthPings {
		t := time.Now()
		hl, err := ca.Health(ctx, h.info.ID)
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		apis = append(apis, time.Since(t))
		rtts = append(rtts, time.Duration(hl.RTTMillis*float64(time.Millisecond)))
	}
	r.StreamRTT, r.HealthAPI = latencies(rtts), latencies(apis)
	return nil
}

// 5. A late joiner.

type catchupResult struct {
	benchCommon
	Messages int     `json:"messages"`
	FillS    float64 `json:"fill_s"` // filling the member through its API
	// From the joiner's process start: its API answers (UpS), and its
	// space holds every message (CaughtUpS).
	UpS       float64 `json:"joiner_up_s"`
	FirstS    float64 `json:"first_s"` // it held its first message (sampled every 50 ms)
	CaughtUpS float64 `json:"caught_up_s"`
	PerS      float64 `json:"per_s"` // messages / CaughtUpS
	// The largest RssAnon sampled (every 250 ms) of the member while it
	// was filled, of the member while the joiner caught up, and of the
	// joiner.
	// CPU time per message fetched: of the joiner from its start until
	// caught up, and of the member over the same time.
	JoinerCPUUs         float64 `json:"joiner_cpu_us"`
	MemberCPUUs         float64 `json:"member_cpu_us"`
	FillPeakRSSAnonMB   float64 `json:"fill_peak_rss_anon_mb"`
	MemberPeakRSSAnonMB float64 `json:"member_peak_rss_anon_mb"`
	JoinerPeakRSSAnonMB float64 `json:"joiner_peak_rss_anon_mb"`
}

func (r *catchupResult) rows() [][2]string {
	return [][2]string{
		{fmt.Sprintf("a late joiner fetches %s messages (from its start)", fmtCount(float64(r.Messages))),
			fmt.Sprintf("%.1f s (%s msgs/s); its API up after %.2f s, first message after %.2f s", r.CaughtUpS, fmtCount(r.PerS), r.UpS, r.FirstS)},
		{"  CPU per message fetched: joiner, member", fmt.Sprintf("%.0f µs, %.0f µs", r.JoinerCPUUs, r.MemberCPUUs)},
		{"  the member filled through its API first", fmt.Sprintf("%.1f s", r.FillS)},
		{"  peak RssAnon: member while filled, member while serving, joiner", fmt.Sprintf("%.1f MB, %.1f MB, %.1f MB", r.FillPeakRSSAnonMB, r.MemberPeakRSSAnonMB, r.JoinerPeakRSSAnonMB)},
	}
}

func benchCatchup(ctx context.Context, b *bench, r *catchupResult) error {
	ds, err := b.startN(ctx, 1)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	member, n := ds[0], b.sizes.catchup
	const space = "bench-catchup"
	if _, err := member.c.Join(ctx, space); err != nil {
		return err
	}
	r.Messages = n
	fill, err := fillSpace(ctx, b, member, space, n, nil)
	r.FillS = round(fill.Seconds(), 1)
	if err != nil {
		return err
	}
	r.FillPeakRSSAnonMB = mb(b.takePeak(member))
	b.logf("catchup: a joiner fetches %s messages", fmtCount(float64(n)))
	mcpu0, err := procCPU(member.pid())
	if err != nil {
		return err
	}
	j, err := b.start(ctx, member.addr())
	if err != nil {
		return err
	}
	defer b.stop(j)
	r.UpS = round(time.Since(j.started).Seconds(), 2)
	if _, err := j.c.Join(ctx, space); err != nil {
		return err
	}
	got := 0
	err = waitFor(ctx, 10*time.Minute, func() bool {
		got, err = held(ctx, j, space)
		if err == nil && got > 0 && r.FirstS == 0 {
			r.FirstS = round(time.Since(j.started).Seconds(), 2)
		}
		return j.exited() || (err == nil && got >= n)
	})
	caught := time.Since(j.started)
	switch {
	case j.exited():
		return fmt.Errorf("the joiner exited: %s", tail(j.home+"/daemon.log"))
	case err != nil:
		return fmt.Errorf("the joiner holds %d of %d messages: %w", got, n, err)
	}
	r.CaughtUpS, r.PerS = round(caught.Seconds(), 2), perSecond(n, caught)
	jcpu, err := procCPU(j.pid())
	if err != nil {
		return err
	}
	mcpu1, err := procCPU(member.pid())
	if err != nil {
		return err
	}
	r.JoinerCPUUs = round(float64(jcpu.Microseconds())/float64(n), 0)
	r.MemberCPUUs = round(float64((mcpu1-mcpu0).Microseconds())/float64(n), 0)
	time.Sleep(300 * time.Millisecond) // a last sample
	r.MemberPeakRSSAnonMB, r.JoinerPeakRSSAnonMB = mb(b.takePeak(member)), mb(b.takePeak(j))
	return nil
}

// 6. Memory and CPU at rest.

type memoryResult struct {
	benchCommon
	// A daemon with one space of 10 messages and one peer, IdleAfterS
	// after its start: its RSS split into anonymous memory (heap, stacks)
	// and file-backed (the binary's pages, mapped files), and its CPU use
	// over IdleForS, in % of one core.
	IdleAfterS     float64 `json:"idle_after_s"`
	RSSAnonMB      float64 `json:"rss_anon_mb"`
	RSSFileMB      float64 `json:"rss_file_mb"`
	RSSMB          float64 `json:"rss_mb"`
	IdleForS       float64 `json:"idle_for_s"`
	IdleCPUPercent float64 `json:"idle_cpu_percent"`
}

func (r *memoryResult) rows() [][2]string {
	return [][2]string{
		{"idle daemon RSS (one space, 10 messages, one peer)", fmt.Sprintf("RssAnon %.1f MB, RssFile %.1f MB (VmRSS %.1f MB)", r.RSSAnonMB, r.RSSFileMB, r.RSSMB)},
		{fmt.Sprintf("idle daemon CPU over %.0f s", r.IdleForS), fmt.Sprintf("%.2f %% of one core", r.IdleCPUPercent)},
	}
}

func benchMemory(ctx context.Context, b *bench, r *memoryResult) error {
	ds, err := b.startN(ctx, 2)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	const space = "bench-idle"
	if err := joinAll(ctx, ds, space); err != nil {
		return err
	}
	if _, err := sendLoop(ctx, ds[1], 1, space, 10, 0, nil); err != nil {
		return err
	}
	d := ds[0]
	if err := waitFor(ctx, 30*time.Second, func() bool { n, err := held(ctx, d, space); return err == nil && n >= 10 }); err != nil {
		return fmt.Errorf("the 10 messages did not arrive: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.sizes.idleSettle):
	}
	cpu0, err := procCPU(d.pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.sizes.idleFor):
	}
	cpu1, err := procCPU(d.pid())
	if err != nil {
		return err
	}
	idle := time.Since(t0)
	m, err := procMem(d.pid())
	if err != nil {
		return err
	}
	r.IdleAfterS = round(time.Since(d.started).Seconds(), 1)
	r.RSSAnonMB, r.RSSFileMB, r.RSSMB = mb(m.anon), mb(m.file), mb(m.rss)
	r.IdleForS = round(idle.Seconds(), 1)
	r.IdleCPUPercent = round(100*(cpu1-cpu0).Seconds()/idle.Seconds(), 2)
	return nil
}

// 7. Many daemons in one space.

type manyResult struct {
	benchCommon
	Daemons int     `json:"daemons"`
	Running int     `json:"running"` // still running at the end
	StartS  float64 `json:"start_s"` // until every daemon's API answered
	// MeshS is how long after joining every daemon saw at least one peer
	// in the space's topic; then MinTopicPeers and MeanTopicPeers.
	MeshS          float64 `json:"mesh_s"`
	MinTopicPeers  int     `json:"min_topic_peers"`
	MeanTopicPeers float64 `json:"mean_topic_peers"`
	Sent           int     `json:"sent"`   // by as many daemons, one after the other
	SendS          float64 `json:"send_s"` // the sends took
	AllDelivered   bool    `json:"all_delivered"`
	DeliveryS      float64 `json:"delivery_s"` // first send → every daemon holds every message
	MinHeld        int     `json:"min_held"`   // fewest messages a daemon holds at the end
	// Memory of all the daemons once delivered: RSS counts the pages they
	// share (the binary) once per daemon, PSS divides them among them.
	TotalRSSMB     float64 `json:"total_rss_mb"`
	TotalRSSAnonMB float64 `json:"total_rss_anon_mb"`
	TotalPSSMB     float64 `json:"total_pss_mb"`
	MeanRSSAnonMB  float64 `json:"mean_rss_anon_mb"`
}

func (r *manyResult) rows() [][2]string {
	delivered := fmt.Sprintf("yes, %.1f s after the first send (the sends took %.1f s)", r.DeliveryS, r.SendS)
	if !r.AllDelivered {
		delivered = fmt.Sprintf("NO: the fewest held is %d of %d", r.MinHeld, r.Sent)
	}
	return [][2]string{
		{fmt.Sprintf("%d daemons started, %d running at the end", r.Daemons, r.Running), fmt.Sprintf("%.1f s to start all", r.StartS)},
		{"  gossip mesh", fmt.Sprintf("%.1f s after joining; topic peers: fewest %d, mean %.1f", r.MeshS, r.MinTopicPeers, r.MeanTopicPeers)},
		{fmt.Sprintf("  every daemon holds all %d messages", r.Sent), delivered},
		{"  total memory", fmt.Sprintf("RSS %.0f MB (RssAnon %.0f MB, %.1f MB per daemon), PSS %.0f MB", r.TotalRSSMB, r.TotalRSSAnonMB, r.MeanRSSAnonMB, r.TotalPSSMB)},
	}
}

func benchMany(ctx context.Context, b *bench, r *manyResult) error {
	n := b.sizes.manyDaemons
	r.Daemons = n
	start := time.Now()
	ds, err := b.startN(ctx, n)
	if err != nil {
		return err
	}
	defer b.stop(ds...)
	r.StartS = round(time.Since(start).Seconds(), 1)
	const space = "bench-many"
	if err := joinAll(ctx, ds, space); err != nil {
		return err
	}
	wait, _, err := waitMesh(ctx, ds, space, 1, 60*time.Second)
	r.MeshS = round(wait.Seconds(), 1)
	if err != nil {
		return err
	}
	if r.MinTopicPeers, r.MeanTopicPeers, err = topicPeers(ctx, ds, space); err != nil {
		return err
	}
	r.MeanTopicPeers = round(r.MeanTopicPeers, 1)
	k := b.sizes.manyMessages
	first := time.Now()
	for i := range k {
		if _, err := ds[i*n/k].c.Send(ctx, space, api.SendRequest{Content: benchContent(i)}); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		r.Sent++
	}
	r.SendS = round(time.Since(first).Seconds(), 2)
	err = waitFor(ctx, b.sizes.deliverWithin, func() bool {
		least := -1
		for _, d := range ds {
			h, err := held(ctx, d, space)
			if err != nil {
				h = 0
			}
			if least < 0 || h < least {
				least = h
			}
		}
		r.MinHeld = least
		return least >= k
	})
	r.AllDelivered = err == nil
	if r.AllDelivered {
		r.DeliveryS = round(time.Since(first).Seconds(), 2)
	}
	var anon, rss, pss int64
	for _, d := range ds {
		if !d.exited() {
			r.Running++
		}
		m, _ := procMem(d.pid())
		p, _ := procPSS(d.pid())
		anon, rss, pss = anon+m.anon, rss+m.rss, pss+p
	}
	r.TotalRSSAnonMB, r.TotalRSSMB, r.TotalPSSMB = mb(anon), mb(rss), mb(pss)
	r.MeanRSSAnonMB = mb(anon / int64(n))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch {
	case r.Running < n:
		return fmt.Errorf("%d of %d daemons exited", n-r.Running, n)
	case !r.AllDelivered:
		return fmt.Errorf("not every daemon holds every message after %v: the fewest held is %d of %d", b.sizes.deliverWithin, r.MinHeld, k)
	}
	return nil
}

// busyRow says how many of cpus cores the daemons and the bench kept busy,
// and whether that is all of them (the machine saturated).
func busyRow(daemons, bench float64, cpus int) string {
	row := fmt.Sprintf("daemons %.2f, bench %.2f of %d", daemons, bench, cpus)
	if daemons+bench >= saturated*float64(cpus) {
		row += ": saturated, so arrivals wait for a core (the latency above is mostly that wait)"
	}
	return row
}

// saturated is the share of the machine's cores past which the broadcast
// row says the machine was saturated: with every daemon of the space on
// one machine, most of a message's latency there is its wait for a core.
const saturated = 0.9
