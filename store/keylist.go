package store

import (
	"errors"
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
//
// With a loader, at most maxHot blocks keep their keys in memory (hot);
// the others (cold) keep only their count, sum and upper bound, ~0.25
// bytes per key instead of 40, and their keys are read back from the store
// (the space's time index) when an operation needs them. A million keys
// held whole took ~60 MB of a daemon's heap; the block summaries of a
// million take ~250 KB. Blocks are cooled once an operation is done,
// never the last one (where appends go), so a position found during an
// operation stays valid until it ends. Which ones is chosen by a clock
// hand (see cool), at a cost that does not grow with the number of
// blocks: at 10M keys a scan of every block for the least recently used
// one took ~2×10⁸ steps per build of the list.
//
// A block read back holds what the store holds in its range then, which
// may include a commit whose update has not reached the list yet (or miss
// a deleted key's): the block's count and sum are taken from what was
// read, and that update, when it comes, finds the key present (absent)
// and changes nothing. Updates are idempotent for that reason already
// (see rangeIndex).
type keyList struct {
	blocks []*keyBlock // in key order; empty only when read back so
	n      int         // total number of keys

	// load, if not nil, returns the stored keys k with lo <= k <= hi, in
	// order; without it every block stays hot. It is set before the
	// first insert.
	load func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error)
	// mayLoad, if not nil, is asked before each block is read back: its
	// error fails the operation (a budget of reads, see readIndex).
	mayLoad func() error
	maxHot  int // with load, how many blocks may stay hot between operations
	hot     int // blocks whose keys are in memory
	// queue holds the hot blocks, in the order they became hot or were
	// last spared by cool (its front is the clock hand), and blocks
	// removed from the list while hot (dead) until cool passes them or
	// they are more than half of it.
	queue []*keyBlock
	dead  int // dead blocks in queue
}

type keyBlock struct {
	keys []protocol.SyncKey // sorted, up to maxBlockKeys; nil when cold
	cold bool
	used bool         // used since it became hot or cool last spared it
	dead bool         // removed from the list (it may still be in the queue)
	n    int          // number of keys, hot or cold
	sum  protocol.Sum // of keys' IDs
	// hi bounds the block's range: its keys are > the previous block's
	// hi and <= its own. It is at least its last key (equal but after a
	// removal of the last key).
	hi protocol.SyncKey
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

// search returns the index of the first key in keys >= k and whether it is k.
func search(keys []protocol.SyncKey, k protocol.SyncKey) (int, bool) {
	return slices.BinarySearchFunc(keys, k, protocol.SyncKey.Compare)
}

// pos is a position in a keyList: key j of block i, or the end
// (i == len(blocks), j == 0).
type pos struct{ i, j int }

// blockFor returns the index of the first block whose range reaches k,
// or len(blocks).
func (l *keyList) blockFor(k protocol.SyncKey) int {
	return sort.Search(len(l.blocks), func(i int) bool { return !l.blocks[i].hi.Less(k) })
}

// keysOf returns block i's keys, reading them back if it is cold.
func (l *keyList) keysOf(i int) ([]protocol.SyncKey, error) {
	b := l.blocks[i]
	b.used = true
	if !b.cold {
		return b.keys, nil
	}
	if l.mayLoad != nil {
		if err := l.mayLoad(); err != nil {
			return nil, err
		}
	}
	lo := protocol.MinSyncKey
	if i > 0 {
		lo = successor(l.blocks[i-1].hi)
	}
	keys, err := l.load(lo, b.hi)
	if err != nil {
		return nil, err
	}
	b.keys, b.cold = slices.Clip(keys), false
	l.n += len(keys) - b.n
	b.n, b.sum = len(keys), sumKeys(keys)
	l.heat(b)
	return b.keys, nil
}

// heat counts b, which just became hot, and queues it for cool.
func (l *keyList) heat(b *keyBlock) {
	l.hot++
	if l.load != nil {
		l.queue = append(l.queue, b)
	}
}

// drop counts b, a hot block just removed from the list, out. It stays
// in the queue until cool passes it, unless the dead are more than half
// of the queue, which is then compacted (O(1) amortised per block); its
// keys are let go at once (a space's retention drops blocks steadily: up
// to 255 dead ones kept ~5 MB of keys).
func (l *keyList) drop(b *keyBlock) {
	b.dead, b.keys = true, nil
	l.hot--
	if l.load == nil {
		return
	}
	if l.dead++; l.dead > len(l.queue)/2 {
		l.queue = slices.DeleteFunc(l.queue, func(b *keyBlock) bool { return b.dead })
		l.dead = 0
	}
}

// cool makes blocks cold until at most maxHot are hot, never the last
// block. Operations call it when they are done. It chooses them with a
// clock hand (second chance): the hot blocks wait in a queue; the block
// at its front is made cold, unless it was used since it joined the
// back, in which case it joins the back again, unused. Each step cools a
// block, spares one once per use, passes a dead one once, or passes the
// last block (once per turn of the queue): O(1) amortised, however many
// blocks are cold, where finding the least recently used block scanned
// them all.
func (l *keyList) cool() {
	if l.load == nil || len(l.blocks) == 0 {
		return
	}
	last := l.blocks[len(l.blocks)-1]
	// Without a cooling, a turn of the queue unmarks every block and the
	// next cools one, unless the last block is the only one hot.
	for idle := 0; l.hot > l.maxHot && len(l.queue) > 0 && idle <= 2*len(l.queue); {
		b := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		switch {
		case b.dead:
			l.dead--
		case b.used || b == last:
			b.used = false
			l.queue = append(l.queue, b)
			idle++
		default:
			b.keys, b.cold = nil, true
			l.hot--
			idle = 0
		}
	}
}

// lowerBound returns the position of the first key >= k.
func (l *keyList) lowerBound(k protocol.SyncKey) (pos, error) {
	for i := l.blockFor(k); i < len(l.blocks); i++ {
		keys, err := l.keysOf(i)
		if err != nil {
			return pos{}, err
		}
		if j, _ := search(keys, k); j < len(keys) {
			return pos{i, j}, nil
		}
		// k is above block i's keys (its last was removed, or it was
		// read back empty): the first key >= k is in a later block.
	}
	return pos{len(l.blocks), 0}, nil
}

// insert adds k, reporting whether it was absent.
func (l *keyList) insert(k protocol.SyncKey) (bool, error) {
	defer l.cool()
	if len(l.blocks) == 0 {
		l.blocks = append(l.blocks, l.newBlock([]protocol.SyncKey{k}))
		l.n++
		return true, nil
	}
	i := min(l.blockFor(k), len(l.blocks)-1)
	keys, err := l.keysOf(i)
	if err != nil {
		return false, err
	}
	b := l.blocks[i]
	j, found := search(keys, k)
	if found {
		return false, nil
	}
	l.n++
	if b.hi.Less(k) && i == len(l.blocks)-1 && len(b.keys) >= maxBlockKeys {
		// Appending: leave b full. Above b's bound, not only its last key:
		// with its newest key removed, a key between its last and its
		// bound is in b's range and goes in b (it splits).
		l.blocks = append(l.blocks, l.newBlock([]protocol.SyncKey{k}))
		return true, nil
	}
	b.keys = slices.Insert(b.keys, j, k)
	b.n++
	b.sum.Add(k.ID)
	if b.hi.Less(k) {
		b.hi = k // the last block, extended
	}
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
		nb := l.newBlock(append(make([]protocol.SyncKey, 0, maxBlockKeys), b.keys[cut:]...))
		nb.hi = b.hi
		b.keys = slices.Clone(b.keys[:cut])
		b.n, b.hi = len(b.keys), b.keys[len(b.keys)-1]
		b.sum.SubSum(nb.sum)
		l.blocks = slices.Insert(l.blocks, i+1, nb)
	}
	return true, nil
}

