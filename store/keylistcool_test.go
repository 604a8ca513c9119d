package store

import (
	"slices"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestKeyListCoolChoice checks which blocks cool makes cold: those not
// used since they became hot or were last spared, oldest first; a block
// used since then is spared once; the last block (where appends go)
// never, even with no block allowed hot; and blocks removed from the
// list while queued are passed over.
func TestKeyListCoolChoice(t *testing.T) {
	var (
		l     keyList
		model []protocol.SyncKey
		loads int
	)
	l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) {
		loads++
		return modelRange(model, lo, hi), nil
	}
	l.maxHot = 100
	const blocks = 6
	for i := range blocks * maxBlockKeys {
		k := protocol.SyncKey{Time: int64(i)}
		model = append(model, k)
		if _, err := l.insert(k); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.blocks) != blocks {
		t.Fatalf("%d blocks, want %d", len(l.blocks), blocks)
	}
	hot := func() []int {
		var out []int
		for i, b := range l.blocks {
			if !b.cold {
				out = append(out, i)
			}
		}
		return out
	}
	want := func(step string, w ...int) {
		t.Helper()
		checkInvariants(t, &l, model)
		if got := hot(); !slices.Equal(got, w) {
			t.Fatalf("%s: hot blocks %v, want %v", step, got, w)
		}
	}
	// use reads a key of block i, as a query does (and cools after it).
	use := func(i int) {
		t.Helper()
		k := model[i*maxBlockKeys]
		if got, err := l.keys(k, successor(k), 1); err != nil || len(got) != 1 {
			t.Fatalf("keys of block %d = %v, %v", i, got, err)
		}
	}

	// All were used (made); a turn of the hand spares each once, the
	// next cools the oldest.
	l.maxHot = 3
	l.cool()
	want("first cooling", 3, 4, 5)
	// Block 3 used since: spared, and 4 cooled for block 0 read back.
	use(3)
	want("block 3 used", 3, 4, 5)
	loadsBefore := loads
	use(0)
	if loads != loadsBefore+1 {
		t.Fatalf("block 0 was read back %d times, want once", loads-loadsBefore)
	}
	want("block 0 read back", 0, 3, 5)
	// The last block stays hot, with none allowed, and cool ends.
	l.maxHot = 0
	l.cool()
	want("none allowed", 5)
	// A block removed from the list while queued (emptied: block 2) is
	// passed over.
	l.maxHot = 100
	for i := range 3 {
		use(i) // hot again: 0, 1 and 2 queued
	}
	want("read back", 0, 1, 2, 5)
	for _, k := range slices.Clone(model[2*maxBlockKeys : 3*maxBlockKeys]) {
		if ok, err := l.remove(k); !ok || err != nil {
			t.Fatalf("remove: %v, %v", ok, err)
		}
		model = slices.DeleteFunc(model, func(x protocol.SyncKey) bool { return x == k })
	}
	if len(l.blocks) != blocks-1 {
		t.Fatalf("%d blocks after emptying one, want %d", len(l.blocks), blocks-1)
	}
	l.maxHot = 1
	l.cool()
	want("after a removal", len(l.blocks)-1)
	if len(l.queue) != 1 || l.dead != 0 {
		t.Errorf("queue of %d blocks, %d dead, want only the last block", len(l.queue), l.dead)
	}
}
