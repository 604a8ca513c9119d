package mesh

import (
	"github.com/libp2p/go-libp2p/core/event"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// closeEarlierRuns closes the QUIC connections to an identified peer that
// lead to an earlier run of it. A daemon that was killed and came back on
// new ports leaves its peers holding QUIC connections to a process that is
// gone: nothing answers on the old port, not even with a reset, so they
// linger until QUIC's idle timeout (30 s), and the streams opened on them
// (gossip, sync) stall until then. TCP has no such problem: the kernel
// resets a dead process's connections.
//
// A QUIC connection leads to an earlier run when it is older than the
// connection the identification (or identify push) came on, and goes to
// one of the peer's listen IPs but to a port it no longer listens on
// (libp2p's QUIC dials from its listen port, so this holds for inbound
// connections too). Connections to other IPs (through a NAT, say) and
// relayed ones are left alone.
func (m *Mesh) closeEarlierRuns(ev event.EvtPeerIdentificationCompleted) {
	if ev.Conn == nil || len(ev.ListenAddrs) == 0 {
		return
	}
	ips := make(map[string]bool)
	listening := make(map[string]bool)
	for _, a := range ev.ListenAddrs {
		if ip, port, ok := quicEndpoint(a); ok {
			ips[ip] = true
			listening[ip+"/"+port] = true
		}
	}
	opened := ev.Conn.Stat().Opened
	for _, c := range m.h.Network().ConnsToPeer(ev.Peer) {
		st := c.Stat()
		if c == ev.Conn || st.Limited || !st.Opened.Before(opened) {
			continue
		}
		ip, port, ok := quicEndpoint(c.RemoteMultiaddr())
		if !ok || !ips[ip] || listening[ip+"/"+port] {
			continue
		}
		m.log.Debug("closing a connection to an earlier run of the peer", "peer", ev.Peer, "addr", c.RemoteMultiaddr())
		_ = c.Close()
	}
}

// quicEndpoint returns the IP and UDP port of a QUIC multiaddr.
func quicEndpoint(a ma.Multiaddr) (ip, port string, ok bool) {
	if !isQUIC(a) || isCircuit(a) {
		return "", "", false
	}
	nip, err := manet.ToIP(a)
	if err != nil {
		return "", "", false
	}
	port, err = a.ValueForProtocol(ma.P_UDP)
	if err != nil {
		return "", "", false
	}
	return nip.String(), port, true
}
