package mesh

import (
	"context"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
)

// punchTracer writes what libp2p's hole punching (DCUtR) does into the
// mesh's log, at debug level: which direct dials and punches it tried with
// a peer, to which addresses, and how each ended. Without it a pair that
// stays relayed says nothing about why; with it, "no public address", a
// protocol error on the circuit, or punches that time out tell apart a
// NAT that hole punching cannot cross from a try that never started.
type punchTracer struct{ log *slog.Logger }

// Trace implements holepunch.EventTracer.
func (t punchTracer) Trace(e *holepunch.Event) {
	if !t.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	switch ev := e.Evt.(type) {
	case *holepunch.DirectDialEvt:
		t.log.Debug("hole punch: direct dial", "peer", e.Remote, "ok", ev.Success, "took", ms(ev.EllapsedTime), "err", ev.Error)
	case *holepunch.ProtocolErrorEvt:
		t.log.Debug("hole punch: protocol error", "peer", e.Remote, "err", ev.Error)
	case *holepunch.StartHolePunchEvt:
		t.log.Debug("hole punch: punching", "peer", e.Remote, "addrs", ev.RemoteAddrs, "rtt", ms(ev.RTT))
	case *holepunch.EndHolePunchEvt:
		t.log.Debug("hole punch: punch ended", "peer", e.Remote, "ok", ev.Success, "took", ms(ev.EllapsedTime), "err", ev.Error)
	case *holepunch.HolePunchAttemptEvt:
		t.log.Debug("hole punch: attempt", "peer", e.Remote, "n", ev.Attempt)
	default:
		t.log.Debug("hole punch: "+e.Type, "peer", e.Remote)
	}
}

// ms rounds d to a tenth of a millisecond for a log line.
func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
