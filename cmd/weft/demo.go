package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// runDemo starts a small mesh of real daemons on 127.0.0.1, each in a
// temporary home, has them join a space and talk, prints what every node
// sees, and cleans everything up.
func runDemo(ctx context.Context, e *env, args []string) error {
	fs := e.flags("demo")
	nodes := fs.Int("nodes", 3, "how many daemons to start (2..8)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *nodes < 2 || *nodes > 8 {
		return usageError{"--nodes must be 2..8"}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "weft-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	say := func(format string, a ...any) { fmt.Fprintf(e.stdout, format+"\n", a...) }

	var daemons []*demoDaemon
	defer func() {
		for _, d := range daemons {
			d.stop()
		}
		if len(daemons) > 0 {
			say("stopped %d daemons; removed %s", len(daemons), dir)
		}
	}()
	var first api.Node
	for i := range *nodes {
		name := fmt.Sprintf("node-%d", i+1)
		var boot []string
		if i > 0 {
			boot = first.Addrs[:1]
		}
		d, err := startDemoDaemon(ctx, self, filepath.Join(dir, name), name, boot)
		if err != nil {
			return err
		}
		daemons = append(daemons, d)
		if i == 0 {
			first = d.info
			say("%s  started  %s  (first node: the others bootstrap from it)", name, d.info.ID)
		} else {
			say("%s  started  %s  bootstrap → node-1", name, d.info.ID)
		}
	}

	const space = "demo"
	for _, d := range daemons {
		if _, err := d.c.Join(ctx, space); err != nil {
			return fmt.Errorf("%s join: %w", d.name, err)
		}
	}
	say("all %d joined space %q; waiting for the gossip mesh to form…", len(daemons), space)
	if err := waitFor(ctx, 30*time.Second, func() bool {
		for _, d := range daemons {
			sps, err := d.c.Spaces(ctx)
			if err != nil || len(sps) == 0 || sps[0].Peers < len(daemons)-1 {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("space mesh did not form: %w", err)
	}

	// Every node follows the space and prints what it receives.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := make(map[string]int)
	for _, d := range daemons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.c.Follow(fctx, space, "", func(m api.Message) error {
				mu.Lock()
				defer mu.Unlock()
				seen[d.name]++
				say("  %s  ← %-7s %s", d.name, nameOf(daemons, m.From)+":", textOf(m))
				return nil
			})
		}()
	}
	lines := []string{
		"hello mesh — I am %s. Anyone here can review Go code?",
		"%s here: I can. No server between us, just libp2p.",
		"%s: I'll write the tests. Every message is signed and stored on each of us.",
	}
	for i, d := range daemons {
		text := fmt.Sprintf(lines[i%len(lines)], d.name)
		m, err := d.c.SendText(ctx, space, text)
		if err != nil {
			return fmt.Errorf("%s send: %w", d.name, err)
		}
		say("%s  → sent %s", d.name, m.ID[:12]+"…")
	}
	want := len(daemons)
	err = waitFor(ctx, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range daemons {
			if seen[d.name] < want {
				return false
			}
		}
		return true
	})
	stopFollow()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("not every node received every message: %w", err)
	}
	say("every node holds all %d messages, each signed by its sender and stored in its own Badger.", want)
	return nil
}

type demoDaemon struct {
	name string
	cmd  *exec.Cmd
	c    *client.Client
	info api.Node
	done chan struct{}
}

func startDemoDaemon(ctx context.Context, self, home, name string, boot []string) (*demoDaemon, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(home, "daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"daemon", "--home", home, "--no-mdns", "--log-level", "warn",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1"}
	for _, b := range boot {
		args = append(args, "--bootstrap", b)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "WEFT_HOME="+home)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &demoDaemon{name: name, cmd: cmd, c: &client.Client{Home: home}, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	err = waitFor(ctx, 30*time.Second, func() bool {
		select {
		case <-d.done:
			return true
		default:
		}
		d.info, err = d.c.Node(ctx)
		return err == nil
	})
	select {
	case <-d.done:
		log, _ := os.ReadFile(filepath.Join(home, "daemon.log"))
		return nil, fmt.Errorf("%s exited: %s", name, strings.TrimSpace(string(log)))
	default:
	}
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("%s did not come up: %w", name, err)
	}
	return d, nil
}

func (d *demoDaemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// waitFor polls cond every 50 ms until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func nameOf(ds []*demoDaemon, id string) string {
	for _, d := range ds {
		if d.info.ID == id {
			return d.name
		}
	}
	return id
}

func textOf(m api.Message) string {
	var c struct{ Text string }
	if err := json.Unmarshal(m.Content, &c); err == nil && c.Text != "" {
		return c.Text
	}
	return string(m.Content)
}
