package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// bench owns the daemons of a run: it starts them as `weft daemon`
// processes in homes under one temporary directory, samples their memory,
// and stops every one of them (then removes the directory) in close, which
// runs on every way out, Ctrl-C included.
type bench struct {
	self   string // the weft binary
	root   string // temporary dir holding every daemon's home
	sizes  benchSizes
	stderr io.Writer
	// profile, if set, is where each daemon writes its profiles (a
	// directory per daemon, named like its home).
	profile string
	fsync   benchLatency // the run's fsync latency (the floors scenario's)

	stopSampler context.CancelFunc
	sampled     chan struct{}

	mu     sync.Mutex
	live   map[*benchDaemon]bool
	seq    int   // numbers homes
	peak   int64 // largest RssAnon sampled since resetPeak
	closed bool
}

func newBench(self string, sizes benchSizes, stderr io.Writer) (*bench, error) {
	// Homes must be short: a Unix socket path has ~100 bytes.
	root, err := os.MkdirTemp("", "wb-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &bench{self: self, root: root, sizes: sizes, stderr: stderr, live: make(map[*benchDaemon]bool),
		stopSampler: cancel, sampled: make(chan struct{})}
	go b.sample(ctx)
	return b, nil
}

// logf reports progress on stderr.
func (b *bench) logf(format string, a ...any) {
	fmt.Fprintf(b.stderr, "bench: "+format+"\n", a...)
}

// close stops every daemon still running and removes the homes.
func (b *bench) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	var ds []*benchDaemon
	for d := range b.live {
		ds = append(ds, d)
	}
	b.mu.Unlock()
	b.stopSampler()
	<-b.sampled
	b.stop(ds...)
	if err := os.RemoveAll(b.root); err != nil {
		b.logf("cannot remove %s: %v", b.root, err)
	}
}

// benchDaemon is a `weft daemon` process.
type benchDaemon struct {
	name    string
	home    string
	cmd     *exec.Cmd
	c       *client.Client
	info    api.Node
	started time.Time // just before the process was started
	done    chan struct{}
	peak    int64 // largest RssAnon sampled; guarded by bench.mu
}

func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

func (d *benchDaemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// addr is the daemon's first address, to bootstrap from.
func (d *benchDaemon) addr() string { return d.info.Addrs[0] }

// client returns a new client of the daemon: each has its own connections.
func (d *benchDaemon) client() *client.Client { return &client.Client{Home: d.home} }

// start starts a daemon that bootstraps from boot (if any) and waits until
// its API answers.
func (b *bench) start(ctx context.Context, boot ...string) (*benchDaemon, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("bench closed")
	}
	b.seq++
	name := "d" + strconv.Itoa(b.seq)
	b.mu.Unlock()
	home := filepath.Join(b.root, name)
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(home, "daemon.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	// --no-rate-limits: the bench's daemons are one user's own mesh, and
	// the gossip rate limits are for strangers. With them on, a node paces
	// its own agents' posts to one space below the author rate (40/s by
	// default), and the bench would measure that pacing, not the daemon.
	// No quotas either: the page scenario's one sender fills a space with
	// 1,000,000 messages (~840 MB), past the default quota of a sender in
	// a space (64 MiB, about 80,000 of them).
	args := []string{"daemon", "--home", home, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--log-level", "warn", "--no-rate-limits",
		"--sender-quota", "none", "--space-quota", "none"}
	for _, a := range boot {
		args = append(args, "--bootstrap", a)
	}
	if b.profile != "" {
		args = append(args, "--profile", filepath.Join(b.profile, name))
	}
	d := &benchDaemon{name: name, home: home, c: &client.Client{Home: home}, done: make(chan struct{})}
	d.cmd = exec.Command(b.self, args...)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.Env = append(os.Environ(), "WEFT_HOME="+home)
	d.cmd.SysProcAttr = benchProcAttr()
	b.mu.Lock()
	if b.closed { // close ran meanwhile: it would not stop this one
		b.mu.Unlock()
		return nil, errors.New("bench closed")
	}
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	b.live[d] = true
	b.mu.Unlock()
	go func() { _ = d.cmd.Wait(); close(d.done) }()

	err = waitFor(ctx, 60*time.Second, func() bool {
		if d.exited() {
			return true
		}
		var err error
		d.info, err = d.c.Node(ctx)
		return err == nil && len(d.info.Addrs) > 0
	})
	if err == nil && d.exited() {
		err = fmt.Errorf("%s exited: %s", name, tail(filepath.Join(home, "daemon.log")))
	}
	if err != nil {
		b.stop(d)
		return nil, fmt.Errorf("daemon %s did not come up: %w", name, err)
	}
	return d, nil
}

// startN starts n daemons: the first, then the others (8 at a time)
// bootstrapping from it. On error it stops those it started.
func (b *bench) startN(ctx context.Context, n int) ([]*benchDaemon, error) {
	first, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	ds := make([]*benchDaemon, n)
	ds[0] = first
	err = parallel(n-1, 8, func(i int) error {
		d, err := b.start(ctx, first.addr())
		ds[i+1] = d
		return err
	})
	if err != nil {
		b.stop(ds...)
		return nil, err
	}
	return ds, nil
}

// stop stops daemons (nil ones are skipped) at once: SIGTERM, SIGKILL
// after 10 s; then removes their homes.
func (b *bench) stop(ds ...*benchDaemon) {
	var wg sync.WaitGroup
	for _, d := range ds {
		if d == nil {
			continue
		}
		wg.Go(func() {
			b.mu.Lock()
			b.sampleLocked(d) // every daemon is sampled once at least
			b.mu.Unlock()
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(10 * time.Second):
				b.logf("%s (pid %d) ignored SIGTERM for 10 s: killed", d.name, d.pid())
				_ = d.cmd.Process.Kill()
				<-d.done
			}
			b.mu.Lock()
			delete(b.live, d)
			b.mu.Unlock()
			_ = os.RemoveAll(d.home)
		})
	}
	wg.Wait()
}

