package mesh

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
)

// punchTracer writes what libp2p's hole punching (DCUtR) does into the
// mesh's log, at debug level: which direct dials and punches it tried with
// a peer, to which addresses, and how each ended. Without it a pair that
// stays relayed says nothing about why; with it, "no public address", a
// protocol error on the circuit, or punches that time out tell apart a
// NAT that hole punching cannot cross from a try that never started.
//
// The first punch over TCP alone is also said at info level, once: over TCP
// a punch that fails can keep a pair from punching for minutes (a try's
// dials then leave from random ports, which the NAT maps elsewhere; see
// README, Behind NAT), and the way around it is the user's to take.
type punchTracer struct {
	log     *slog.Logger
	tcpOnly *sync.Once
}

func newPunchTracer(log *slog.Logger) punchTracer {
	return punchTracer{log: log, tcpOnly: new(sync.Once)}
}

// Trace implements holepunch.EventTracer.
func (t punchTracer) Trace(e *holepunch.Event) {
	if ev, ok := e.Evt.(*holepunch.StartHolePunchEvt); ok && !slices.ContainsFunc(ev.RemoteAddrs, isQUIC) {
		t.tcpOnly.Do(func() {
			t.log.Info("hole punching over TCP only: a TCP punch that fails can keep the pair relayed for minutes; "+
				"peers punch over QUIC once a peer they reach over QUIC tells them their address (give --bootstrap a relay's /udp/…/quic-v1 address)",
				"peer", e.Remote, "addrs", ev.RemoteAddrs)
		})
	}
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

// isQUIC reports whether multiaddr text a is a QUIC address.
func isQUIC(a string) bool { return strings.Contains(a, "/quic") }

// ms rounds d to a tenth of a millisecond for a log line.
func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
