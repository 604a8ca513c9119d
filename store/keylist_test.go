package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestKeyListModel applies random inserts and removes (mostly appends, as
// in a live space, then anywhere) to a keyList and a sorted slice, checking
// every query and the list's invariants against the slice: with every
// block in memory, and with at most a few, the others read back from the
// slice as the store reads them from its time index.
func TestKeyListModel(t *testing.T) {
	tests := []struct {
		name     string
		ops      int
		times    int64   // keys' times are drawn from [0, times)
		appendP  float64 // probability that an insert appends
		removeP  float64
		queryGap int // check queries every queryGap ops
	}{
		{"appends", 5000, math.MaxInt32, 0.95, 0.05, 500},
		{"random", 5000, 1 << 20, 0, 0.3, 250},
		{"equal times", 4000, 8, 0, 0.4, 250},
		{"drain", 3000, 1 << 20, 0, 0.7, 100},
	}
	for _, tc := range tests {
		for _, maxHot := range []int{0, 2} { // 0: no loader
			t.Run(fmt.Sprintf("%s/hot=%d", tc.name, maxHot), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(tc.ops), uint64(tc.times)))
				var (
					l     keyList
					model []protocol.SyncKey
					last  int64
					loads int
					most  int // blocks
				)
				if maxHot > 0 {
					l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) {
						loads++
						return modelRange(model, lo, hi), nil
					}
					l.maxHot = maxHot
				}
				ops := tc.ops
				if maxHot > 0 {
					ops /= 2 // each check reads blocks back: slower
				}
				for op := range ops {
					switch {
					case len(model) > 0 && rng.Float64() < tc.removeP:
						k := model[rng.IntN(len(model))]
						if rng.IntN(10) == 0 {
							k = randKey(rng, tc.times) // usually absent
						}
						i, found := slices.BinarySearchFunc(model, k, protocol.SyncKey.Compare)
						if got, err := l.remove(k); got != found || err != nil {
							t.Fatalf("op %d: remove(%v) = %v, %v; want %v", op, k, got, err, found)
						}
						if found {
							model = slices.Delete(model, i, i+1)
						}
					default:
						k := randKey(rng, tc.times)
						if rng.Float64() < tc.appendP {
							last += 1 + rng.Int64N(3)
							k.Time = last
						}
						if len(model) > 0 && rng.IntN(20) == 0 {
							k = model[rng.IntN(len(model))] // a duplicate
						}
						i, found := slices.BinarySearchFunc(model, k, protocol.SyncKey.Compare)
						if got, err := l.insert(k); got == found || err != nil {
							t.Fatalf("op %d: insert(%v) = %v, %v; want %v", op, k, got, err, !found)
						}
						if !found {
							model = slices.Insert(model, i, k)
						}
					}
					checkInvariants(t, &l, model)
					most = max(most, len(l.blocks))
					if op%tc.queryGap == 0 {
						checkQueries(t, rng, &l, model, tc.times)
					}
				}
				checkQueries(t, rng, &l, model, tc.times)
				if maxHot > 0 && most > maxHot+1 && loads == 0 {
					t.Errorf("no block was read back")
				}
			})
		}
	}
}

// modelRange returns the keys k of model with lo <= k <= hi.
func modelRange(model []protocol.SyncKey, lo, hi protocol.SyncKey) []protocol.SyncKey {
	i, _ := slices.BinarySearchFunc(model, lo, protocol.SyncKey.Compare)
	j := i
	for j < len(model) && !hi.Less(model[j]) {
		j++
	}
	return slices.Clone(model[i:j])
}

// A block read back may hold a key committed but not yet applied to the
// list, or miss one deleted but not yet applied: its count and sum follow
// what was read, and the update, when it comes, changes nothing. Queries
// in between see the store's keys.
func TestKeyListReadBackAheadOfUpdates(t *testing.T) {
	var (
		l     keyList
		store []protocol.SyncKey // what the store holds
	)
	l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) { return modelRange(store, lo, hi), nil }
	l.maxHot = 1
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 4 * maxBlockKeys {
		k := protocol.SyncKey{Time: int64(10 * i)}
		binary.LittleEndian.PutUint64(k.ID[:], rng.Uint64())
		store = append(store, k)
		if _, err := l.insert(k); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, &l, store)
	if !l.blocks[0].cold {
		t.Fatal("the first block is still hot")
	}
	// Committed: one key added to the first block's range, one removed
	// from it; neither applied to the list yet.
	added := protocol.SyncKey{Time: 15}
	removed := store[3]
	store = slices.Insert(store, 2, added)
	store = slices.Delete(store, 4, 5)
	n, sum, err := l.summary(protocol.MinSyncKey, protocol.SyncKey{Time: 100})
	want := modelRange(store, protocol.MinSyncKey, protocol.SyncKey{Time: 99})
	if err != nil || n != len(want) || sum != sumKeys(want) {
		t.Fatalf("summary = %d, %v, %v; want %d", n, sum, err, len(want))
	}
	// The updates arrive: both find the block as read back.
	if got, err := l.insert(added); got || err != nil {
		t.Fatalf("insert of a key read back = %v, %v; want false", got, err)
	}
	if got, err := l.remove(removed); got || err != nil {
		t.Fatalf("remove of a key already gone = %v, %v; want false", got, err)
	}
	checkInvariants(t, &l, store)
	checkQueries(t, rng, &l, store, 1<<16)
}

