package store

import (
	"slices"
	"sort"

	"github.com/weftmesh/weft/protocol"
)

// keyList is a sorted set of sync keys kept as a list of blocks, each
// holding up to maxBlockKeys keys with their count and ID sum, so that a
// range's count and sum cost O(#blocks + block size) and an insert or
// remove O(log #blocks + block size). Appends at the end (the usual case:
// created_at grows) fill the last block and then start a new one, so a
// list built in order has full blocks. It is not safe for concurrent use.
type keyList struct {
	blocks []*keyBlock // non-empty, in key order
	n      int         // total number of keys
}

type keyBlock struct {
	keys []protocol.SyncKey // sorted, 1..maxBlockKeys
	sum  protocol.Sum       // of keys' IDs
}

const (
	maxBlockKeys = 512
	// minBlockKeys: a block shrunk below this by removals merges with a
	// neighbour when they fit in one block.
	minBlockKeys = maxBlockKeys / 4
	// tailKeys is how many keys an overflowing last block gives the new
	// block that follows it.
	tailKeys = maxBlockKeys / 8
)

func (b *keyBlock) last() protocol.SyncKey { return b.keys[len(b.keys)-1] }

// search returns the index of the first key in b >= k and whether it is k.
func (b *keyBlock) search(k protocol.SyncKey) (int, bool) {
	return slices.BinarySearchFunc(b.keys, k, protocol.SyncKey.Compare)
}

// pos is a position in a keyList: key j of block i, or the end
// (i == len(blocks), j == 0).
type pos struct{ i, j int }

// blockFor returns the index of the first block whose last key is >= k,
// or len(blocks).
func (l *keyList) blockFor(k protocol.SyncKey) int {
	return sort.Search(len(l.blocks), func(i int) bool { return !l.blocks[i].last().Less(k) })
}

// lowerBound returns the position of the first key >= k.
func (l *keyList) lowerBound(k protocol.SyncKey) pos {
	i := l.blockFor(k)
	if i == len(l.blocks) {
		return pos{i, 0}
	}
	j, _ := l.blocks[i].search(k)
	return pos{i, j}
}

// insert adds k, reporting whether it was absent.
func (l *keyList) insert(k protocol.SyncKey) bool {
	if len(l.blocks) == 0 {
		l.blocks = append(l.blocks, newBlock(k))
		l.n++
		return true
	}
	i := min(l.blockFor(k), len(l.blocks)-1)
	b := l.blocks[i]
	j, found := b.search(k)
	if found {
		return false
	}
	l.n++
	if j == len(b.keys) && i == len(l.blocks)-1 && len(b.keys) == maxBlockKeys {
		l.blocks = append(l.blocks, newBlock(k)) // appending: leave b full
		return true
	}
	b.keys = slices.Insert(b.keys, j, k)
	b.sum.Add(k.ID)
	if len(b.keys) > maxBlockKeys {
		// Split in half, except the last block, which keys arriving a
		// little out of order (concurrent senders) overflow: it keeps all
		// but a few, as later keys go to the new block. The kept part is
		// copied to a slice of its size: the overflowed one has room for
		// far more keys than the block will take again, and at a million
		// keys that slack was 60 MB.
		cut := len(b.keys) / 2
		if i == len(l.blocks)-1 {
			cut = len(b.keys) - tailKeys
		}
		nb := &keyBlock{keys: append(make([]protocol.SyncKey, 0, maxBlockKeys), b.keys[cut:]...)}
		for _, k := range nb.keys {
			nb.sum.Add(k.ID)
		}
		b.keys = slices.Clone(b.keys[:cut])
		b.sum.SubSum(nb.sum)
		l.blocks = slices.Insert(l.blocks, i+1, nb)
	}
	return true
}

func newBlock(k protocol.SyncKey) *keyBlock {
	b := &keyBlock{keys: make([]protocol.SyncKey, 1, 64)}
	b.keys[0] = k
	b.sum.Add(k.ID)
	return b
}

// remove deletes k, reporting whether it was present.
func (l *keyList) remove(k protocol.SyncKey) bool {
	i := l.blockFor(k)
	if i == len(l.blocks) {
		return false
	}
	b := l.blocks[i]
	j, found := b.search(k)
	if !found {
		return false
	}
	l.n--
	b.keys = slices.Delete(b.keys, j, j+1)
	b.sum.Sub(k.ID)
	switch {
	case len(b.keys) == 0:
		l.blocks = slices.Delete(l.blocks, i, i+1)
	case len(b.keys) < minBlockKeys:
		if i+1 < len(l.blocks) && len(b.keys)+len(l.blocks[i+1].keys) <= maxBlockKeys {
			l.merge(i)
		} else if i > 0 && len(l.blocks[i-1].keys)+len(b.keys) <= maxBlockKeys {
			l.merge(i - 1)
		}
	}
	return true
}

