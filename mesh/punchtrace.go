package mesh

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

// punchTracer writes what libp2p's hole punching (DCUtR) does into the
// mesh's log, at debug level: which direct dials and punches it tried with
// a peer, to which addresses, and how each ended. Without it a pair that
// stays relayed says nothing about why; with it, "no public address", a
// protocol error on the circuit, or punches that time out tell apart a
// NAT that hole punching cannot cross from a try that never started.
//
// The first punch with a peer that offered TCP addresses only is also
// said at info level, once per run, when this node has QUIC (a mesh with
// a network key has not): over TCP a punch that fails can keep a pair from
// punching for minutes (a try's dials then leave from random ports, which
// the NAT maps elsewhere; see README, Behind NAT), and the way around it
// is the user's to take, on either side. Once per run: a peer that offers
// TCP only, on purpose or not, cannot make the line repeat.
type punchTracer struct {
	log     *slog.Logger
	quic    bool // this node can punch over QUIC
	tcpOnly sync.Once
}

// Trace implements holepunch.EventTracer.
func (t *punchTracer) Trace(e *holepunch.Event) {
	if ev, ok := e.Evt.(*holepunch.StartHolePunchEvt); ok && t.quic && !slices.ContainsFunc(ev.RemoteAddrs, isQUICText) {
		t.tcpOnly.Do(func() {
			t.log.Info("hole punching over TCP only: the peer offered no QUIC address, and a TCP punch that fails can keep a pair relayed for minutes; "+
				"a node punches over QUIC once a peer it reaches over QUIC has told it its address (give --bootstrap a relay's /udp/…/quic-v1 address, on both sides)",
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

// isQUIC reports whether a is a QUIC address.
func isQUIC(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_QUIC_V1)
	return err == nil
}

// isQUICText is isQUIC for a multiaddr's text (false if it is none).
func isQUICText(s string) bool {
	a, err := ma.NewMultiaddr(s)
	return err == nil && isQUIC(a)
}

// ms rounds d to a tenth of a millisecond for a log line.
func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