// A load that fails is returned by the operation and leaves the list as
// it was; the store drops such an index (see updateIndex).
func TestKeyListLoadError(t *testing.T) {
	var l keyList
	var model []protocol.SyncKey
	fail := errors.New("disk on fire")
	failing := false
	l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) {
		if failing {
			return nil, fail
		}
		return modelRange(model, lo, hi), nil
	}
	l.maxHot = 1
	for i := range 3 * maxBlockKeys {
		k := protocol.SyncKey{Time: int64(i)}
		if _, err := l.insert(k); err != nil {
			t.Fatal(err)
		}
		model = append(model, k)
	}
	failing = true
	if _, _, err := l.summary(protocol.SyncKey{Time: 1}, protocol.SyncKey{Time: 2}); !errors.Is(err, fail) {
		t.Fatalf("summary over a cold block: %v, want %v", err, fail)
	}
	if _, err := l.insert(protocol.SyncKey{Time: 3, ID: protocol.ID{1}}); !errors.Is(err, fail) {
		t.Fatalf("insert into a cold block: %v, want %v", err, fail)
	}
	failing = false
	checkInvariants(t, &l, model)
}

// The newest key of a full last block is removed (an expired message; the
// block's bound stays), a key is inserted in it (full again), then one
// between its last key and its bound: it belongs to that block, not to a
// new one after it, whose range would lie inside the block's (found by
// review: the key could then never be removed).
func TestKeyListBoundAfterRemovingNewest(t *testing.T) {
	for _, maxHot := range []int{0, 1} {
		var (
			l     keyList
			model []protocol.SyncKey
		)
		if maxHot > 0 {
			l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) { return modelRange(model, lo, hi), nil }
			l.maxHot = maxHot
		}
		ins := func(k protocol.SyncKey) {
			t.Helper()
			i, found := slices.BinarySearchFunc(model, k, protocol.SyncKey.Compare)
			if got, err := l.insert(k); got == found || err != nil {
				t.Fatalf("insert(%v) = %v, %v", k, got, err)
			}
			if !found {
				model = slices.Insert(model, i, k)
			}
		}
		rem := func(k protocol.SyncKey) {
			t.Helper()
			i, found := slices.BinarySearchFunc(model, k, protocol.SyncKey.Compare)
			if got, err := l.remove(k); got != found || err != nil {
				t.Fatalf("remove(%v) = %v, %v; want %v", k, got, err, found)
			}
			if found {
				model = slices.Delete(model, i, i+1)
			}
		}
		for i := range 2 * maxBlockKeys {
			ins(protocol.SyncKey{Time: int64(10 * (i + 1))})
		}
		last := model[len(model)-1]
		rem(last)
		ins(protocol.SyncKey{Time: last.Time - 15})
		between := protocol.SyncKey{Time: last.Time - 5}
		ins(between)
		for i := range 2 * maxBlockKeys {
			ins(protocol.SyncKey{Time: last.Time + int64(10*(i+1))})
		}
		checkInvariants(t, &l, model)
		rem(between)
		checkInvariants(t, &l, model)
		checkQueries(t, rand.New(rand.NewPCG(1, 1)), &l, model, last.Time*2)
	}
}

// Built in order, a list of many keys keeps at most maxHot blocks' keys in
// memory.
func TestKeyListColdMemory(t *testing.T) {
	var l keyList
	var model []protocol.SyncKey
	l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) { return modelRange(model, lo, hi), nil }
	l.maxHot = 4
	for i := range 100 * maxBlockKeys {
		k := protocol.SyncKey{Time: int64(i)}
		model = append(model, k)
		if _, err := l.insert(k); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	for _, b := range l.blocks {
		held += cap(b.keys)
	}
	if held > 5*maxBlockKeys { // 4 blocks, each with a little room to spare
		t.Fatalf("%d keys' room held in memory for a list of %d, want at most %d", held, l.n, 5*maxBlockKeys)
	}
	checkInvariants(t, &l, model)
}

