package mesh

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The resource manager's metrics (libp2p_rcmgr_…) cost CPU on every
// stream, so a mesh reports to them only with Config.ResourceMetrics,
// while libp2p's other metrics go to Config.Registerer either way.
// libp2p's collectors are shared by the process (other tests' hosts move
// them too), so the test looks at what its own connections change: the
// resource manager's count of connections.
func TestResourceMetrics(t *testing.T) {
	gather := func(reg *prometheus.Registry) (conns float64, swarm int) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch name := mf.GetName(); {
			case name == "libp2p_rcmgr_connections":
				for _, m := range mf.GetMetric() {
					conns += m.GetGauge().GetValue()
				}
			case strings.HasPrefix(name, "libp2p_swarm_"):
				swarm += len(mf.GetMetric())
			}
		}
		return conns, swarm
	}

	off := prometheus.NewRegistry()
	a, _ := newTestMesh(t, Config{Registerer: off})
	before, _ := gather(off)
	b, _ := newTestMesh(t, Config{Registerer: prometheus.NewRegistry()}, a)
	waitFor(t, 10*time.Second, "b connected to a", func() bool { return connected(a, b) })
	if after, swarm := gather(off); after != before || swarm == 0 {
		t.Fatalf("without ResourceMetrics: the resource manager's connections went %v → %v; %d swarm metrics", before, after, swarm)
	}

	on := prometheus.NewRegistry()
	c, _ := newTestMesh(t, Config{Registerer: on, ResourceMetrics: true}, a)
	waitFor(t, 10*time.Second, "c connected to a", func() bool { return connected(a, c) })
	// c counts its connection to a (and to b, if it met b).
	waitFor(t, 10*time.Second, "c's resource manager counting its connections", func() bool {
		n, _ := gather(on)
		return n >= before+1
	})
}