// merge joins block i+1 into block i.
func (l *keyList) merge(i int) {
	a, b := l.blocks[i], l.blocks[i+1]
	a.keys = append(a.keys, b.keys...)
	a.sum.AddSum(b.sum)
	l.blocks = slices.Delete(l.blocks, i+1, i+2)
}

// span returns the positions of the first key >= lo and the first key
// >= hi (hi's clamped to lo's), and the number of keys between them.
func (l *keyList) span(lo, hi protocol.SyncKey) (start, end pos, n int) {
	start = l.lowerBound(lo)
	if !lo.Less(hi) {
		return start, start, 0
	}
	end = l.lowerBound(hi)
	if start.i == end.i {
		return start, end, end.j - start.j
	}
	n = len(l.blocks[start.i].keys) - start.j
	for i := start.i + 1; i < end.i; i++ {
		n += len(l.blocks[i].keys)
	}
	return start, end, n + end.j
}

// summary returns the count and ID sum of the keys in [lo, hi).
func (l *keyList) summary(lo, hi protocol.SyncKey) (int, protocol.Sum) {
	start, end, n := l.span(lo, hi)
	var sum protocol.Sum
	if n == 0 {
		return 0, sum
	}
	if start.i == end.i {
		b := l.blocks[start.i]
		if n <= len(b.keys)-n { // sum the range or its complement, whichever is shorter
			return n, sumKeys(b.keys[start.j:end.j])
		}
		sum = b.sum
		sum.SubSum(sumKeys(b.keys[:start.j]))
		sum.SubSum(sumKeys(b.keys[end.j:]))
		return n, sum
	}
	sum = l.blocks[start.i].suffixSum(start.j)
	for i := start.i + 1; i < end.i; i++ {
		sum.AddSum(l.blocks[i].sum)
	}
	if end.i < len(l.blocks) {
		sum.AddSum(l.blocks[end.i].prefixSum(end.j))
	}
	return n, sum
}

// prefixSum returns the sum of b's first j keys, summing the shorter side.
func (b *keyBlock) prefixSum(j int) protocol.Sum {
	if j <= len(b.keys)/2 {
		return sumKeys(b.keys[:j])
	}
	s := b.sum
	s.SubSum(sumKeys(b.keys[j:]))
	return s
}

// suffixSum returns the sum of b's keys from j on.
func (b *keyBlock) suffixSum(j int) protocol.Sum {
	s := b.sum
	s.SubSum(b.prefixSum(j))
	return s
}

func sumKeys(keys []protocol.SyncKey) protocol.Sum {
	var s protocol.Sum
	for _, k := range keys {
		s.Add(k.ID)
	}
	return s
}

// keys returns up to limit keys of [lo, hi) in order.
func (l *keyList) keys(lo, hi protocol.SyncKey, limit int) []protocol.SyncKey {
	var out []protocol.SyncKey
	if !lo.Less(hi) {
		return out
	}
	p := l.lowerBound(lo)
	for i := p.i; i < len(l.blocks); i++ {
		start := 0
		if i == p.i {
			start = p.j
		}
		for _, k := range l.blocks[i].keys[start:] {
			if !k.Less(hi) || len(out) == limit {
				return out
			}
			out = append(out, k)
		}
	}
	return out
}

// split returns the boundaries b1 < … < bk (k < parts) cutting [lo, hi)
// into k+1 non-empty ranges [lo,b1), [b1,b2), …, [bk,hi) whose counts
// differ by at most one; fewer ranges when the range holds fewer than
// parts keys, none when it holds at most one. parts must be positive.
func (l *keyList) split(lo, hi protocol.SyncKey, parts int) []protocol.SyncKey {
	start, _, n := l.span(lo, hi)
	k := min(parts, n)
	if k <= 1 {
		return nil
	}
	out := make([]protocol.SyncKey, 0, k-1)
	p, at := start, 0 // at: rank of p within the range
	for r := 1; r < k; r++ {
		rank := r * n / k // 1 <= rank < n, strictly increasing in r
		p = l.advance(p, rank-at)
		at = rank
		out = append(out, l.blocks[p.i].keys[p.j])
	}
	return out
}

// nth returns the key of rank i (0-based) in the whole list; 0 <= i < n.
func (l *keyList) nth(i int) protocol.SyncKey {
	p := l.advance(pos{}, i)
	return l.blocks[p.i].keys[p.j]
}

// advance returns the position d keys after p, which must exist.
func (l *keyList) advance(p pos, d int) pos {
	for d > 0 {
		left := len(l.blocks[p.i].keys) - p.j
		if d < left {
			return pos{p.i, p.j + d}
		}
		d -= left
		p = pos{p.i + 1, 0}
	}
	return p
}