func randKey(rng *rand.Rand, times int64) protocol.SyncKey {
	var k protocol.SyncKey
	k.Time = rng.Int64N(times)
	binary.LittleEndian.PutUint64(k.ID[:], rng.Uint64())
	binary.LittleEndian.PutUint64(k.ID[8:], rng.Uint64())
	k.ID[0] &= 0x0f // some IDs share a prefix
	return k
}

func checkInvariants(t *testing.T, l *keyList, model []protocol.SyncKey) {
	t.Helper()
	if l.n != len(model) {
		t.Fatalf("n = %d, want %d", l.n, len(model))
	}
	hot, at := 0, 0
	for i, b := range l.blocks {
		if i > 0 && !l.blocks[i-1].hi.Less(b.hi) {
			t.Fatalf("block %d's bound is not above block %d's", i, i-1)
		}
		lo := protocol.MinSyncKey
		if i > 0 {
			lo = successor(l.blocks[i-1].hi)
		}
		in := modelRange(model, lo, b.hi)
		if i == len(l.blocks)-1 {
			in = model[at:]
		}
		at += len(in)
		if b.n != len(in) || b.n == 0 || b.n > maxBlockKeys {
			t.Fatalf("block %d counts %d keys, its range holds %d", i, b.n, len(in))
		}
		if b.sum != sumKeys(in) {
			t.Fatalf("block %d: sum out of date", i)
		}
		if b.cold {
			if b.keys != nil {
				t.Fatalf("block %d is cold and holds keys", i)
			}
			continue
		}
		hot++
		if !slices.Equal(b.keys, in) {
			t.Fatalf("block %d holds %d keys, differing from the %d of its range", i, len(b.keys), len(in))
		}
	}
	if at != len(model) {
		t.Fatalf("the blocks' ranges hold %d keys, want %d", at, len(model))
	}
	if hot != l.hot || (l.load != nil && hot > max(l.maxHot, 1)) {
		t.Fatalf("%d blocks hot, counted %d, at most %d", hot, l.hot, l.maxHot)
	}
	checkQueue(t, l)
}

// checkQueue checks cool's queue: each hot block of the list once, dead
// ones (removed from the list, their keys let go) counted, no cold block,
// and no more than about twice the hot blocks (dead ones are compacted).
func checkQueue(t *testing.T, l *keyList) {
	t.Helper()
	if l.load == nil {
		return
	}
	inList := make(map[*keyBlock]bool, len(l.blocks))
	for _, b := range l.blocks {
		inList[b] = true
		if b.dead {
			t.Fatalf("a block of the list is marked dead")
		}
	}
	seen := make(map[*keyBlock]bool, len(l.queue))
	dead := 0
	for i, b := range l.queue {
		if seen[b] {
			t.Fatalf("queue[%d] is queued twice", i)
		}
		seen[b] = true
		switch {
		case b.dead:
			dead++
			if inList[b] || b.keys != nil {
				t.Fatalf("queue[%d] is dead but in the list or holding keys", i)
			}
		case !inList[b]:
			t.Fatalf("queue[%d] is live but not in the list", i)
		case b.cold:
			t.Fatalf("queue[%d] is cold", i)
		}
	}
	for i, b := range l.blocks {
		if !b.cold && !seen[b] {
			t.Fatalf("hot block %d is not queued", i)
		}
	}
	if dead != l.dead {
		t.Fatalf("%d dead blocks queued, %d counted", dead, l.dead)
	}
	if len(l.queue) > 2*l.hot+2 {
		t.Fatalf("a queue of %d for %d hot blocks", len(l.queue), l.hot)
	}
}

