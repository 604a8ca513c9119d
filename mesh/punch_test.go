package mesh

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// TestPunchAgain: two nodes behind NATs reach each other only through a
// relay, and hole punching does not make them direct (here, on loopback,
// libp2p does not even try: it punches only from public addresses). The
// one with the lower ID dials the other again after Config.PunchAgain and
// then after waits that double, each dial a new circuit on which the other
// side would start DCUtR again; the one with the higher ID dials no more
// than the once it was asked to.
func TestPunchAgain(t *testing.T) {
	relay, _ := newTestMesh(t, Config{Reachability: ReachabilityPublic, Relay: RelayOpen})
	natted := Config{
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Reachability: ReachabilityPrivate,
		Gater: coneNAT{relay.ID()}, PunchAgain: 300 * time.Millisecond,
		punchGap: 600 * time.Millisecond,
	}
	lo, _ := newTestMesh(t, natted, relay)
	hi, _ := newTestMesh(t, natted, relay)
	if bytes.Compare([]byte(lo.ID()), []byte(hi.ID())) > 0 {
		lo, hi = hi, lo
	}
	outbound := func(from, to *Mesh) *atomic.Int64 {
		var n atomic.Int64
		from.h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
			if c.RemotePeer() == to.ID() && c.Stat().Direction == network.DirOutbound {
				if !isCircuit(c.RemoteMultiaddr()) {
					t.Errorf("%s reached %s directly at %s: the gate should refuse that", from.ID(), to.ID(), c.RemoteMultiaddr())
				}
				n.Add(1)
			}
		}})
		return &n
	}
	byLo, byHi := outbound(lo, hi), outbound(hi, lo)

	// lo reaches hi through the relay, once hi's reservation is made: lo
	// dialled the circuit, so lo can dial it again.
	waitFor(t, 30*time.Second, "lo reaches hi through the relay", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return lo.Dial(ctx, hi.ID()) == nil
	})
	// Counted from here: lo's own tries close the circuit and dial it
	// again from 0.3 s on, the waits between them doubling, so each one
	// let by first makes the next three come later (on a loaded machine,
	// seconds later).
	asked, base := byHi.Load(), byLo.Load()
	t0 := time.Now()
	// Tries at about 0.3 s, then 0.6 s and 1.2 s later.
	waitFor(t, 60*time.Second, "lo to dial hi again three times", func() bool { return byLo.Load() >= base+3 })
	took := time.Since(t0)
	t.Logf("lo dialled hi %d times in %v", byLo.Load()-base, took.Round(time.Millisecond))
	if took < 2*300*time.Millisecond {
		t.Errorf("three tries in %v: the waits between them do not double", took)
	}
	if n := byHi.Load(); n != asked {
		t.Errorf("hi dialled lo %d times more: only the lower ID should", n-asked)
	}
	// The tries leave gaps between circuits: read the pair's state by
	// polling, not at one moment.
	waitFor(t, 20*time.Second, "lo–hi connected through the relay after the tries", func() bool {
		return lo.h.Network().Connectedness(hi.ID()) == network.Limited
	})
}

