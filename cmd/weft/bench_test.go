package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
)

// TestBenchQuick runs `weft bench --quick --json` from the built binary and
// checks that every scenario reports sane figures (non-zero, no
// thresholds: the machine is shared) and that no daemon or home is left.
func TestBenchQuick(t *testing.T) {
	bin := testbed.Weft(t)
	tmp := benchTmp(t)
	start := time.Now()
	p := testbed.Run(t, nil, []string{"TMPDIR=" + tmp}, bin, "bench", "--quick", "--json")
	if err := p.Wait(5 * time.Minute); err != nil {
		t.Fatalf("weft bench --quick --json: %v\nstderr:\n%s", err, p.Stderr)
	}
	t.Logf("weft bench --quick took %v", time.Since(start).Round(time.Second))
	stdout := []byte(p.Stdout.String())
	checkNoBenchLeft(t, tmp)

	if n := strings.Count(strings.TrimSpace(string(stdout)), "\n"); n != 0 {
		t.Errorf("want one line of JSON, got %d lines", n+1)
	}
	var keys struct {
		Scenarios map[string]json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(stdout, &keys); err != nil {
		t.Fatalf("decode %s: %v", stdout, err)
	}
	for _, s := range benchScenarios() {
		if _, ok := keys.Scenarios[s.name]; !ok {
			t.Fatalf("scenario %q missing from %s", s.name, stdout)
		}
	}
	var r benchReport
	if err := json.Unmarshal(stdout, &r); err != nil {
		t.Fatal(err)
	}
	if r.CPUs < 1 || r.Seconds <= 0 || r.PeakRSSAnonMB <= 0 || r.Version == "" || !r.Quick {
		t.Errorf("run: %+v", r)
	}
	lat := func(what string, l benchLatency) {
		t.Helper()
		if l.N == 0 || l.P50Ms <= 0 || l.P99Ms < l.P50Ms || l.MaxMs < l.P99Ms {
			t.Errorf("%s latency: %+v", what, l)
		}
	}
	lat("fsync", r.Fsync)
	s := r.Scenarios
	results := []benchResult{s.Sends, s.Broadcast, s.Page, s.Invoke, s.Catchup, s.Memory, s.Many, s.Floors}
	for i, res := range results {
		c := res.common()
		if c.Error != "" || c.Seconds <= 0 || (c.PeakRSSAnonMB <= 0) != (res == s.Floors) { // floors runs no daemon
			t.Errorf("%s: %+v", benchScenarios()[i].name, *c)
		}
	}
	for _, run := range []sendRun{s.Sends.One, s.Sends.Eight, s.Sends.Large} {
		if run.Sends == 0 || run.PerSecond <= 0 {
			t.Errorf("sends: %+v", run)
		}
		lat("send", run.Latency)
	}
	if s.Sends.One.Clients != 1 || s.Sends.Eight.Clients != 8 || s.Sends.Large.Clients != 1 || s.Sends.LargeBytes < 16<<10 {
		t.Errorf("sends: %+v", s.Sends)
	}
	if len(s.Broadcast.Runs) == 0 || s.Broadcast.Daemons < 2 {
		t.Fatalf("broadcast: %+v", s.Broadcast)
	}
	for _, run := range s.Broadcast.Runs {
		if run.Sent == 0 || run.AchievedPerS <= 0 || run.Arrived == 0 || run.CPUPerMsgUsMean <= 0 || run.CPUPerMsgUsReceivers <= 0 ||
			run.Expected != run.Sent*(s.Broadcast.Daemons-1) || run.Lost != run.Expected-run.Arrived ||
			run.WritesPerMsgReceivers <= 0 || run.ReadsPerMsgReceivers <= 0 || run.CopiesPerMsg < 1 {
			t.Errorf("broadcast: %+v", run)
		}
		// Busy cores: CPU time over wall time, so at most the machine's
		// cores (and a clock tick's rounding of a short run).
		if run.BusyDaemons <= 0 || run.BusyBench <= 0 || run.BusyDaemons+run.BusyBench > float64(runtime.NumCPU())+0.5 {
			t.Errorf("broadcast busy cores: daemons %.2f, bench %.2f of %d", run.BusyDaemons, run.BusyBench, runtime.NumCPU())
		}
		lat("broadcast", run.Latency)
	}
	if p := s.Page; p.Messages == 0 || p.FillPerS <= 0 {
		t.Errorf("page: %+v", p)
	}
	lat("page start", s.Page.Start)
	lat("page middle", s.Page.Middle)
	lat("page tail", s.Page.Tail)
	if !s.Page.Settled {
		t.Errorf("page: the daemon did not go quiet after the fill: %+v", s.Page)
	}
	lat("page start once quiet", s.Page.SettledStart)
	lat("page middle once quiet", s.Page.SettledMiddle)
	lat("page tail once quiet", s.Page.SettledTail)
	if iv := s.Invoke; iv.Calls == 0 || iv.Concurrent8PerS <= 0 || iv.StreamFrames == 0 || iv.StreamPerS <= 0 ||
		iv.CallerCPUUs <= 0 || iv.CalleeCPUUs <= 0 || iv.AgentsCPUUs <= 0 {
		t.Errorf("invoke: %+v", iv)
	}
	lat("invoke", s.Invoke.Latency)
	lat("libp2p stream", s.Invoke.StreamRTT)
	lat("health", s.Invoke.HealthAPI)
	if c := s.Catchup; c.Messages == 0 || c.CaughtUpS <= 0 || c.PerS <= 0 || c.UpS <= 0 || c.UpS > c.CaughtUpS ||
		c.FirstS < c.UpS || c.FirstS > c.CaughtUpS || c.JoinerCPUUs <= 0 || c.MemberCPUUs < 0 {
		t.Errorf("catchup: %+v", c)
	}
	// Idle CPU is counted in 10 ms ticks: it may well be 0 over a few seconds.
	if m := s.Memory; m.RSSAnonMB <= 0 || m.RSSFileMB <= 0 || m.RSSMB < m.RSSAnonMB || m.IdleForS <= 0 || m.IdleCPUPercent < 0 {
		t.Errorf("memory: %+v", m)
	}
	if f := s.Floors; f.SignUs <= 0 || f.VerifyUs <= 0 || f.HTTP1PerS <= 0 || f.HTTP8PerS <= 0 || f.HTTP8CPUUs <= 0 ||
		f.SendCeilingPerS <= 0 || f.InvokeFloorMs <= 0 || len(f.Gossip) != len(quickSizes().bcastRates) ||
		// CPU comes in 10 ms ticks: a quick run's few ms of Badger may be 0.
		f.Catchup.Messages != quickSizes().catchup || f.Catchup.StoreS <= 0 || f.Catchup.StoreCPUUs < 0 ||
		f.Catchup.ReadCPUUs < 0 || f.Catchup.FloorS <= 0 {
		t.Errorf("floors: %+v", f)
	} else {
		lat("bare HTTP", f.HTTP)
		lat("fdatasync", f.Fdatasync)
		lat("bare libp2p stream", f.Stream)
		lat("bare Unix socket", f.Unix)
		for i, g := range f.Gossip {
			if g.Hosts != quickSizes().bcastDaemons || g.TargetPerS != quickSizes().bcastRates[i] || g.Publishers < 1 ||
				g.Sent == 0 || g.AchievedPerS <= 0 || g.Arrived == 0 || g.Latency.N != g.Arrived || g.CPUPerMsgUs <= 0 {
				t.Errorf("floors, gossip: %+v", g)
			}
			lat("bare gossip", g.Latency)
		}
	}
	if m := s.Many; m.Daemons < 2 || m.Running != m.Daemons || !m.AllDelivered || m.MinHeld != m.Sent || m.Sent == 0 ||
		m.TotalRSSMB <= 0 || m.TotalPSSMB <= 0 || m.TotalRSSAnonMB <= 0 {
		t.Errorf("many: %+v", m)
	}
}

// TestBenchInterrupted: Ctrl-C while the daemons run stops them all and
// removes their homes.
func TestBenchInterrupted(t *testing.T) {
	bin := testbed.Weft(t)
	tmp := benchTmp(t)
	p := testbed.Run(t, nil, []string{"TMPDIR=" + tmp}, bin, "bench", "--quick", "--scenarios", "many")
	testbed.Poll(t, 60*time.Second, "daemons' sockets", func() (bool, string) {
		socks, _ := filepath.Glob(filepath.Join(tmp, "wb-*", "d*", "weft.sock"))
		return len(socks) >= 2, strings.Join(socks, " ")
	})
	// To weft bench alone (it leads its own process group): it must stop
	// the daemons itself.
	_ = p.Signal(os.Interrupt)
	err := p.Wait(60 * time.Second)
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 130 {
		t.Errorf("interrupted weft bench: %v, want exit status 130\nstderr:\n%s", err, p.Stderr)
	}
	checkNoBenchLeft(t, tmp)
}

// benchTmp returns a temporary dir for weft bench's TMPDIR, short enough
// for socket paths.
func benchTmp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "wbt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// checkNoBenchLeft fails unless tmp is empty and no process runs with it
// in its command line (the daemons' --home is under it).
func checkNoBenchLeft(t *testing.T, tmp string) {
	t.Helper()
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(tmp)) {
			t.Errorf("left running: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}

// TestBenchPageMessages: --page-messages sets the page scenario's fill,
// and a count too small to read a tail page at is refused.
func TestBenchPageMessages(t *testing.T) {
	bin := testbed.Weft(t)
	for _, bad := range []string{"5", "-1", "x"} {
		p := testbed.Run(t, nil, nil, bin, "bench", "--scenarios", "page", "--page-messages", bad)
		err := p.Wait(30 * time.Second)
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.Contains(p.Stderr.String(), "page-messages") {
			t.Errorf("--page-messages %s: %v, want a usage error naming the flag\nstderr:\n%s", bad, err, p.Stderr)
		}
	}
	tmp := benchTmp(t)
	p := testbed.Run(t, nil, []string{"TMPDIR=" + tmp}, bin, "bench", "--quick", "--json", "--scenarios", "page", "--page-messages", "300")
	if err := p.Wait(2 * time.Minute); err != nil {
		t.Fatalf("weft bench --page-messages 300: %v\nstderr:\n%s", err, p.Stderr)
	}
	checkNoBenchLeft(t, tmp)
	var r benchReport
	if err := json.Unmarshal([]byte(p.Stdout.String()), &r); err != nil {
		t.Fatal(err)
	}
	if r.Scenarios.Page == nil || r.Scenarios.Page.Messages != 300 || r.Scenarios.Page.Tail.P50Ms <= 0 {
		t.Errorf("page: %+v, want 300 messages and a tail page read", r.Scenarios.Page)
	}
}

// TestBenchCatchupMessages: --catchup-messages sets how many messages the
// late joiner fetches; a count that is not a positive number is refused.
func TestBenchCatchupMessages(t *testing.T) {
	bin := testbed.Weft(t)
	for _, bad := range []string{"-1", "x"} {
		p := testbed.Run(t, nil, nil, bin, "bench", "--scenarios", "catchup", "--catchup-messages", bad)
		err := p.Wait(30 * time.Second)
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.Contains(p.Stderr.String(), "catchup-messages") {
			t.Errorf("--catchup-messages %s: %v, want a usage error naming the flag\nstderr:\n%s", bad, err, p.Stderr)
		}
	}
	tmp := benchTmp(t)
	p := testbed.Run(t, nil, []string{"TMPDIR=" + tmp}, bin, "bench", "--quick", "--json", "--scenarios", "catchup", "--catchup-messages", "300")
	if err := p.Wait(2 * time.Minute); err != nil {
		t.Fatalf("weft bench --catchup-messages 300: %v\nstderr:\n%s", err, p.Stderr)
	}
	checkNoBenchLeft(t, tmp)
	var r benchReport
	if err := json.Unmarshal([]byte(p.Stdout.String()), &r); err != nil {
		t.Fatal(err)
	}
	if c := r.Scenarios.Catchup; c == nil || c.Messages != 300 || c.CaughtUpS <= 0 || c.FirstS <= 0 || c.JoinerCPUUs <= 0 {
		t.Errorf("catchup: %+v, want 300 messages fetched", c)
	}
}

func TestBusyRow(t *testing.T) {
	for _, c := range []struct {
		daemons, bench float64
		cpus           int
		saturated      bool
	}{
		{0.86, 0.08, 2, false},
		{1.76, 0.16, 2, true},
		{1.70, 0.10, 2, true}, // 90 %: the bound itself
		{1.60, 0.10, 2, false},
		{3.0, 0.2, 8, false},
	} {
		row := busyRow(c.daemons, c.bench, c.cpus)
		if !strings.HasPrefix(row, fmt.Sprintf("daemons %.2f, bench %.2f of %d", c.daemons, c.bench, c.cpus)) {
			t.Errorf("busyRow(%v, %v, %d) = %q", c.daemons, c.bench, c.cpus, row)
		}
		if got := strings.Contains(row, "saturated"); got != c.saturated {
			t.Errorf("busyRow(%v, %v, %d) = %q: saturated %v, want %v", c.daemons, c.bench, c.cpus, row, got, c.saturated)
		}
	}
}