// newBlock returns a hot block of keys (sorted, at least one).
func (l *keyList) newBlock(keys []protocol.SyncKey) *keyBlock {
	if cap(keys) < 64 {
		keys = append(make([]protocol.SyncKey, 0, 64), keys...)
	}
	b := &keyBlock{keys: keys, n: len(keys), sum: sumKeys(keys), hi: keys[len(keys)-1], used: true}
	l.heat(b)
	return b
}

// remove deletes k, reporting whether it was present.
func (l *keyList) remove(k protocol.SyncKey) (bool, error) {
	defer l.cool()
	i := l.blockFor(k)
	if i == len(l.blocks) {
		return false, nil
	}
	keys, err := l.keysOf(i)
	if err != nil {
		return false, err
	}
	b := l.blocks[i]
	j, found := search(keys, k)
	if !found {
		l.dropIfEmpty(i)
		return false, nil
	}
	l.n--
	b.keys = slices.Delete(b.keys, j, j+1)
	b.n--
	b.sum.Sub(k.ID)
	switch {
	case len(b.keys) == 0:
		l.dropIfEmpty(i)
	case len(b.keys) < minBlockKeys:
		if i+1 < len(l.blocks) && !l.blocks[i+1].cold && len(b.keys)+len(l.blocks[i+1].keys) <= maxBlockKeys {
			l.merge(i)
		} else if i > 0 && !l.blocks[i-1].cold && len(l.blocks[i-1].keys)+len(b.keys) <= maxBlockKeys {
			l.merge(i - 1)
		}
	}
	return true, nil
}

// dropIfEmpty removes block i if it is hot and holds no key; the next
// block's range takes in its own.
func (l *keyList) dropIfEmpty(i int) {
	if b := l.blocks[i]; !b.cold && len(b.keys) == 0 {
		l.blocks = slices.Delete(l.blocks, i, i+1)
		l.drop(b)
	}
}

// merge joins block i+1 into block i; both are hot.
func (l *keyList) merge(i int) {
	a, b := l.blocks[i], l.blocks[i+1]
	a.keys = append(a.keys, b.keys...)
	a.n += b.n
	a.sum.AddSum(b.sum)
	a.hi = b.hi
	a.used = a.used || b.used
	l.blocks = slices.Delete(l.blocks, i+1, i+2)
	l.drop(b)
}

