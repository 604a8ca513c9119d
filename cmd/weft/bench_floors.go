package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/weftmesh/weft/mesh"
)

// 8. Floors: what this machine allows with nothing of weft in the way.
// The HTTP and Unix socket round trips are between two processes (the
// bench and a peer it starts: itself, see serveFloorPeer), as between an
// agent and its daemon; the rest runs in the bench process itself (one Go
// runtime), so it is a lower bound of what any program built on the same
// parts pays here. To read weft's figures against: a durable send cannot beat the disk's fsync plus a round trip
// of its API plus a signature; a broadcast cannot beat gossipsub's own
// cost per message.

type floorsResult struct {
	benchCommon
	// SignUs and VerifyUs are crypto/ed25519's Sign and Verify of a
	// 300-byte message, one at a time on one core.
	SignUs   float64 `json:"ed25519_sign_us"`
	VerifyUs float64 `json:"ed25519_verify_us"`
	// HTTP is net/http's server (in the floors' peer) and client (in the
	// bench) over a Unix socket: a POST of a send's size to a handler that
	// reads it and answers 300 bytes. The round trip of one client, one
	// request at a time, and requests/s with 1 and 8 clients.
	HTTP      benchLatency `json:"http_round_trip"`
	HTTP1PerS float64      `json:"http_one_client_per_s"`
	HTTP8PerS float64      `json:"http_eight_clients_per_s"`
	// HTTP8CPUUs is the CPU time per request with 8 clients, of both
	// processes: server and clients together.
	HTTP8CPUUs float64 `json:"http_eight_clients_cpu_us"`
	// Fdatasync is writing 4 KiB into a file that does not grow and
	// fdatasyncing it: the least a durable write-ahead log pays per sync
	// (the run's fsync figure appends, so its file grows).
	Fdatasync benchLatency `json:"fdatasync"`
	// SendCeilingPerS is what one client's durable sends cannot exceed
	// here: one per fdatasync + HTTP round trip + signature (p50s), with
	// no other work at all.
	SendCeilingPerS float64 `json:"send_ceiling_one_client_per_s"`
	// Stream is a libp2p stream round trip between two hosts in the bench
	// process (TCP on 127.0.0.1, Noise, yamux): 64 bytes each way on a
	// stream kept open.
	Stream benchLatency `json:"libp2p_stream_round_trip"`
	// Unix is a round trip of 64 bytes each way on a Unix socket
	// connection kept open between the bench and the floors' peer (a
	// handler agent's leg of an invoke: the call comes on its event
	// stream, the answer goes back on a kept connection).
	Unix benchLatency `json:"unix_round_trip"`
	// InvokeFloorMs is what an invoke through two daemons cannot beat
	// here: the caller's API round trip, a stream round trip between the
	// daemons and one to the handler agent (p50s).
	InvokeFloorMs float64 `json:"invoke_floor_ms"`
	// Gossip is gossipsub alone at the broadcast scenario's rates.
	Gossip []gossipFloorRun `json:"gossip"`
	// Catchup is Badger alone storing and reading back the catchup
	// scenario's messages, and the least a late joiner of them costs here.
	Catchup catchupFloorRun `json:"catchup"`
}

// gossipFloorRun is one rate of the gossip floor: Hosts libp2p hosts in
// the bench process (TCP on 127.0.0.1, Noise, yamux), every one connected
// to every other, in one gossipsub topic with weft's options
// (mesh.PubSubOptions) and nothing else: no validation, no store, no
// API. Publishers send Bytes-byte messages at TargetPerS for the
// broadcast scenario's time.
type gossipFloorRun struct {
	Hosts        int          `json:"hosts"`
	Bytes        int          `json:"bytes"`
	TargetPerS   int          `json:"target_per_s"`
	Publishers   int          `json:"publishers"`
	Sent         int          `json:"sent"`
	AchievedPerS float64      `json:"achieved_per_s"`
	Expected     int          `json:"expected"` // sent × (hosts − 1)
	Arrived      int          `json:"arrived"`  // within the grace period
	Latency      benchLatency `json:"latency"`  // publish → arrival
	// CPUPerMsgUs is the bench process's CPU time over the run (every
	// host's: publishing, forwarding, receiving) divided by the messages
	// that arrived.
	CPUPerMsgUs float64 `json:"cpu_per_msg_us"`
}

