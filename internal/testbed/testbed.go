// Package testbed runs tests against real weft processes: it builds the
// weft binary (and an example's own binary) once per test process, starts
// `weft daemon` processes on 127.0.0.1 in temporary homes, runs weft client
// commands and other processes (agents) against them, and stops and
// removes everything when the test ends. The end-to-end tests of cmd/weft
// and the examples' tests use it.
package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
)

// WeftPackage is the weft binary's package, which Weft builds.
const WeftPackage = "github.com/weftmesh/weft/cmd/weft"

var (
	mu     sync.Mutex
	binDir string
	built  = map[string]string{} // package → binary
)

// Main runs the tests and removes the binaries they built. Call it from
// TestMain: func TestMain(m *testing.M) { testbed.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	mu.Unlock()
	os.Exit(code)
}

// Build builds the main package pkg (an import path, e.g.
// "github.com/weftmesh/weft/examples/swarm") once per test process and
// returns the binary's path. With -short it skips the test: tests that run
// real processes are not short.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real weft processes")
	}
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	if binDir == "" {
		d, err := os.MkdirTemp("", "weft-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = d
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

// Weft builds the weft binary and returns its path.
func Weft(t testing.TB) string { return Build(t, WeftPackage) }

// Home returns a new empty directory for a weft home, removed when the test
// ends. It is under os.TempDir, not t.TempDir, whose long paths would not
// fit the daemon's Unix socket path.
func Home(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "weft-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// FreeListen returns a loopback TCP listen multiaddr on a port that was
// free a moment ago, so a daemon can be restarted on the same address. The
// port is below the kernel's ephemeral range, which every bind to port 0
// and every outgoing connection draws from: a port from that range, free a
// moment ago, can be taken by any other test's daemon or dial before the
// daemon binds it (CI saw "the port is in use" so).
func FreeListen(t testing.TB) string {
	t.Helper()
	lo, hi := 20000, ephemeralLow()-1
	for try := range 40 {
		port := lo + rand.IntN(max(hi-lo+1, 1))
		if hi-lo < 1000 || try >= 20 {
			port = 0 // little room below the ephemeral range: the kernel's
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		return fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
	}
	t.Fatal("no free loopback TCP port")
	return ""
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralLow() int {
	const def = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return def
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return def
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return def
	}
	return n
}

// CLI runs weft commands on one home, as a user's shell would (WEFT_HOME
// set).
type CLI struct {
	T    testing.TB
	Bin  string // the weft binary
	Home string
}

// NewCLI returns a CLI of the weft binary on a new home.
func NewCLI(t testing.TB) CLI {
	t.Helper()
	return CLI{T: t, Bin: Weft(t), Home: Home(t)}
}

// Env is the environment entry that points weft at the home.
func (c CLI) Env() string { return "WEFT_HOME=" + c.Home }

// Command returns the command `weft ARGS…` on the home, not started.
func (c CLI) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(os.Environ(), c.Env())
	return cmd
}

// Run runs `weft ARGS…` and returns its stdout, stderr and exit code. It
// fails the test if the command cannot be run at all.
func (c CLI) Run(args ...string) (stdout, stderr string, code int) {
	c.T.Helper()
	stdout, stderr, code, _ = c.run(context.Background(), args)
	return stdout, stderr, code
}

// OK runs `weft ARGS…`, which must succeed, and returns its stdout.
func (c CLI) OK(args ...string) string {
	c.T.Helper()
	out, errs, code := c.Run(args...)
	if code != 0 {
		c.T.Fatalf("weft %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// RunWithin is Run for a command that must end within d (the test fails if
// it does not); it also returns how long the command took.
func (c CLI) RunWithin(d time.Duration, args ...string) (stdout, stderr string, code int, took time.Duration) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stdout, stderr, code, took = c.run(ctx, args)
	if ctx.Err() != nil {
		c.T.Fatalf("weft %s did not end within %v (stderr %q)", strings.Join(args, " "), d, stderr)
	}
	return stdout, stderr, code, took
}

func (c CLI) run(ctx context.Context, args []string) (stdout, stderr string, code int, took time.Duration) {
	c.T.Helper()
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Env = append(os.Environ(), c.Env())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.T.Fatalf("weft %v: %v", args, err)
	}
	return out.String(), errb.String(), code, took
}

// Start starts `weft ARGS…` (weft handle, weft invoke…) in the background;
// it is stopped when the test ends.
func (c CLI) Start(args ...string) *Proc {
	c.T.Helper()
	return Run(c.T, nil, []string{c.Env()}, c.Bin, args...)
}

// ErrKilled is returned by Stop for a process that ignored SIGTERM for the
// grace period and was killed.
var ErrKilled = errors.New("ignored SIGTERM; killed")

// process is a started command and how it ended.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's, set before done closes
}

func (p *process) start(t testing.TB) {
	t.Helper()
	p.done = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
}

// Exited reports whether the process has ended.
func (p *process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid returns the process's ID (to read its /proc entries, say).
func (p *process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (not its group), e.g. os.Interrupt to
// act as a Ctrl-C.
func (p *process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process (not its group) with SIGKILL, as a crash would,
// and waits for it to be gone.
func (p *process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM (to the process group, if the process leads one),
// waits for the process to end and returns how it ended: nil for exit
// status 0, cmd.Wait's error otherwise, ErrKilled if it was still running
// after grace and was killed.
func (p *process) stop(grace time.Duration) error {
	if p.Exited() {
		return p.err
	}
	pid := p.cmd.Process.Pid
	if p.cmd.SysProcAttr != nil && p.cmd.SysProcAttr.Setpgid {
		pid = -pid
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-p.done
		return ErrKilled
	}
}

// Daemon is a running `weft daemon` process with its own home.
type Daemon struct {
	Home   string
	ID     string   // peer ID
	Addrs  []string // full multiaddrs (…/p2p/ID)
	Client *client.Client
	Log    *Buffer // the daemon's stdout and stderr

	t testing.TB
	process
}

// Start starts a daemon on a new home, listening on a random 127.0.0.1 TCP
// port, without mDNS, with extra daemon flags args, and waits until its API
// answers.
func Start(t testing.TB, args ...string) *Daemon {
	t.Helper()
	return StartIn(t, Home(t), append([]string{"--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0"}, args...)...)
}

// StartIn starts `weft daemon ARGS…` on home (no default flags) and waits
// until its API answers. A home may be started again once its daemon is
// stopped: it keeps its identity and messages.
func StartIn(t testing.TB, home string, args ...string) *Daemon {
	t.Helper()
	return StartVia(t, nil, home, args...)
}

// StartVia is StartIn for a daemon run through a wrapper: wrap returns the
// command line that runs a program with its arguments elsewhere, e.g. in a
// network namespace (netns.Host.Argv). A nil wrap runs it here.
func StartVia(t testing.TB, wrap func(name string, args ...string) []string, home string, args ...string) *Daemon {
	t.Helper()
	bin := Weft(t)
	d := &Daemon{Home: home, Client: &client.Client{Home: home}, Log: &Buffer{}, t: t}
	argv := append([]string{bin, "daemon"}, args...)
	if wrap != nil {
		argv = wrap(bin, argv[1:]...)
	}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = append(os.Environ(), "WEFT_HOME="+home)
	d.cmd.Stdout, d.cmd.Stderr = d.Log, d.Log
	d.start(t)
	t.Cleanup(func() { _ = d.Stop() })
	Poll(t, 30*time.Second, "daemon "+home+" to answer", func() (bool, string) {
		if d.Exited() {
			t.Fatalf("daemon exited: %v\n%s", d.err, d.Log)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := d.Client.Node(ctx)
		if err != nil {
			return false, err.Error()
		}
		d.ID, d.Addrs = n.ID, n.Addrs
		return true, ""
	})
	return d
}

// CLI returns a CLI of the weft binary on the daemon's home, for test t.
func (d *Daemon) CLI(t testing.TB) CLI {
	t.Helper()
	return CLI{T: t, Bin: Weft(t), Home: d.Home}
}

// Stop stops the daemon with SIGTERM (SIGKILL after 20 s), waits for it,
// and returns how it ended: nil for a clean exit, the exit error, or
// ErrKilled. Stopping a daemon that has ended returns how it ended.
func (d *Daemon) Stop() error { return d.stop(20 * time.Second) }

// Mesh starts n daemons (see Start), each bootstrapping to the first, and
// waits until the first is connected to all others.
func Mesh(t testing.TB, n int, args ...string) []*Daemon {
	t.Helper()
	first := Start(t, args...)
	ds := []*Daemon{first}
	for i := 1; i < n; i++ {
		ds = append(ds, Start(t, append([]string{"--bootstrap", first.Addrs[0]}, args...)...))
	}
	for _, d := range ds[1:] {
		first.WaitConnected(d.ID)
	}
	return ds
}

// WaitConnected waits until the daemon lists peer among its connections.
func (d *Daemon) WaitConnected(peer string) {
	d.t.Helper()
	Poll(d.t, 30*time.Second, "a connection to "+peer, func() (bool, string) {
		ps, err := d.Client.Peers(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.ID == peer {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d peers", len(ps))
	})
}

// Proc is a running process (an example agent, a weft client command).
type Proc struct {
	Name           string
	Stdout, Stderr *Buffer

	t testing.TB
	process
}

// Run starts bin with args in the environment env (added to the test's
// own), in a process group of its own; it is stopped when the test ends.
// stdin may be nil.
func Run(t testing.TB, stdin io.Reader, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: filepath.Base(bin) + " " + strings.Join(args, " "), Stdout: &Buffer{}, Stderr: &Buffer{}, t: t}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = stdin, p.Stdout, p.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.start(t)
	t.Cleanup(func() {
		if err := p.Stop(); errors.Is(err, ErrKilled) {
			t.Logf("%s: %v\nstderr:\n%s", p.Name, err, p.Stderr)
		}
	})
	return p
}

// Wait waits up to timeout for the process to end and returns how it
// ended; the test fails if it does not end in time.
func (p *Proc) Wait(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("%s did not end within %v\nstdout:\n%s\nstderr:\n%s", p.Name, timeout, p.Stdout, p.Stderr)
		return nil
	}
}

// Stop ends the process (SIGTERM to its group, SIGKILL after 10 s) and
// returns how it ended: nil for exit status 0, the exit error, or
// ErrKilled.
func (p *Proc) Stop() error { return p.stop(10 * time.Second) }

// WaitOutput waits until the process's stdout contains s and returns it.
// The test fails if the process ends first.
func (p *Proc) WaitOutput(timeout time.Duration, s string) string {
	p.t.Helper()
	return p.waitIn(p.Stdout, "stdout", timeout, s)
}

// WaitStderr waits until the process's stderr contains s and returns it.
// The test fails if the process ends first.
func (p *Proc) WaitStderr(timeout time.Duration, s string) string {
	p.t.Helper()
	return p.waitIn(p.Stderr, "stderr", timeout, s)
}

func (p *Proc) waitIn(b *Buffer, name string, timeout time.Duration, s string) string {
	p.t.Helper()
	Poll(p.t, timeout, fmt.Sprintf("%q on the %s of %s", s, name, p.Name), func() (bool, string) {
		if strings.Contains(b.String(), s) {
			return true, ""
		}
		if p.Exited() {
			p.t.Fatalf("%s exited (%v) before printing %q\nstdout:\n%s\nstderr:\n%s", p.Name, p.err, s, p.Stdout, p.Stderr)
		}
		return false, "stdout: " + p.Stdout.String() + "\nstderr: " + p.Stderr.String()
	})
	return b.String()
}

// Poll calls cond every 50 ms until it reports true; after timeout it fails
// the test with what and cond's last note.
func Poll(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, note := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last: %s)", timeout, what, note)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe for a process writing and a test reading.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// DirHolds reports whether any file under dir holds the bytes marker: how
// the tests show that a store, a log or a home keeps no plaintext of what
// it should not.
func DirHolds(t testing.TB, dir string, marker []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || bytes.Contains(b, marker)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