// span returns the positions of the first key >= lo and the first key
// >= hi (hi's clamped to lo's), and the number of keys between them.
func (l *keyList) span(lo, hi protocol.SyncKey) (start, end pos, n int, err error) {
	if start, err = l.lowerBound(lo); err != nil || !lo.Less(hi) {
		return start, start, 0, err
	}
	if end, err = l.lowerBound(hi); err != nil {
		return start, start, 0, err
	}
	if start.i == end.i {
		return start, end, end.j - start.j, nil
	}
	n = l.blocks[start.i].n - start.j
	for i := start.i + 1; i < end.i; i++ {
		n += l.blocks[i].n
	}
	return start, end, n + end.j, nil
}

// summary returns the count and ID sum of the keys in [lo, hi).
func (l *keyList) summary(lo, hi protocol.SyncKey) (int, protocol.Sum, error) {
	defer l.cool()
	start, end, n, err := l.span(lo, hi)
	var sum protocol.Sum
	if n == 0 || err != nil {
		return 0, sum, err
	}
	if start.i == end.i {
		b := l.blocks[start.i]
		if n <= len(b.keys)-n { // sum the range or its complement, whichever is shorter
			return n, sumKeys(b.keys[start.j:end.j]), nil
		}
		sum = b.sum
		sum.SubSum(sumKeys(b.keys[:start.j]))
		sum.SubSum(sumKeys(b.keys[end.j:]))
		return n, sum, nil
	}
	sum = l.blocks[start.i].suffixSum(start.j)
	for i := start.i + 1; i < end.i; i++ {
		sum.AddSum(l.blocks[i].sum)
	}
	if end.i < len(l.blocks) {
		sum.AddSum(l.blocks[end.i].prefixSum(end.j))
	}
	return n, sum, nil
}

// prefixSum returns the sum of b's first j keys, summing the shorter
// side; b is hot.
func (b *keyBlock) prefixSum(j int) protocol.Sum {
	if j <= len(b.keys)/2 {
		return sumKeys(b.keys[:j])
	}
	s := b.sum
	s.SubSum(sumKeys(b.keys[j:]))
	return s
}

// suffixSum returns the sum of b's keys from j on; b is hot.
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
func (l *keyList) keys(lo, hi protocol.SyncKey, limit int) ([]protocol.SyncKey, error) {
	defer l.cool()
	var out []protocol.SyncKey
	if !lo.Less(hi) {
		return out, nil
	}
	p, err := l.lowerBound(lo)
	if err != nil {
		return nil, err
	}
	for i := p.i; i < len(l.blocks); i++ {
		keys, err := l.keysOf(i)
		if err != nil {
			return nil, err
		}
		if i == p.i {
			keys = keys[p.j:]
		}
		for _, k := range keys {
			if !k.Less(hi) || len(out) == limit {
				return out, nil
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// split returns the boundaries b1 < … < bk (k < parts) cutting [lo, hi)
// into k+1 non-empty ranges [lo,b1), [b1,b2), …, [bk,hi) whose counts
// differ by at most one; fewer ranges when the range holds fewer than
// parts keys, none when it holds at most one. parts must be positive.
func (l *keyList) split(lo, hi protocol.SyncKey, parts int) ([]protocol.SyncKey, error) {
	defer l.cool()
	start, _, n, err := l.span(lo, hi)
	k := min(parts, n)
	if k <= 1 || err != nil {
		return nil, err
	}
	out := make([]protocol.SyncKey, 0, k-1)
	p, at := start, 0 // at: rank of p within the range
	for r := 1; r < k; r++ {
		rank := r * n / k // 1 <= rank < n, strictly increasing in r
		key, q, err := l.advance(p, rank-at)
		if errors.Is(err, errPastEnd) || (err == nil && !key.Less(hi)) {
			return out, nil // fewer parts: the range lost keys as it was read
		}
		if err != nil {
			return nil, err
		}
		p, at = q, rank
		out = append(out, key)
	}
	return out, nil
}

// nth returns the key of rank i (0-based) in the whole list; 0 <= i < n.
func (l *keyList) nth(i int) (protocol.SyncKey, error) {
	defer l.cool()
	k, _, err := l.advance(pos{}, i)
	return k, err
}

// errPastEnd is advance's error when the list has fewer keys than it
// counted: a block read back held fewer than its count said (a delete
// committed but not yet applied to the list).
var errPastEnd = errors.New("store: the key list changed while it was read")

// advance returns the key d keys after p and its position. Blocks it
// passes over whole are not read back.
func (l *keyList) advance(p pos, d int) (protocol.SyncKey, pos, error) {
	for p.i < len(l.blocks) {
		if d < l.blocks[p.i].n-p.j {
			keys, err := l.keysOf(p.i)
			if err != nil {
				return protocol.SyncKey{}, p, err
			}
			if p.j+d < len(keys) {
				return keys[p.j+d], pos{p.i, p.j + d}, nil
			}
		}
		d -= max(l.blocks[p.i].n-p.j, 0)
		p = pos{p.i + 1, 0}
	}
	return protocol.SyncKey{}, p, errPastEnd
}
