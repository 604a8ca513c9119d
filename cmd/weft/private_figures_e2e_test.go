package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// TestPrivateFigures measures what private and sealed spaces cost next to
// an open space, in the same run, with real daemons driven through their sockets:
// send latency (A sends, B's event stream sees it) and the catch-up of
// 10,000 messages by a daemon that was offline, then the read of those
// 10,000 through the API (where a sealed space's are decrypted). Figures, not assertions:
// run with WEFT_PRIVATE_FIGURES=1 (it takes minutes).
func TestPrivateFigures(t *testing.T) {
	if os.Getenv("WEFT_PRIVATE_FIGURES") == "" {
		t.Skip("set WEFT_PRIVATE_FIGURES=1 to measure")
	}
	const sends, catchUp = 300, 10_000
	a, b := newCLI(t), newCLI(t)
	da := startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-rate-limits", "--log-level", "warn")
	db := startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-rate-limits", "--log-level", "warn", "--bootstrap", da.Addrs[0])
	bID, _ := b.id()
	a.OK("join", "open-bench")
	b.OK("join", "open-bench")
	a.OK("create", "priv-bench")
	b.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "priv-bench", bID)))
	a.OK("create", "seal-bench", "--sealed")
	b.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "seal-bench", bID)))
	b.waitFor("b in the spaces' topics", func() bool {
		sps, _ := db.Client.Spaces(context.Background())
		return len(sps) == 3 && sps[0].Peers > 0 && sps[1].Peers > 0 && sps[2].Peers > 0
	})

	latency := func(space string) (p50, p99 time.Duration) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		seen := make(chan string, 16)
		go func() {
			_ = db.Client.Follow(ctx, space, "", func(m api.Message) error { seen <- m.ID; return nil })
		}()
		// Skip the replay.
		time.Sleep(500 * time.Millisecond)
		for len(seen) > 0 {
			<-seen
		}
		var ds []time.Duration
		for i := range sends {
			start := time.Now()
			m, err := da.Client.SendText(context.Background(), space, fmt.Sprintf("latency %d", i))
			if err != nil {
				t.Fatal(err)
			}
			for id := range seen {
				if id == m.ID {
					break
				}
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2], ds[len(ds)*99/100]
	}
	for _, sp := range []string{"open-bench", "priv-bench", "seal-bench", "open-bench", "priv-bench", "seal-bench"} {
		p50, p99 := latency(sp)
		t.Logf("send→delivered %-10s p50 %v p99 %v (%d sends)", sp, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), sends)
	}

	count := func(c *client.Client, space string) int {
		sps, err := c.Spaces(context.Background())
		if err != nil {
			return -1
		}
		for _, s := range sps {
			if s.Name == space {
				return s.Messages
			}
		}
		return -1
	}
	fill := func(space string) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < catchUp; i += 8 {
					if _, err := da.Client.SendText(context.Background(), space, fmt.Sprintf("catch-up %d", i)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	readAll := func(c *client.Client, space string) (int, time.Duration) {
		start := time.Now()
		n, after := 0, ""
		for {
			page, err := c.Read(context.Background(), space, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			n += len(page.Messages)
			if len(page.Messages) == 0 || page.Next == "" || page.Next == after {
				return n, time.Since(start)
			}
			after = page.Next
		}
	}
	for _, sp := range []string{"open-bench", "priv-bench", "seal-bench"} {
		if err := db.Stop(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fill(sp)
		t.Logf("fill %-10s %d sends in %v", sp, catchUp, time.Since(start).Round(time.Millisecond))
		want := count(da.Client, sp)
		start = time.Now()
		db = startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-rate-limits", "--log-level", "warn", "--bootstrap", da.Addrs[0])
		testbed.Poll(t, 5*time.Minute, "b's catch-up of "+sp, func() (bool, string) {
			n := count(db.Client, sp)
			return n >= want, fmt.Sprintf("%d of %d", n, want)
		})
		cpu := processCPU(t, db.Pid())
		t.Logf("catch-up %-10s %d messages in %v (from the daemon's start); the joiner's CPU %v, %v a message", sp, catchUp, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), (cpu / catchUp).Round(time.Microsecond))
		for range 2 {
			n, took := readAll(db.Client, sp)
			t.Logf("read     %-10s %d messages through the API in %v", sp, n, took.Round(time.Millisecond))
		}
	}
	out, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average: %s", strings.TrimSpace(string(out)))
}

// processCPU is the CPU time (user and system) process pid has used, from
// /proc/PID/stat (Linux; the test skips the figure elsewhere).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Logf("no CPU figure: %v", err)
		return 0
	}
	// Fields after the command name (which may hold spaces, in parentheses):
	// state is field 3, utime 14 and stime 15, in clock ticks (100 a second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ticks int64
	for _, i := range []int{14 - 3, 15 - 3} {
		var n int64
		fmt.Sscan(f[i], &n)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
