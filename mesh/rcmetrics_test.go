package mesh

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The resource manager's metrics (libp2p_rcmgr_…) cost CPU on every
// stream, so a mesh exports them only with Config.ResourceMetrics, while
// libp2p's other metrics go to Config.Registerer either way. libp2p's
// collectors are shared by the process, so the mesh without them is
// started first: no other test of this package turns them on.
func TestResourceMetrics(t *testing.T) {
	rcmgrLimits := func(reg *prometheus.Registry) (rcmgr, swarm int) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch name := mf.GetName(); {
			case name == "libp2p_rcmgr_limit":
				rcmgr = len(mf.GetMetric())
			case strings.HasPrefix(name, "libp2p_swarm_"):
				swarm += len(mf.GetMetric())
			}
		}
		return rcmgr, swarm
	}

	off := prometheus.NewRegistry()
	a, _ := newTestMesh(t, Config{Registerer: off})
	if n, _ := rcmgrLimits(off); n != 0 {
		t.Fatalf("without ResourceMetrics the resource manager reported %d limits", n)
	}

	on := prometheus.NewRegistry()
	b, _ := newTestMesh(t, Config{Registerer: on, ResourceMetrics: true}, a)
	waitFor(t, 10*time.Second, "b connected to a", func() bool { return connected(a, b) })
	if n, _ := rcmgrLimits(on); n == 0 {
		t.Fatal("with ResourceMetrics the resource manager reported no limits")
	}
	if _, n := rcmgrLimits(off); n == 0 {
		t.Fatal("without ResourceMetrics libp2p's swarm metrics are gone too")
	}
}
