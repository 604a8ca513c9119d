// Package testbed runs the examples' tests against real weft daemons: it
// builds the weft binary (and an example's own binary) once per test
// process, starts `weft daemon` processes on 127.0.0.1 in temporary homes,
// links them into a mesh, runs agent processes, and stops and removes
// everything when the test ends.
package testbed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
)

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
// returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("example tests build and run real daemons")
	}
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	if binDir == "" {
		d, err := os.MkdirTemp("", "weft-examples-bin-")
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
func Weft(t testing.TB) string { return Build(t, "github.com/weftmesh/weft/cmd/weft") }

// Daemon is a running `weft daemon` process with its own home.
type Daemon struct {
	Home   string
	ID     string   // peer ID
	Addrs  []string // full multiaddrs (…/p2p/ID)
	Client *client.Client
	Log    *Buffer // the daemon's stdout and stderr

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a daemon listening on a random 127.0.0.1 TCP port, without
// mDNS, with extra daemon flags args, and waits until its API answers.
func Start(t testing.TB, args ...string) *Daemon {
	t.Helper()
	home, err := os.MkdirTemp("", "weft-example-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return StartIn(t, home, append([]string{"--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0"}, args...)...)
}

// StartIn starts `weft daemon ARGS…` on home (no default flags) and waits
// until its API answers.
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
	d := &Daemon{Home: home, Client: &client.Client{Home: home}, Log: &Buffer{}, t: t, done: make(chan struct{})}
	argv := append([]string{bin, "daemon"}, args...)
	if wrap != nil {
		argv = wrap(bin, argv[1:]...)
	}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = append(os.Environ(), "WEFT_HOME="+home)
	d.cmd.Stdout, d.cmd.Stderr = d.Log, d.Log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.Stop)
	Poll(t, 30*time.Second, "daemon "+home+" to answer", func() (bool, string) {
		select {
		case <-d.done:
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, d.Log)
		default:
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

// Kill kills the daemon with SIGKILL, as a crash or a power cut would, and
// waits for it to be gone.
func (d *Daemon) Kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// Stop stops the daemon with SIGTERM (SIGKILL after 20 s) and waits for it.
func (d *Daemon) Stop() { stop(d.cmd, d.done, 20*time.Second) }

// Mesh starts n daemons, each bootstrapping to the first, and waits until
// the first is connected to all others.
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

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// Run starts bin with args in the environment env (added to the test's
// own); it is stopped when the test ends. stdin may be nil.
func Run(t testing.TB, stdin io.Reader, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: filepath.Base(bin) + " " + strings.Join(args, " "), Stdout: &Buffer{}, Stderr: &Buffer{}, t: t, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = stdin, p.Stdout, p.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { stop(p.cmd, p.done, 10*time.Second) })
	return p
}

// Wait waits up to timeout for the process to end and returns how it ended.
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

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process (not its group), e.g. os.Interrupt to
// act as a Ctrl-C.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop ends the process (SIGTERM to its group, SIGKILL after 10 s).
func (p *Proc) Stop() { stop(p.cmd, p.done, 10*time.Second) }

// WaitOutput waits until the process's stdout contains s and returns it.
func (p *Proc) WaitOutput(timeout time.Duration, s string) string {
	p.t.Helper()
	Poll(p.t, timeout, fmt.Sprintf("%q from %s", s, p.Name), func() (bool, string) {
		if out := p.Stdout.String(); strings.Contains(out, s) {
			return true, ""
		}
		if p.Exited() {
			p.t.Fatalf("%s exited (%v) before printing %q\nstdout:\n%s\nstderr:\n%s", p.Name, p.err, s, p.Stdout, p.Stderr)
		}
		return false, "stdout: " + p.Stdout.String() + "\nstderr: " + p.Stderr.String()
	})
	return p.Stdout.String()
}

func stop(cmd *exec.Cmd, done chan struct{}, grace time.Duration) {
	select {
	case <-done:
		return
	default:
	}
	pid := cmd.Process.Pid
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		pid = -pid
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
	}
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
