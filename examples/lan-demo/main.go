// Command lan-demo shows weft daemons on separate hosts of one LAN finding
// each other with no configuration: it builds a LAN out of Linux network
// namespaces (a bridge and N hosts with their own addresses), runs one
// `weft daemon --home DIR` per host and nothing else, and prints who found
// whom (by mDNS), then the messages of a space flowing between the hosts,
// with delivery latencies. Everything it made is removed at the end.
//
//	sudo go run ./examples/lan-demo [--hosts 4] [--messages 20] [--weft PATH]
//
// It needs root (network namespaces) and iproute2. Nothing leaves the
// machine: the LAN is 10.99.0.0/24 inside namespaces the demo creates.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

func main() {
	hosts := flag.Int("hosts", 4, "hosts on the LAN")
	messages := flag.Int("messages", 20, "messages each host sends")
	weft := flag.String("weft", "", "the weft binary (default: build ./cmd/weft)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *hosts, *messages, *weft); err != nil {
		fmt.Fprintln(os.Stderr, "lan-demo:", err)
		os.Exit(1)
	}
}

// host is one LAN host running a daemon.
type host struct {
	name string
	ns   *netns.Host
	home string
	cmd  *exec.Cmd
	done chan struct{}
	c    *client.Client
	id   string
}

func run(ctx context.Context, n, perHost int, weft string) error {
	if err := netns.Check(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "weft-lan-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if weft == "" {
		weft = filepath.Join(tmp, "weft")
		fmt.Println("building weft…")
		if out, err := exec.Command("go", "build", "-o", weft, "github.com/weftmesh/weft/cmd/weft").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	lan, err := netns.Build(n)
	if err != nil {
		return err
	}
	defer lan.Close()
	fmt.Printf("LAN %s: %d hosts on %s, one bridge, nothing else\n", lan.Net.Name, n, netns.Subnet)

	start := time.Now()
	hs := make([]*host, n)
	defer func() {
		for _, h := range hs {
			if h != nil {
				h.stop()
			}
		}
	}()
	for i, nh := range lan.Hosts {
		h := &host{name: fmt.Sprintf("h%d", i), ns: nh, home: filepath.Join(tmp, fmt.Sprintf("h%d", i)), done: make(chan struct{})}
		h.c = &client.Client{Home: h.home}
		// No flags but the home: mDNS on, every interface, random ports.
		h.cmd = nh.Command(weft, "daemon", "--home", h.home, "--log-level", "warn")
		log, err := os.Create(h.home + ".log")
		if err != nil {
			return err
		}
		defer log.Close()
		h.cmd.Stdout, h.cmd.Stderr = log, log
		if err := h.cmd.Start(); err != nil {
			return err
		}
		go func() { h.cmd.Wait(); close(h.done) }()
		hs[i] = h
	}
	for _, h := range hs {
		if err := until(ctx, func() bool {
			nd, err := h.c.Node(ctx)
			h.id = nd.ID
			return err == nil
		}); err != nil {
			return fmt.Errorf("%s's daemon did not start: %w (log: %s.log)", h.name, err, h.home)
		}
		fmt.Printf("%s  %s  daemon up, %s\n", since(start), h.name, h.ns.Addr)
	}

	// Who found whom: poll each daemon's peers until all know all.
	names := map[string]string{}
	for _, h := range hs {
		names[h.id] = h.name
	}
	found := map[[2]string]bool{}
	var discovered time.Duration
	if err := until(ctx, func() bool {
		all := true
		for _, h := range hs {
			ps, err := h.c.Peers(ctx)
			if err != nil {
				return false
			}
			seen := 0
			for _, p := range ps {
				if other, ok := names[p.ID]; ok {
					seen++
					if k := [2]string{h.name, other}; !found[k] {
						found[k] = true
						fmt.Printf("%s  %s found %s (%s) on the LAN\n", since(start), h.name, other, short(p.ID))
					}
				}
			}
			all = all && seen == n-1
		}
		return all
	}); err != nil {
		return fmt.Errorf("not every host found every other: %w", err)
	}
	discovered = time.Since(start)
	fmt.Printf("%s  every host found the %d others, by mDNS alone\n", since(start), n-1)

	// A space: join, then every host sends; every host follows it.
	const space = "lan-demo"
	for _, h := range hs {
		if _, err := h.c.Join(ctx, space); err != nil {
			return err
		}
	}
	if err := until(ctx, func() bool {
		for _, h := range hs {
			sps, err := h.c.Spaces(ctx)
			if err != nil || len(sps) != 1 || sps[0].Peers < n-1 {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("the space's members did not all meet: %w", err)
	}
	fmt.Printf("%s  all %d hosts joined %q and see each other in it\n", since(start), n, space)

	var (
		mu      sync.Mutex
		sentAt  = map[string]time.Time{}
		latency []time.Duration
		got     = make([]map[string]bool, n)
	)
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	var wg sync.WaitGroup
	for i, h := range hs {
		got[i] = map[string]bool{}
		wg.Go(func() {
			h.c.Follow(fctx, space, "", func(m api.Message) error {
				at := time.Now()
				mu.Lock()
				defer mu.Unlock()
				got[i][m.ID] = true
				if t0, ok := sentAt[m.ID]; ok && m.From != h.id {
					latency = append(latency, at.Sub(t0))
					if len(latency) <= 2*n {
						fmt.Printf("%s  %s ← %s: %s (%v)\n", since(start), h.name, names[m.From], m.Content, at.Sub(t0).Round(10*time.Microsecond))
					}
				}
				return nil
			})
		})
	}
	total := n * perHost
	var sendErr error
	for k := range perHost {
		for _, h := range hs {
			mu.Lock() // record the send time before any follower can see it
			m, err := h.c.SendText(ctx, space, fmt.Sprintf("%s says hello #%d", h.name, k))
			if err == nil {
				sentAt[m.ID] = time.Now()
			}
			mu.Unlock()
			if err != nil {
				sendErr = err
			}
		}
	}
	if sendErr != nil {
		return sendErr
	}
	err = until(ctx, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range hs {
			if len(got[i]) < total {
				return false
			}
		}
		return true
	})
	fcancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("not every host got every message: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latency)
	fmt.Printf("%s  every host has every message: %d sent, %d deliveries\n", since(start), total, len(latency))
	fmt.Printf("summary: hosts=%d discovery=%v deliveries=%d latency_p50=%v latency_p99=%v\n",
		n, discovered.Round(time.Millisecond), len(latency), pct(latency, 50), pct(latency, 99))
	return nil
}

// stop ends the host's daemon (SIGTERM, then SIGKILL after 10 s).
func (h *host) stop() {
	if h.cmd.Process == nil {
		return
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
}

// until polls cond every 20 ms until it holds or ctx ends.
func until(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("gave up: " + context.Cause(ctx).Error())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/100)].Round(10 * time.Microsecond)
}

func since(t time.Time) string { return fmt.Sprintf("%7.3fs", time.Since(t).Seconds()) }

func short(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}