func (r *floorsResult) rows() [][2]string {
	rows := [][2]string{
		{"ed25519 sign / verify (crypto/ed25519, one core)", fmt.Sprintf("%.1f / %.1f µs", r.SignUs, r.VerifyUs)},
		{"bare net/http between 2 processes (Unix socket), 1 client", fmt.Sprintf("%s; %s req/s", r.HTTP, fmtCount(r.HTTP1PerS))},
		{"bare net/http between 2 processes, 8 clients", fmt.Sprintf("%s req/s; %.0f µs CPU per request", fmtCount(r.HTTP8PerS), r.HTTP8CPUUs)},
		{"fdatasync of 4 KiB in a file that does not grow", r.Fdatasync.String()},
		{"so 1 client's durable sends ≤ 1 / (fdatasync + round trip + sign)", fmtCount(r.SendCeilingPerS) + "/s"},
		{"bare libp2p stream round trip (64 B, a kept stream, 1 process)", r.Stream.String()},
		{"bare Unix socket round trip between 2 processes (64 B, kept)", r.Unix.String()},
		{"so an invoke ≥ API round trip + 2 stream round trips", fmt.Sprintf("%s ms", fmtMs(r.InvokeFloorMs))},
		{fmt.Sprintf("bare Badger (weft's options): store %s messages of %d B, 2 keys each", fmtCount(float64(r.Catchup.Messages)), r.Catchup.Bytes),
			fmt.Sprintf("%.2f s, %.1f µs CPU each; read each back by its key %.1f µs", r.Catchup.StoreS, r.Catchup.StoreCPUUs, r.Catchup.ReadCPUUs)},
		{fmt.Sprintf("so a late joiner of %s ≥ (verify + store + read) over the cores", fmtCount(float64(r.Catchup.Messages))), fmt.Sprintf("%.2f s", r.Catchup.FloorS)},
	}
	for _, g := range r.Gossip {
		rows = append(rows, [2]string{
			fmt.Sprintf("bare gossipsub, %d hosts, %d B, %s msg/s asked", g.Hosts, g.Bytes, fmtCount(float64(g.TargetPerS))),
			fmt.Sprintf("%s/s reached, %s of %s arrived; %s; %.0f µs CPU per arrival",
				fmtCount(g.AchievedPerS), fmtCount(float64(g.Arrived)), fmtCount(float64(g.Expected)), g.Latency, g.CPUPerMsgUs),
		})
	}
	return rows
}

func benchFloors(ctx context.Context, b *bench, r *floorsResult) error {
	r.SignUs, r.VerifyUs = ed25519Floor(2000)
	var err error
	peer, err := startFloorPeer(b.self, b.root)
	if err != nil {
		return err
	}
	defer peer.stop()
	if r.HTTP, r.HTTP1PerS, r.HTTP8PerS, r.HTTP8CPUUs, err = httpFloor(ctx, filepath.Join(peer.dir, floorHTTPSock), peer.cmd.Process.Pid, b.sizes.sendFor); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	if r.Fdatasync, err = fdatasyncLatency(b.root, 200); err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	if per := r.Fdatasync.P50Ms + r.HTTP.P50Ms + r.SignUs/1000; per > 0 {
		r.SendCeilingPerS = round(1000/per, 0)
	}
	pings := b.sizes.healthPings * 10
	if r.Stream, err = streamFloor(ctx, pings); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if r.Unix, err = unixFloor(filepath.Join(peer.dir, floorEchoSock), pings); err != nil {
		return fmt.Errorf("unix: %w", err)
	}
	r.InvokeFloorMs = round(r.HTTP.P50Ms+r.Stream.P50Ms+r.Unix.P50Ms, 3)
	if r.Catchup, err = catchupFloor(b.root, b.sizes.catchup, r.VerifyUs, runtime.NumCPU()); err != nil {
		return fmt.Errorf("catchup: %w", err)
	}
	for _, rate := range b.sizes.bcastRates {
		g, err := gossipFloor(ctx, b.sizes.bcastDaemons, rate, b.sizes.bcastFor, b.sizes.bcastGrace)
		r.Gossip = append(r.Gossip, g)
		if err != nil {
			return fmt.Errorf("gossip at %d msg/s: %w", rate, err)
		}
	}
	return nil
}