// tail returns the last lines of a log file, on one line.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// parallel runs fn(0..n-1), at most limit at once, and returns the first
// error.
func parallel(n, limit int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, max(limit, 1))
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// sample records the largest RssAnon of any live daemon every 250 ms.
func (b *bench) sample(ctx context.Context) {
	defer close(b.sampled)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		for d := range b.live {
			b.sampleLocked(d)
		}
		b.mu.Unlock()
	}
}

// sampleLocked records d's RssAnon in the peaks; b.mu is held.
func (b *bench) sampleLocked(d *benchDaemon) {
	if m, err := procMem(d.pid()); err == nil {
		b.peak = max(b.peak, m.anon)
		d.peak = max(d.peak, m.anon)
	}
}

func (b *bench) resetPeak() {
	b.mu.Lock()
	b.peak = 0
	b.mu.Unlock()
}

func (b *bench) peakAnon() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// takePeak returns the largest RssAnon sampled of d since it started or
// since the last takePeak.
func (b *bench) takePeak(d *benchDaemon) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := d.peak
	d.peak = 0
	return p
}

// Readings of /proc (Linux). Elsewhere they fail and the figures stay 0.

// memInfo is a process's memory, in bytes.
type memInfo struct {
	anon, file, rss int64
}

// procMem reads RssAnon, RssFile and VmRSS from /proc/PID/status.
func procMem(pid int) (memInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return memInfo{}, err
	}
	var m memInfo
	m.anon = kbField(b, "RssAnon:")
	m.file = kbField(b, "RssFile:")
	m.rss = kbField(b, "VmRSS:")
	return m, nil
}

// procPSS reads the proportional set size (shared pages divided among the
// processes sharing them) from /proc/PID/smaps_rollup.
func procPSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, err
	}
	return kbField(b, "Pss:"), nil
}

// kbField returns the value in bytes of a "Name:   123 kB" line.
func kbField(b []byte, name string) int64 {
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux platform Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU reads a process's CPU time (user + system) from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after it, where field 3 (state) is f[0].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// cpuOf reads the CPU time of each daemon (0 where it cannot).
func cpuOf(ds []*benchDaemon) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i], _ = procCPU(d.pid())
	}
	return out
}

// loadavg reads the 1, 5 and 15 minute load averages.
func loadavg() ([3]float64, error) {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l, err
	}
	f := strings.Fields(string(b))
	for i := range min(3, len(f)) {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l, nil
}