func checkQueries(t *testing.T, rng *rand.Rand, l *keyList, model []protocol.SyncKey, times int64) {
	t.Helper()
	bounds := []protocol.SyncKey{protocol.MinSyncKey, protocol.MaxSyncKey, randKey(rng, times), {}}
	for range 8 {
		if len(model) > 0 {
			k := model[rng.IntN(len(model))]
			bounds = append(bounds, k, successor(k), protocol.SyncKey{Time: k.Time})
		}
	}
	for _, lo := range bounds {
		for _, hi := range bounds {
			var (
				in   []protocol.SyncKey
				want protocol.Sum
			)
			for _, k := range model {
				if !k.Less(lo) && k.Less(hi) {
					in = append(in, k)
					want.Add(k.ID)
				}
			}
			n, sum, err := l.summary(lo, hi)
			if n != len(in) || sum != want || err != nil {
				t.Fatalf("summary(%v, %v) = %d, %v; want %d, %v", lo, hi, n, sum, len(in), want)
			}
			for _, limit := range []int{1, 7, len(in) + 1} {
				got, err := l.keys(lo, hi, limit)
				if err != nil {
					t.Fatal(err)
				}
				if w := in[:min(limit, len(in))]; !slices.Equal(got, w) {
					t.Fatalf("keys(%v, %v, %d) = %d keys, want %d", lo, hi, limit, len(got), len(w))
				}
			}
			for _, parts := range []int{1, 2, 3, 16, len(in) + 2} {
				bounds, err := l.split(lo, hi, parts)
				if err != nil {
					t.Fatal(err)
				}
				checkSplit(t, bounds, in, lo, hi, parts)
			}
		}
	}
	if len(model) > 0 {
		i := rng.IntN(len(model))
		if got, err := l.nth(i); got != model[i] || err != nil {
			t.Fatalf("nth(%d) = %v, want %v", i, got, model[i])
		}
	}
}

// checkSplit checks that bounds cut in (the keys of [lo, hi), sorted) into
// min(parts, len(in)) non-empty ranges whose sizes differ by at most one.
func checkSplit(t *testing.T, bounds, in []protocol.SyncKey, lo, hi protocol.SyncKey, parts int) {
	t.Helper()
	if want := max(min(parts, len(in)), 1) - 1; len(bounds) != want {
		t.Fatalf("split(%v, %v, %d) of %d keys: %d bounds, want %d", lo, hi, parts, len(in), len(bounds), want)
	}
	if len(in) == 0 {
		return
	}
	sizes := make([]int, 0, len(bounds)+1)
	prev, at := lo, 0
	for _, b := range append(bounds, hi) {
		if !prev.Less(b) {
			t.Fatalf("split(%v, %v, %d): bound %v not above %v", lo, hi, parts, b, prev)
		}
		n := 0
		for at < len(in) && in[at].Less(b) {
			at++
			n++
		}
		if b != hi && (at == len(in) || in[at] != b) {
			t.Fatalf("split: bound %v is not a key of the range", b)
		}
		sizes = append(sizes, n)
		prev = b
	}
	if slices.Min(sizes) == 0 || slices.Max(sizes)-slices.Min(sizes) > 1 {
		t.Fatalf("split(%v, %v, %d) of %d keys: sizes %v", lo, hi, parts, len(in), sizes)
	}
}

func TestSuccessor(t *testing.T) {
	var ff protocol.ID
	for i := range ff {
		ff[i] = 0xff
	}
	tests := []struct{ in, want protocol.SyncKey }{
		{protocol.SyncKey{Time: 5}, protocol.SyncKey{Time: 5, ID: protocol.ID{31: 1}}},
		{protocol.SyncKey{Time: 5, ID: protocol.ID{30: 1, 31: 0xff}}, protocol.SyncKey{Time: 5, ID: protocol.ID{30: 2}}},
		{protocol.SyncKey{Time: -1, ID: ff}, protocol.SyncKey{Time: 0}},
		{protocol.MaxSyncKey, protocol.MaxSyncKey},
	}
	for _, tc := range tests {
		got := successor(tc.in)
		if got != tc.want {
			t.Errorf("successor(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// A list filled by concurrent senders (keys in order but for a few
// milliseconds of jitter, so some land just before the last block's end)
// holds about one key's size per key: an overflowing block gives away its
// tail and keeps the rest in a slice of its size.
func TestKeyListJitteredFillIsCompact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l keyList
	const n = 200_000
	for i := range n {
		var id protocol.ID
		binary.BigEndian.PutUint64(id[:], rng.Uint64())
		if _, err := l.insert(protocol.SyncKey{Time: int64(i/16) + rng.Int64N(8), ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if l.n != n {
		t.Fatalf("n = %d, want %d", l.n, n)
	}
	held := 0
	var prev protocol.SyncKey
	for bi, b := range l.blocks {
		held += cap(b.keys)
		for ki, k := range b.keys {
			if (bi > 0 || ki > 0) && !prev.Less(k) {
				t.Fatalf("block %d key %d out of order", bi, ki)
			}
			prev = k
		}
	}
	if held > n*5/4 {
		t.Errorf("%d keys held in room for %d (%.2f×), want at most 1.25×", n, held, float64(held)/n)
	}
}
