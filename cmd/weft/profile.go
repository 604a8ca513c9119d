package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// daemonProfile profiles a daemon for `weft daemon --profile DIR`: a CPU
// profile of its whole run and a heap profile taken as it shuts down
// (before the node closes, so it shows what the running node held), and
// heap-peak.pprof, rewritten whenever the live heap passes its largest size
// so far by a step (what the daemon held at its peak, which is what bounds
// its RSS). The bench passes it to its daemons with `weft bench --profile DIR`.
type daemonProfile struct {
	dir  string
	cpu  *os.File
	done chan struct{}
	wg   sync.WaitGroup
}

// peakStep is how far the live heap must grow past the last peak profile's
// before another is written, and peakEvery how often it is looked at.
const (
	peakStep  = 4 << 20
	peakEvery = 500 * time.Millisecond
)

// startProfile starts the CPU profile in dir (made if missing); an empty
// dir profiles nothing.
func startProfile(dir string) (*daemonProfile, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--profile: %w", err)
	}
	p := &daemonProfile{dir: dir, cpu: f, done: make(chan struct{})}
	p.wg.Go(p.watchPeak)
	return p, nil
}

// watchPeak writes heap-peak.pprof each time the heap's live objects (as
// of the last GC) pass the last peak by peakStep, until stop.
func (p *daemonProfile) watchPeak() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	t := time.NewTicker(peakEvery)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if live := sample[0].Value.Uint64(); live >= peak+peakStep {
			peak = live
			_ = p.write("heap-peak.pprof", false)
		}
	}
}

// heap writes the heap profile (after a GC, so in-use figures are live).
func (p *daemonProfile) heap() error {
	if p == nil {
		return nil
	}
	return p.write("heap.pprof", true)
}

// write writes a heap profile to name in the profile's directory, after a
// GC if gc (a profile without one shows what was live at the last GC).
func (p *daemonProfile) write(name string, gc bool) error {
	f, err := os.Create(filepath.Join(p.dir, name))
	if err != nil {
		return err
	}
	if gc {
		runtime.GC()
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// stop ends the CPU profile.
func (p *daemonProfile) stop() error {
	if p == nil {
		return nil
	}
	close(p.done)
	p.wg.Wait()
	pprof.StopCPUProfile()
	return p.cpu.Close()
}