// TestPuncherDue: when relayed peers are due to be tried, and how the
// wait grows.
func TestPuncherDue(t *testing.T) {
	p := &puncher{first: time.Second}
	a, b := peer.ID("a"), peer.ID("b")
	t0 := time.Unix(1000, 0)
	if got, _ := p.due([]peer.ID{a}, t0); len(got) != 0 {
		t.Fatalf("a peer just seen relayed is due: %v", got)
	}
	if got, _ := p.due([]peer.ID{a, b}, t0.Add(999*time.Millisecond)); len(got) != 0 {
		t.Fatalf("due before first: %v", got)
	}
	if got, _ := p.due([]peer.ID{a, b}, t0.Add(time.Second)); len(got) != 1 || got[0] != a {
		t.Fatalf("due at first: %v, want [a]", got)
	}
	if got, _ := p.due([]peer.ID{a, b}, t0.Add(3*time.Second)); len(got) != 1 || got[0] != b {
		t.Fatalf("a, whose try is under way, is due again: %v, want [b]", got)
	}
	// a's try closed its circuit and is dialling: a is kept meanwhile.
	if got, _ := p.due(nil, t0.Add(3*time.Second)); len(got) != 0 {
		t.Fatalf("due with no peer relayed: %v", got)
	}
	if _, ok := p.m[a]; !ok {
		t.Fatal("a, being tried, forgotten")
	}
	now := t0.Add(4 * time.Second)
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		p.tried(a, now)
		if got, _ := p.due([]peer.ID{a}, now.Add(wait-time.Millisecond)); len(got) != 0 {
			t.Fatalf("try %d: due before %v", i+1, wait)
		}
		now = now.Add(wait)
		if got, _ := p.due([]peer.ID{a}, now); len(got) != 1 {
			t.Fatalf("try %d: not due after %v", i+1, wait)
		}
	}
	// b is gone (not relayed: direct, or disconnected) and no longer
	// tried: forgotten, so it
	// starts again from first when it is relayed again.
	p.tried(b, now)
	if _, forgot := p.due([]peer.ID{a}, now); len(forgot) != 1 || forgot[0] != b {
		t.Fatalf("forgotten: %v, want [b]", forgot)
	}
	if _, ok := p.m[b]; ok {
		t.Fatal("b, no longer relayed, still kept")
	}
	if got, _ := p.due([]peer.ID{a, b}, now); len(got) != 0 {
		t.Fatalf("b due at once after coming back: %v", got)
	}
	// The wait after the first try is at least the gap (see punchGap).
	g := &puncher{first: time.Second, gap: punchGap}
	g.due([]peer.ID{a}, t0)
	if got, _ := g.due([]peer.ID{a}, t0.Add(time.Second)); len(got) != 1 {
		t.Fatalf("not due at first: %v", got)
	}
	g.tried(a, t0.Add(time.Second))
	if got, _ := g.due([]peer.ID{a}, t0.Add(time.Second+punchGap-time.Millisecond)); len(got) != 0 {
		t.Fatalf("tried again within %v of the first try", punchGap)
	}
	if got, _ := g.due([]peer.ID{a}, t0.Add(time.Second+punchGap)); len(got) != 1 {
		t.Fatalf("not tried again %v after the first try", punchGap)
	}
	// The wait stops growing at punchMax.
	for range 20 {
		p.tried(a, now)
		now = now.Add(punchMax)
		if got, _ := p.due([]peer.ID{a}, now); len(got) != 1 {
			t.Fatalf("not due %v after a try", punchMax)
		}
	}
}

// TestPuncherLater: a due try put off stays due at every check, and says
// it is the first put-off once per try.
func TestPuncherLater(t *testing.T) {
	p := &puncher{first: time.Second}
	a := peer.ID("a")
	t0 := time.Unix(1000, 0)
	p.due([]peer.ID{a}, t0)
	now := t0.Add(time.Second)
	for i := range 3 {
		if got, _ := p.due([]peer.ID{a}, now); len(got) != 1 {
			t.Fatalf("check %d: a put off is not due: %v", i, got)
		}
		if first := p.later(a); first != (i == 0) {
			t.Fatalf("check %d: later says first %v", i, first)
		}
		now = now.Add(time.Second)
	}
	p.due([]peer.ID{a}, now)
	p.tried(a, now)
	now = now.Add(2 * time.Second)
	if got, _ := p.due([]peer.ID{a}, now); len(got) != 1 {
		t.Fatalf("not due after the wait: %v", got)
	}
	if !p.later(a) {
		t.Fatal("the first put-off after a try is not reported as first")
	}
	if p.later(peer.ID("unknown")) {
		t.Fatal("a peer never seen is reported as put off")
	}
}

// TestCircuitCloseByTryNotShort: a circuit member whose circuits end a
// second after each redial is dropped after circuitFailures of them (a
// peer or relay that cuts circuits), but not when this node's own tries
// of punchLoop closed them.
func TestCircuitCloseByTryNotShort(t *testing.T) {
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/1/p2p-circuit")
	for _, byTry := range []bool{false, true} {
		var c circuitPeers
		p := peer.ID("p")
		c.add(p, addr)
		now := time.Unix(1000, 0)
		kept := true
		for range circuitFailures + 1 {
			a, _ := c.startRedial(p, now, byTry)
			if a == nil {
				kept = false
				break
			}
			c.endRedial(p)
			c.redialed(p, addr, now)
			now = now.Add(time.Second)
		}
		if kept != byTry {
			t.Errorf("closed by a try %v: kept %v", byTry, kept)
		}
	}
}
