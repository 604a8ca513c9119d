package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// Helpers shared by the direct-message and call end-to-end tests.

// freeListen returns a loopback TCP listen multiaddr on a port that was
// free a moment ago, so a daemon can be restarted on the same address.
func freeListen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
}

// poll calls cond every 50 ms until it reports true, failing the test
// after timeout with what and cond's last note.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
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

// goClient returns a Go client of the home's daemon.
func (c cli) goClient() *client.Client { return &client.Client{Home: c.home} }

// pair starts daemons a and b on loopback, b bootstrapping to a, and
// waits until they are connected. bListen is b's listen address.
func pair(t *testing.T, bListen string) (a, b cli, da, db *daemon) {
	t.Helper()
	bin := weftBinary(t)
	a = cli{t, bin, newHome(t)}
	b = cli{t, bin, newHome(t)}
	da = startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	_, aAddrs := a.id()
	db = startDaemon(t, b, "--listen", bListen, "--bootstrap", aAddrs[0])
	bID, _ := b.id()
	a.waitConnected(bID)
	return a, b, da, db
}

// waitConnected waits until the node lists peer id among its connections.
func (c cli) waitConnected(id string) {
	c.t.Helper()
	poll(c.t, 30*time.Second, "a connection to "+id, func() (bool, string) {
		out, errs, code := c.run("peers", "--json")
		if code != 0 {
			return false, errs
		}
		return strings.Contains(out, id), out
	})
}

// jsonLines decodes one T per non-empty line of out.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var list []T
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("decode %q: %v", line, err)
		}
		list = append(list, v)
	}
	return list
}

// inbox runs `weft inbox --json`.
func (c cli) inbox() []api.Message {
	c.t.Helper()
	return jsonLines[api.Message](c.t, c.ok("inbox", "--json"))
}

// outbox runs `weft outbox --json` (with --dead: the dead letters).
func (c cli) outbox(dead bool) []api.Outgoing {
	c.t.Helper()
	args := []string{"outbox", "--json"}
	if dead {
		args = append(args, "--dead")
	}
	return jsonLines[api.Outgoing](c.t, c.ok(args...))
}

// syncBuffer is a bytes.Buffer safe for a process's output copier and the
// test reading it at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a background weft client process (weft handle, weft invoke…).
type proc struct {
	t              *testing.T
	name           string
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error // set before done is closed
}

// startProc starts `weft ARGS…` on the home's daemon; it is stopped (SIGTERM,
// then SIGKILL) when the test ends.
func startProc(t *testing.T, c cli, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: "weft " + strings.Join(args, " "), cmd: c.cmd(args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Logf("%s: %v\nstderr:\n%s", p.name, err, p.stderr.String())
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the process to end, killing it after
// 10s. It returns an error if it had to kill it.
func (p *proc) stop() error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("ignored SIGTERM for 10s; killed")
	}
}

// wait waits up to timeout for the process to end and returns its error.
func (p *proc) wait(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("%s did not end within %v\nstderr:\n%s", p.name, timeout, p.stderr.String())
		return nil
	}
}

// startHandler starts `weft handle ARGS…` on the home's daemon and waits
// until it serves (it prints "serving …" once the daemon registered it).
func startHandler(t *testing.T, c cli, args ...string) *proc {
	t.Helper()
	p := startProc(t, c, append([]string{"handle"}, args...)...)
	poll(t, 20*time.Second, p.name+" to serve", func() (bool, string) {
		if p.exited() {
			t.Fatalf("%s exited: %v\nstderr:\n%s", p.name, p.err, p.stderr.String())
		}
		return strings.Contains(p.stderr.String(), "serving "), p.stderr.String()
	})
	return p
}

// script writes an executable shell script into a temp dir removed when the
// test ends, and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// traceID returns the trace-id field of a traceparent ("00-TRACE-SPAN-FL").
func traceID(t *testing.T, tp string) string {
	t.Helper()
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		t.Fatalf("traceparent %q is not 00-<trace id>-<span id>-<flags>", tp)
	}
	return parts[1]
}