// ed25519Floor returns Sign's and Verify's mean time in µs over n each.
func ed25519Floor(n int) (sign, verify float64) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	msg := make([]byte, 300)
	sigs := make([][]byte, n)
	t := time.Now()
	for i := range n {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		sigs[i] = ed25519.Sign(priv, msg)
	}
	sign = float64(time.Since(t).Nanoseconds()) / float64(n) / 1000
	t = time.Now()
	for i := range n {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if !ed25519.Verify(pub, msg, sigs[i]) {
			panic("ed25519: a signature just made does not verify")
		}
	}
	verify = float64(time.Since(t).Nanoseconds()) / float64(n) / 1000
	return round(sign, 1), round(verify, 1)
}

// httpFloor times a POST of a send's size to the bare net/http server of
// the floors' peer at sock: one client's round trips (one at a time, for
// dur), then requests/s with 1 and 8 clients for dur each, and the CPU
// per request with 8 of both processes (peer is the server's PID).
func httpFloor(ctx context.Context, sock string, peer int, dur time.Duration) (rt benchLatency, one, eight, eightCPUUs float64, err error) {
	body := benchContent(0)
	newClient := func() *http.Client {
		return &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
			MaxIdleConnsPerHost: 1,
		}}
	}
	post := func(c *http.Client) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://floor/v1/spaces/s/messages", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}
	// rate runs n clients for dur and returns requests/s, and with one
	// client each request's round trip.
	rate := func(n int) (float64, []time.Duration, error) {
		var done atomic.Int64
		var lats []time.Duration
		end := time.Now().Add(dur)
		start := time.Now()
		err := parallel(n, n, func(int) error {
			c := newClient()
			defer c.CloseIdleConnections()
			for time.Now().Before(end) && ctx.Err() == nil {
				t := time.Now()
				if err := post(c); err != nil {
					return err
				}
				if n == 1 {
					lats = append(lats, time.Since(t))
				}
				done.Add(1)
			}
			return nil
		})
		return perSecond(int(done.Load()), time.Since(start)), lats, err
	}
	one, lats, err := rate(1)
	if err != nil {
		return rt, 0, 0, 0, err
	}
	self0, _ := procCPU(os.Getpid())
	peer0, _ := procCPU(peer)
	eight, _, err = rate(8)
	self1, _ := procCPU(os.Getpid())
	peer1, _ := procCPU(peer)
	if eight > 0 {
		eightCPUUs = round(float64((self1-self0+peer1-peer0).Microseconds())/(eight*dur.Seconds()), 1)
	}
	return latencies(lats), one, eight, eightCPUUs, err
}

// floorPeerEnv, set to a directory, has the weft binary serve the floors'
// peer there instead of running a command (see serveFloorPeer): weft
// bench starts itself so, for round trips between two processes, as an
// agent and its daemon make them.
const floorPeerEnv = "WEFT_BENCH_FLOOR_PEER"

// The floors' peer's sockets, in its directory.
const (
	floorHTTPSock = "http.sock" // a bare net/http server
	floorEchoSock = "echo.sock" // an echo of one connection
)

// serveFloorPeer serves, in dir, a bare net/http server whose handler
// reads a request's body and answers 300 bytes, and an echo of the first
// connection to its echo socket, until its standard input ends (weft
// bench closes it when done, and the kernel when weft bench dies); it
// returns the exit code.
func serveFloorPeer(dir string, stdin io.Reader, stderr io.Writer) int {
	hl, err := net.Listen("unix", filepath.Join(dir, floorHTTPSock))
	if err != nil {
		fmt.Fprintf(stderr, "weft: floor peer: %v\n", err)
		return 1
	}
	el, err := net.Listen("unix", filepath.Join(dir, floorEchoSock))
	if err != nil {
		hl.Close()
		fmt.Fprintf(stderr, "weft: floor peer: %v\n", err)
		return 1
	}
	defer el.Close()
	answer := bytes.Repeat([]byte{'a'}, 300)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = srv.Serve(hl) }()
	defer srv.Close()
	go func() {
		c, err := el.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	_, _ = io.Copy(io.Discard, stdin)
	return 0
}

