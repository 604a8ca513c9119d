package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weftmesh/weft/internal/version"
)

// weft bench measures weft as its users see it: real `weft daemon`
// processes on 127.0.0.1, each in its own temporary home, driven through
// their sockets with the Go client exactly as agents drive them. The
// scenarios live in bench_scenarios.go, the daemons and /proc readings in
// bench_daemons.go.

// benchSizes are the sizes of a run: full, or smaller with --quick.
type benchSizes struct {
	sendFor       time.Duration // each of the two send runs
	bcastDaemons  int
	bcastRates    []int // msg/s
	bcastFor      time.Duration
	bcastGrace    time.Duration // after the last send, for arrivals
	pageMessages  int
	pageReads     int // page reads at each position
	invokeCalls   int
	streamFrames  int
	healthPings   int
	catchup       int // messages the late joiner fetches
	idleSettle    time.Duration
	idleFor       time.Duration
	manyDaemons   int
	manyMessages  int
	fillClients   int // concurrent senders that fill a space
	deliverWithin time.Duration
}

func fullSizes() benchSizes {
	return benchSizes{
		sendFor:      10 * time.Second,
		bcastDaemons: 10, bcastRates: []int{100, 500, 2000}, bcastFor: 10 * time.Second, bcastGrace: 10 * time.Second,
		pageMessages: 1_000_000, pageReads: 500,
		invokeCalls: 5000, streamFrames: 100_000, healthPings: 500,
		catchup:    100_000,
		idleSettle: 10 * time.Second, idleFor: 10 * time.Second,
		manyDaemons: 50, manyMessages: 5,
		fillClients:   16,
		deliverWithin: 2 * time.Minute,
	}
}

func quickSizes() benchSizes {
	return benchSizes{
		sendFor:      1500 * time.Millisecond,
		bcastDaemons: 3, bcastRates: []int{100}, bcastFor: 3 * time.Second, bcastGrace: 3 * time.Second,
		pageMessages: 10_000, pageReads: 100,
		invokeCalls: 500, streamFrames: 10_000, healthPings: 100,
		catchup:    2000,
		idleSettle: time.Second, idleFor: 2 * time.Second,
		manyDaemons: 5, manyMessages: 3,
		fillClients:   16,
		deliverWithin: 30 * time.Second,
	}
}

// setBroadcast sets the broadcast scenario's rates (comma-separated
// msg/s) and daemons, where given (not "" or 0).
func (s *benchSizes) setBroadcast(rates string, daemons int) error {
	if rates != "" {
		s.bcastRates = nil
		for f := range strings.SplitSeq(rates, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || r <= 0 {
				return fmt.Errorf("--broadcast-rates: %q is not a positive number of messages per second", f)
			}
			s.bcastRates = append(s.bcastRates, r)
		}
	}
	switch {
	case daemons < 0 || daemons == 1:
		return fmt.Errorf("--broadcast-daemons: %d: at least 2 are needed", daemons)
	case daemons > 0:
		s.bcastDaemons = daemons
	}
	return nil
}

// benchScenario is one scenario: its name (for --scenarios and the JSON),
// and the function that runs it and stores its result in the report.
type benchScenario struct {
	name  string
	short string
	run   func(ctx context.Context, b *bench, r *benchReport) (benchResult, error)
}

// benchResult is what every scenario's result has in common.
type benchResult interface {
	common() *benchCommon
	rows() [][2]string // the table: what, figure
}

// benchCommon is in every scenario's result.
type benchCommon struct {
	Seconds float64 `json:"seconds"` // wall time of the scenario, daemons' start and stop included
	// PeakRSSAnonMB is the largest RssAnon of any one of the scenario's
	// daemons, sampled from /proc every 250 ms.
	PeakRSSAnonMB float64 `json:"peak_rss_anon_mb"`
	Error         string  `json:"error,omitempty"` // the scenario failed: its figures may be partial
}

func (c *benchCommon) common() *benchCommon { return c }

func benchScenarios() []benchScenario {
	return []benchScenario{
		scenario("sends", "durable sends/s, 1 and 8 clients",
			func(r *benchReport) **sendsResult { return &r.Scenarios.Sends }, benchSends),
		scenario("broadcast", "publish→arrival in a space of daemons at fixed rates",
			func(r *benchReport) **broadcastResult { return &r.Scenarios.Broadcast }, benchBroadcast),
		scenario("page", "a 10-message page in a large space",
			func(r *benchReport) **pageResult { return &r.Scenarios.Page }, benchPage),
		scenario("invoke", "invoke and stream invoke through two daemons",
			func(r *benchReport) **invokeResult { return &r.Scenarios.Invoke }, benchInvoke),
		scenario("catchup", "a late joiner fetching a space's history",
			func(r *benchReport) **catchupResult { return &r.Scenarios.Catchup }, benchCatchup),
		scenario("memory", "idle RSS and CPU",
			func(r *benchReport) **memoryResult { return &r.Scenarios.Memory }, benchMemory),
		scenario("many", "many daemons in one space",
			func(r *benchReport) **manyResult { return &r.Scenarios.Many }, benchMany),
		scenario("floors", "what this machine allows with nothing of weft in the way",
			func(r *benchReport) **floorsResult { return &r.Scenarios.Floors }, benchFloors),
	}
}

