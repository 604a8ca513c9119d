package node

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// TestParentsFirst: every message comes after those of the batch it names,
// each index exactly once, whatever the order given; duplicates and
// parents outside the batch are fine.
func TestParentsFirst(t *testing.T) {
	id := func(i int) protocol.ID { return protocol.MessageID([]byte(fmt.Sprint("m", i))) }
	const n = 300
	ms := make([]*protocol.Message, n)
	for i := range ms {
		m := &protocol.Message{ID: id(i)}
		for k := rand.IntN(4); k > 0; k-- {
			m.Prev = append(m.Prev, id(rand.IntN(i+5)-4)) // earlier ones, or none of the batch
		}
		ms[i] = m
	}
	ms = append(ms, ms[7]) // a duplicate
	for round := range 20 {
		rand.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		order := parentsFirst(ms)
		if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, func() []int {
			all := make([]int, len(ms))
			for i := range all {
				all[i] = i
			}
			return all
		}()) {
			t.Fatalf("round %d: not every index once: %v", round, got)
		}
		placed := map[protocol.ID]bool{}
		inBatch := map[protocol.ID]bool{}
		for _, m := range ms {
			inBatch[m.ID] = true
		}
		for _, i := range order {
			for _, p := range ms[i].Prev {
				if inBatch[p] && !placed[p] && p != ms[i].ID {
					t.Fatalf("round %d: %s before its parent %s", round, ms[i].ID, p)
				}
			}
			placed[ms[i].ID] = true
		}
	}
	if got := parentsFirst(nil); len(got) != 0 {
		t.Fatalf("an empty batch: %v", got)
	}
}