// floorPeer is a running floors' peer.
type floorPeer struct {
	dir   string
	cmd   *exec.Cmd
	stdin io.Closer
}

// startFloorPeer starts the weft binary self as the floors' peer in a new
// directory under root, and waits until it serves.
func startFloorPeer(self, root string) (*floorPeer, error) {
	dir, err := os.MkdirTemp(root, "floor-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorPeerEnv+"="+dir)
	cmd.SysProcAttr = benchProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &floorPeer{dir: dir, cmd: cmd, stdin: stdin}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, e1 := os.Stat(filepath.Join(dir, floorHTTPSock))
		_, e2 := os.Stat(filepath.Join(dir, floorEchoSock))
		if e1 == nil && e2 == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("the floors' peer did not serve within 10 s: %s", stderr.String())
		}
	}
}

// stop ends the peer (it exits when its standard input ends; killed if
// it has not within 5 s) and removes its directory.
func (p *floorPeer) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(p.dir)
}

// fdatasyncLatency writes 4 KiB into a preallocated file in dir, at the
// next 4 KiB each time (so the file never grows), and fdatasyncs it, n
// times.
func fdatasyncLatency(dir string, n int) (benchLatency, error) {
	f, err := os.CreateTemp(dir, "fdatasync-")
	if err != nil {
		return benchLatency{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const block, blocks = 4096, 1024
	if _, err := f.Write(make([]byte, block*blocks)); err != nil {
		return benchLatency{}, err
	}
	if err := f.Sync(); err != nil {
		return benchLatency{}, err
	}
	buf := make([]byte, block)
	lats := make([]time.Duration, 0, n)
	for i := range n {
		buf[0] = byte(i)
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i%blocks)*block); err != nil {
			return benchLatency{}, err
		}
		if err := fdatasync(f); err != nil {
			return benchLatency{}, err
		}
		lats = append(lats, time.Since(t))
	}
	return latencies(lats), nil
}

// unixFloor times n round trips of 64 bytes on one connection to the
// echo of the floors' peer at sock.
func unixFloor(sock string, n int) (benchLatency, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return benchLatency{}, err
	}
	defer c.Close()
	return pingPong(c, n)
}

// pingPong times n round trips of 64 bytes on rw, an echo, after 50 to
// warm up.
func pingPong(rw io.ReadWriter, n int) (benchLatency, error) {
	buf := make([]byte, 64)
	lats := make([]time.Duration, 0, n)
	for i := range n + 50 {
		t := time.Now()
		if _, err := rw.Write(buf); err != nil {
			return benchLatency{}, err
		}
		if _, err := io.ReadFull(rw, buf); err != nil {
			return benchLatency{}, err
		}
		if i >= 50 {
			lats = append(lats, time.Since(t))
		}
	}
	return latencies(lats), nil
}

// floorHost is a libp2p host as the floors use them: TCP on 127.0.0.1,
// Noise, yamux.
func floorHost() (host.Host, error) {
	return libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	)
}

// streamFloor times n round trips of 64 bytes on one stream between two
// hosts.
func streamFloor(ctx context.Context, n int) (benchLatency, error) {
	a, err := floorHost()
	if err != nil {
		return benchLatency{}, err
	}
	defer a.Close()
	b, err := floorHost()
	if err != nil {
		return benchLatency{}, err
	}
	defer b.Close()
	const proto = "/weft-bench/echo/1"
	b.SetStreamHandler(proto, func(s network.Stream) {
		defer s.Close()
		_, _ = io.Copy(s, s)
	})
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		return benchLatency{}, err
	}
	s, err := a.NewStream(ctx, b.ID(), proto)
	if err != nil {
		return benchLatency{}, err
	}
	defer s.Reset()
	return pingPong(s, n)
}

