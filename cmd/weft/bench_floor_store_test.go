package main

import (
	"math"
	"os"
	"runtime"
	"testing"
)

// TestCatchupFloor runs the catch-up floor at a size that takes several
// Badger transactions, and checks its figures add up and its store is
// gone after.
func TestCatchupFloor(t *testing.T) {
	root := t.TempDir()
	const n, verifyUs = 20_000, 100.0
	r, err := catchupFloor(root, n, verifyUs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages != n || r.Bytes != catchupFloorBytes || r.StoreS <= 0 {
		t.Fatalf("figures: %+v", r)
	}
	if runtime.GOOS == "linux" { // CPU from /proc
		if r.StoreCPUUs <= 0 || r.ReadCPUUs <= 0 {
			t.Fatalf("CPU: %+v", r)
		}
		want := float64(n) * (verifyUs + r.StoreCPUUs + r.ReadCPUUs) / 1e6 / 2
		if math.Abs(r.FloorS-want) > 0.01 {
			t.Errorf("floor %.2f s, want %.2f (from %+v)", r.FloorS, want, r)
		}
	}
	left, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("left behind in %s: %v", root, left)
	}
}
