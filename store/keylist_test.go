package store

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestKeyListModel applies random inserts and removes (mostly appends, as
// in a live space, then anywhere) to a keyList and a sorted slice, checking
// every query and the list's invariants against the slice.
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
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.ops), uint64(tc.times)))
			var (
				l     keyList
				model []protocol.SyncKey
				last  int64
			)
			for op := range tc.ops {
				switch {
				case len(model) > 0 && rng.Float64() < tc.removeP:
					k := model[rng.IntN(len(model))]
					if rng.IntN(10) == 0 {
						k = randKey(rng, tc.times) // usually absent
					}
					i, found := slices.BinarySearchFunc(model, k, protocol.SyncKey.Compare)
					if found {
						model = slices.Delete(model, i, i+1)
					}
					if got := l.remove(k); got != found {
						t.Fatalf("op %d: remove(%v) = %v, want %v", op, k, got, found)
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
					if !found {
						model = slices.Insert(model, i, k)
					}
					if got := l.insert(k); got == found {
						t.Fatalf("op %d: insert(%v) = %v, want %v", op, k, got, !found)
					}
				}
				checkInvariants(t, &l, model)
				if op%tc.queryGap == 0 {
					checkQueries(t, rng, &l, model, tc.times)
				}
			}
			checkQueries(t, rng, &l, model, tc.times)
		})
	}
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
	var all []protocol.SyncKey
	for i, b := range l.blocks {
		if len(b.keys) == 0 || len(b.keys) > maxBlockKeys {
			t.Fatalf("block %d holds %d keys", i, len(b.keys))
		}
		if b.sum != sumKeys(b.keys) {
			t.Fatalf("block %d: sum out of date", i)
		}
		all = append(all, b.keys...)
	}
	if !slices.Equal(all, model) {
		t.Fatalf("list holds %d keys, differing from the model's %d", len(all), len(model))
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
			n, sum := l.summary(lo, hi)
			if n != len(in) || sum != want {
				t.Fatalf("summary(%v, %v) = %d, %v; want %d, %v", lo, hi, n, sum, len(in), want)
			}
			for _, limit := range []int{1, 7, len(in) + 1} {
				got := l.keys(lo, hi, limit)
				if w := in[:min(limit, len(in))]; !slices.Equal(got, w) {
					t.Fatalf("keys(%v, %v, %d) = %d keys, want %d", lo, hi, limit, len(got), len(w))
				}
			}
			for _, parts := range []int{1, 2, 3, 16, len(in) + 2} {
				checkSplit(t, l.split(lo, hi, parts), in, lo, hi, parts)
			}
		}
	}
	if len(model) > 0 {
		i := rng.IntN(len(model))
		if got := l.nth(i); got != model[i] {
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
		l.insert(protocol.SyncKey{Time: int64(i/16) + rng.Int64N(8), ID: id})
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