// gossipFloor runs gossipsub alone (see gossipFloorRun) with n hosts at
// rate msg/s for dur, and waits up to grace after the last publish for
// arrivals.
func gossipFloor(ctx context.Context, n, rate int, dur, grace time.Duration) (gossipFloorRun, error) {
	const size = 400 // about a broadcast scenario message's wire size
	total := int(float64(rate) * dur.Seconds())
	run := gossipFloorRun{Hosts: n, Bytes: size, TargetPerS: rate, Publishers: min(n, max(1, rate/250))}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	hosts := make([]host.Host, n)
	defer func() {
		for _, h := range hosts {
			if h != nil {
				h.Close()
			}
		}
	}()
	for i := range hosts {
		h, err := floorHost()
		if err != nil {
			return run, err
		}
		hosts[i] = h
	}
	for i, a := range hosts {
		for _, c := range hosts[i+1:] {
			if err := a.Connect(ctx, peer.AddrInfo{ID: c.ID(), Addrs: c.Addrs()}); err != nil {
				return run, err
			}
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	topics := make([]*pubsub.Topic, n)
	var (
		mu    sync.Mutex
		lats  []time.Duration
		seen  = make([]map[uint32]bool, n)
		wg    sync.WaitGroup
		count atomic.Int64
	)
	defer wg.Wait()
	defer cancel()
	for i, h := range hosts {
		ps, err := pubsub.NewGossipSub(ctx, h, mesh.PubSubOptions(quiet)...)
		if err != nil {
			return run, err
		}
		if topics[i], err = ps.Join("weft-bench-floor"); err != nil {
			return run, err
		}
		sub, err := topics[i].Subscribe()
		if err != nil {
			return run, err
		}
		seen[i] = make(map[uint32]bool)
		wg.Go(func() {
			defer sub.Cancel()
			for {
				m, err := sub.Next(ctx)
				if err != nil {
					return
				}
				if m.ReceivedFrom == h.ID() || len(m.Data) < 12 {
					continue // its own
				}
				now := time.Now()
				seq := binary.LittleEndian.Uint32(m.Data[8:])
				mu.Lock()
				if !seen[i][seq] {
					seen[i][seq] = true
					lats = append(lats, now.Sub(time.Unix(0, int64(binary.LittleEndian.Uint64(m.Data)))))
					count.Add(1)
				}
				mu.Unlock()
			}
		})
	}
	// Every host in every other's topic view, and a heartbeat or two for
	// the meshes.
	deadline := time.Now().Add(30 * time.Second)
	for _, t := range topics {
		for len(t.ListPeers()) < n-1 {
			if time.Now().After(deadline) {
				return run, fmt.Errorf("a host sees %d of %d topic peers after 30 s", len(t.ListPeers()), n-1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second)

	cpu0, _ := procCPU(os.Getpid())
	var next, sent atomic.Int64
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	err := parallel(run.Publishers, run.Publishers, func(p int) error {
		for {
			i := next.Add(1) - 1
			if i >= int64(total) || time.Since(start) >= dur {
				return nil // all sent, or the time is up (an overloaded run sends fewer)
			}
			data := make([]byte, size) // Publish keeps it until sent to every peer
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
				time.Sleep(wait)
			}
			binary.LittleEndian.PutUint64(data, uint64(time.Now().UnixNano()))
			binary.LittleEndian.PutUint32(data[8:], uint32(i))
			if err := topics[p].Publish(ctx, data); err != nil {
				return err
			}
			sent.Add(1)
		}
	})
	run.Sent = int(sent.Load())
	run.AchievedPerS = round(perSecond(run.Sent, time.Since(start)), 1)
	if err != nil {
		return run, err
	}
	run.Expected = run.Sent * (n - 1)
	end := time.Now().Add(grace)
	for count.Load() < int64(run.Expected) && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	cpu1, _ := procCPU(os.Getpid())
	mu.Lock()
	run.Arrived, run.Latency = len(lats), latencies(lats)
	mu.Unlock()
	if run.Arrived > 0 {
		run.CPUPerMsgUs = round(float64((cpu1-cpu0).Microseconds())/float64(run.Arrived), 1)
	}
	return run, nil
}
