package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// daemonProfile profiles a daemon for `weft daemon --profile DIR`: a CPU
// profile of its whole run and a heap profile taken as it shuts down
// (before the node closes, so it shows what the running node held). The
// bench passes it to its daemons with `weft bench --profile DIR`.
type daemonProfile struct {
	dir string
	cpu *os.File
}

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
	return &daemonProfile{dir: dir, cpu: f}, nil
}

// heap writes the heap profile (after a GC, so in-use figures are live).
func (p *daemonProfile) heap() error {
	if p == nil {
		return nil
	}
	f, err := os.Create(filepath.Join(p.dir, "heap.pprof"))
	if err != nil {
		return err
	}
	runtime.GC()
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
	pprof.StopCPUProfile()
	return p.cpu.Close()
}
