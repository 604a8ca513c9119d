package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// TestSweepSendFigures measures, with a real daemon driven through its
// socket, what a send waits while the retention sweep deletes a backlog:
// WEFT_SWEEP_FIGURES messages (e.g. 100000) are sent with a TTL of 60 s,
// then one send every 5 ms goes to another space until the sweeps (every
// 30 s) have deleted the backlog. Sends are counted as during a sweep when
// the backlog's count fell in the 250 ms around them. WEFT_SWEEP_BIN runs
// another weft binary as the daemon (a base build, for a comparison);
// WEFT_SWEEP_PROFILE=DIR has it write its profiles there.
// Figures, not assertions (it takes minutes).
func TestSweepSendFigures(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv("WEFT_SWEEP_FIGURES"))
	if total <= 0 {
		t.Skip("set WEFT_SWEEP_FIGURES to a number of messages (e.g. 100000) to measure")
	}
	var wrap func(string, ...string) []string
	if bin := os.Getenv("WEFT_SWEEP_BIN"); bin != "" {
		wrap = func(_ string, args ...string) []string { return append([]string{bin}, args...) }
	}
	args := []string{"--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-rate-limits", "--log-level", "warn"}
	if dir := os.Getenv("WEFT_SWEEP_PROFILE"); dir != "" {
		args = append(args, "--profile", dir)
	}
	d := testbed.StartVia(t, wrap, testbed.Home(t), args...)
	ctx := context.Background()
	for _, sp := range []string{"backlog", "live"} {
		if _, err := d.Client.Join(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		sps, err := d.Client.Spaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sps {
			if s.Name == "backlog" {
				return s.Messages
			}
		}
		t.Fatal("no space backlog")
		return 0
	}

	start := time.Now()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(total); i = next.Add(1) {
				_, err := d.Client.Send(ctx, "backlog", api.SendRequest{
					Content: json.RawMessage(fmt.Sprintf(`{"text": "backlog %d"}`, i)), TTL: 60,
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("sent %d messages with a TTL of 60 s in %v", total, time.Since(start).Round(time.Millisecond))

	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var (
		samples []sample
		stop    = make(chan struct{})
		sender  sync.WaitGroup
	)
	sender.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if _, err := d.Client.SendText(ctx, "live", fmt.Sprint("live ", i)); err != nil {
				t.Error(err)
				return
			}
			samples = append(samples, sample{t0, time.Since(t0)})
		}
	})
	// The backlog's count every 250 ms, until it is gone (or 3 minutes).
	type mark struct {
		at time.Time
		n  int
	}
	marks := []mark{{time.Now(), count()}}
	for deadline := time.Now().Add(3 * time.Minute); marks[len(marks)-1].n > 0 && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond) // sampling, not synchronisation
		marks = append(marks, mark{time.Now(), count()})
	}
	time.Sleep(time.Second)
	close(stop)
	sender.Wait()
	if n := marks[len(marks)-1].n; n > 0 {
		t.Errorf("%d messages of the backlog left after 3 minutes", n)
	}

	// A send is during a sweep if the count fell between the marks
	// around it.
	var during, outside []time.Duration
	for _, s := range samples {
		i, _ := slices.BinarySearchFunc(marks, s.at, func(m mark, at time.Time) int { return m.at.Compare(at) })
		if i > 0 && i < len(marks) && marks[i].n < marks[i-1].n {
			during = append(during, s.lat)
		} else {
			outside = append(outside, s.lat)
		}
	}
	var sweeping time.Duration
	for i := 1; i < len(marks); i++ {
		if marks[i].n < marks[i-1].n {
			sweeping += marks[i].at.Sub(marks[i-1].at)
		}
	}
	t.Logf("the sweeps deleted %d messages in ~%v (%.0f/s)", marks[0].n, sweeping.Round(time.Millisecond), float64(marks[0].n)/sweeping.Seconds())
	t.Logf("sends during a sweep: %d, %s", len(during), figures(during))
	t.Logf("sends outside:        %d, %s", len(outside), figures(outside))
}

// figures formats lat's p50, p99 and max.
func figures(lat []time.Duration) string {
	if len(lat) == 0 {
		return "none"
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	return fmt.Sprintf("p50 %s p99 %s max %s", ms(q(0.5)), ms(q(0.99)), ms(lat[len(lat)-1]))
}