// scenario makes a benchScenario of a function that fills in a result of
// type R, which goes into the report's field.
func scenario[R any, P interface {
	*R
	benchResult
}](name, short string, field func(*benchReport) *P, run func(context.Context, *bench, P) error) benchScenario {
	return benchScenario{name, short, func(ctx context.Context, b *bench, r *benchReport) (benchResult, error) {
		res := P(new(R))
		*field(r) = res
		return res, run(ctx, b, res)
	}}
}

// benchReport is the output of --json: one object whose fields are only
// ever added.
type benchReport struct {
	Version    string     `json:"version"`
	Quick      bool       `json:"quick"`
	Started    time.Time  `json:"started"`
	Seconds    float64    `json:"seconds"`
	CPUs       int        `json:"cpus"`
	LoadBefore [3]float64 `json:"loadavg_before"` // /proc/loadavg: 1, 5, 15 minutes
	LoadAfter  [3]float64 `json:"loadavg_after"`
	// Fsync is the latency of writing 4 KiB to a file in the temporary
	// dir and fsyncing it (200 times, before the scenarios): the disk's
	// floor under every durable write.
	Fsync benchLatency `json:"fsync"`
	// PeakRSSAnonMB is the largest RssAnon any daemon reached in the run,
	// in PeakScenario.
	PeakRSSAnonMB float64 `json:"peak_rss_anon_mb"`
	PeakScenario  string  `json:"peak_scenario,omitempty"`
	Scenarios     struct {
		Sends     *sendsResult     `json:"sends,omitempty"`
		Broadcast *broadcastResult `json:"broadcast,omitempty"`
		Page      *pageResult      `json:"page,omitempty"`
		Invoke    *invokeResult    `json:"invoke,omitempty"`
		Catchup   *catchupResult   `json:"catchup,omitempty"`
		Memory    *memoryResult    `json:"memory,omitempty"`
		Many      *manyResult      `json:"many,omitempty"`
		Floors    *floorsResult    `json:"floors,omitempty"`
	} `json:"scenarios"`
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := e.flags("bench")
	quick := fs.Bool("quick", false, "smaller sizes of every scenario (under a minute)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	var names []string
	for _, s := range benchScenarios() {
		names = append(names, s.name)
	}
	pick := fs.String("scenarios", "", "comma-separated scenarios to run (default all): "+strings.Join(names, ", ")+"; or their numbers 1–"+strconv.Itoa(len(names)))
	profile := fs.String("profile", "", "profile every daemon into `DIR`/<daemon>/ (weft daemon --profile: cpu.pprof, heap.pprof at its stop)")
	rates := fs.String("broadcast-rates", "", "the broadcast scenario's rates, comma-separated `MSG/S` (default 100,500,2000; with --quick 100)")
	bdaemons := fs.Int("broadcast-daemons", 0, "the broadcast scenario's daemons (default 10; with --quick 3)")
	catchupMessages := fs.Int("catchup-messages", 0, "the catchup scenario's late joiner fetches `N` messages instead (default 100,000, or 2,000 with --quick)")
	pageMessages := fs.Int("page-messages", 0, "fill the page scenario's space with `N` messages instead (default 1,000,000, or 10,000 with --quick; filling 1,000,000 through the API takes a while)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *pageMessages < 0 || (*pageMessages > 0 && *pageMessages < 100) {
		return usageError{fmt.Sprintf("--page-messages: want at least 100 (the page at the tail is read 50 before the end), got %d", *pageMessages)}
	}
	if *catchupMessages < 0 {
		return usageError{fmt.Sprintf("--catchup-messages: want a positive count, got %d", *catchupMessages)}
	}
	scenarios, err := pickScenarios(*pick)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sizes := fullSizes()
	if *quick {
		sizes = quickSizes()
	}
	if err := sizes.setBroadcast(*rates, *bdaemons); err != nil {
		return err
	}
	if *pageMessages > 0 {
		sizes.pageMessages = *pageMessages
	}
	if *catchupMessages > 0 {
		sizes.catchup = *catchupMessages
	}
	t0 := time.Now()
	r := &benchReport{Version: version.String(), Quick: *quick, Started: t0.UTC().Truncate(time.Second), CPUs: runtime.NumCPU()}
	r.LoadBefore, _ = loadavg()
	b, err := newBench(self, sizes, e.stderr)
	if err != nil {
		return err
	}
	if *profile != "" {
		if b.profile, err = filepath.Abs(*profile); err != nil {
			return err
		}
	}
	defer b.close()
	if r.Fsync, err = fsyncLatency(b.root, 200); err != nil {
		return err
	}
	b.fsync = r.Fsync
	var (
		failed []string
		ran    []ranScenario
	)
	for _, s := range scenarios {
		b.logf("%s: %s", s.name, s.short)
		b.resetPeak()
		start := time.Now()
		res, err := s.run(ctx, b, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ran = append(ran, ranScenario{s.name, res})
		c := res.common()
		c.Seconds = round(time.Since(start).Seconds(), 1)
		c.PeakRSSAnonMB = mb(b.peakAnon())
		if c.PeakRSSAnonMB > r.PeakRSSAnonMB {
			r.PeakRSSAnonMB, r.PeakScenario = c.PeakRSSAnonMB, s.name
		}
		if err != nil {
			c.Error = oneLine(err.Error())
			failed = append(failed, s.name)
			b.logf("%s failed: %s", s.name, c.Error)
		}
	}
	b.close()
	r.LoadAfter, _ = loadavg()
	r.Seconds = round(time.Since(t0).Seconds(), 1)
	if *asJSON {
		err = printJSON(e.stdout, r)
	} else {
		err = printBench(e.stdout, r, ran)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// pickScenarios returns the scenarios --scenarios names, in their order.
func pickScenarios(list string) ([]benchScenario, error) {
	all := benchScenarios()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	want := make(map[string]bool)
	for _, w := range strings.Split(list, ",") {
		w = strings.TrimSpace(w)
		if n, err := strconv.Atoi(w); err == nil && n >= 1 && n <= len(all) {
			w = all[n-1].name
		}
		if !slices.ContainsFunc(all, func(s benchScenario) bool { return s.name == w }) {
			return nil, usageError{fmt.Sprintf("unknown scenario %q", w)}
		}
		want[w] = true
	}
	return slices.DeleteFunc(all, func(s benchScenario) bool { return !want[s.name] }), nil
}

// ranScenario is a scenario that ran, and its result.
type ranScenario struct {
	name string
	res  benchResult
}

// printBench prints the report as a table.
func printBench(w io.Writer, r *benchReport, ran []ranScenario) error {
	kind := "full run"
	if r.Quick {
		kind = "--quick"
	}
	fmt.Fprintf(w, "weft bench (%s): weft %s, %d CPUs, load %s before, %s after, fsync of 4 KiB %s; %.0f s\n\n",
		kind, r.Version, r.CPUs, fmtLoad(r.LoadBefore), fmtLoad(r.LoadAfter), r.Fsync, r.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tWHAT\tFIGURE")
	for _, s := range ran {
		c := s.res.common()
		rows := s.res.rows()
		if c.PeakRSSAnonMB > 0 { // floors runs no daemon
			rows = append(rows, [2]string{"peak RssAnon of one daemon", fmt.Sprintf("%.1f MB (scenario took %.0f s)", c.PeakRSSAnonMB, c.Seconds)})
		} else {
			rows = append(rows, [2]string{"scenario took", fmt.Sprintf("%.0f s", c.Seconds)})
		}
		if c.Error != "" {
			rows = append(rows, [2]string{"FAILED", c.Error})
		}
		for i, row := range rows {
			name := ""
			if i == 0 {
				name = s.name
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", name, row[0], row[1])
		}
	}
	if r.PeakScenario != "" {
		fmt.Fprintf(tw, "run\tpeak RssAnon of one daemon\t%.1f MB (in %s)\n", r.PeakRSSAnonMB, r.PeakScenario)
	}
	return tw.Flush()
}

func fmtLoad(l [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// benchLatency summarises latencies.
type benchLatency struct {
	N     int     `json:"n"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// latencies summarises ds (which it sorts).
func latencies(ds []time.Duration) benchLatency {
	if len(ds) == 0 {
		return benchLatency{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return ms(ds[int(q*float64(len(ds)-1))]) }
	return benchLatency{N: len(ds), P50Ms: at(0.50), P99Ms: at(0.99), MaxMs: ms(ds[len(ds)-1])}
}

func (l benchLatency) String() string {
	return fmt.Sprintf("p50 %s ms, p99 %s ms", fmtMs(l.P50Ms), fmtMs(l.P99Ms))
}

func ms(d time.Duration) float64 { return round(float64(d.Nanoseconds())/1e6, 3) }

// fmtMs prints milliseconds with 2–3 significant digits.
func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// fmtCount prints n with thousands separators.
func fmtCount(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

func mb(bytes int64) float64 { return round(float64(bytes)/(1<<20), 1) }

// perSecond is n over d, rounded.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n)/d.Seconds(), 1)
}

// fsyncLatency writes 4 KiB to a file in dir and fsyncs it n times.
func fsyncLatency(dir string, n int) (benchLatency, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return benchLatency{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	lats := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return benchLatency{}, err
		}
		if err := f.Sync(); err != nil {
			return benchLatency{}, err
		}
		lats = append(lats, time.Since(t))
	}
	return latencies(lats), nil
}
