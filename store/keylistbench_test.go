package store

import (
	"fmt"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// BenchmarkKeyListBuild builds a space's range index in order, as at
// Open or a first sync, with the default number of hot blocks: each new
// block cools one, and choosing it must not cost a scan of every block.
func BenchmarkKeyListBuild(b *testing.B) {
	for _, n := range []int{1 << 20, 16 << 20} {
		b.Run(fmt.Sprint(n>>20, "M"), func(b *testing.B) {
			for b.Loop() {
				var l keyList
				l.load = func(lo, hi protocol.SyncKey) ([]protocol.SyncKey, error) {
					b.Fatal("an in-order build read a block back")
					return nil, nil
				}
				l.maxHot = DefaultIndexBlocks
				for i := range n {
					if _, err := l.insert(protocol.SyncKey{Time: int64(i)}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}
