package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftmesh/weft/internal/testbed"
)

// TestDaemonProfile: `weft daemon --profile DIR` leaves a CPU profile of
// its run and a heap profile, both non-empty, when it stops.
func TestDaemonProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	d := testbed.Start(t, "--profile", dir)
	if err := d.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.Log)
	}
	for _, name := range []string{"cpu.pprof", "heap.pprof"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (size %d)", name, err, sizeOf(fi))
		}
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}

// TestDaemonBadMemoryLimit: a negative --memory-limit is refused with a
// clear error before the daemon starts.
func TestDaemonBadMemoryLimit(t *testing.T) {
	cli := testbed.NewCLI(t)
	_, stderr, code := cli.Run("daemon", "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0", "--memory-limit", "-1")
	if code == 0 || !strings.Contains(stderr, "--memory-limit -1 is negative") {
		t.Errorf("exit %d, stderr %q; want a usage error about --memory-limit", code, stderr)
	}
}

// TestDaemonBadPunchAgain: a --punch-again that is no duration is refused
// with a clear error before the daemon starts.
func TestDaemonBadPunchAgain(t *testing.T) {
	cli := testbed.NewCLI(t)
	_, stderr, code := cli.Run("daemon", "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0", "--punch-again", "soon")
	if code != 2 || !strings.Contains(stderr, `invalid value "soon" for flag -punch-again`) {
		t.Errorf("exit %d, stderr %q; want a usage error about --punch-again", code, stderr)
	}
}
