package mesh

import (
	"log/slog"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Connection-manager protection tags of the peers this node keeps.
const (
	tagBootstrap = "weft-bootstrap"
	tagManual    = "weft-manual"
	tagSpace     = "weft-space" // a member of a joined space: see members
)

// access decides who may reach this node: who is allowed in at all (a
// closed mesh), and whom it keeps (protected peers, which the connection
// limits and the relay favour). Its methods are safe for concurrent use.
type access struct {
	allow  func(peer.ID) bool // Config.Allow; nil: an open mesh
	keep   func(peer.ID) bool // Config.Keep; may be nil
	boot   map[peer.ID]bool   // bootstrap peers: allowed and kept
	closed bool               // Allow or NetworkKey set: only allowed peers get in
	cm     connmgr.ConnManager
}

func newAccess(cfg Config, boot []peer.AddrInfo, cm connmgr.ConnManager) *access {
	a := &access{
		allow:  cfg.Allow,
		keep:   cfg.Keep,
		boot:   make(map[peer.ID]bool, len(boot)),
		closed: cfg.Allow != nil || cfg.NetworkKey != nil,
		cm:     cm,
	}
	for _, ai := range boot {
		a.boot[ai.ID] = true
	}
	return a
}

// allowed reports whether p may connect at all.
func (a *access) allowed(p peer.ID) bool {
	return a.allow == nil || a.boot[p] || a.allow(p)
}

// kept reports whether p is one of the peers this node keeps: a bootstrap
// peer, one connected with Connect, a member of a joined space, one Keep
// names, or in a closed mesh with an allowlist, one the allowlist names.
func (a *access) kept(p peer.ID) bool {
	if a.boot[p] || (a.allow != nil && a.allow(p)) || (a.keep != nil && a.keep(p)) {
		return true
	}
	return a.cm.IsProtected(p, tagManual) || a.cm.IsProtected(p, tagSpace)
}

// relayFor reports whether the relay service may serve p in mode
// RelayMembers: in a closed mesh, every peer allowed in (a keyed mesh
// without an allowlist lets in only holders of the key); otherwise the
// peers this node keeps.
func (a *access) relayFor(p peer.ID) bool {
	if a.closed {
		return a.allowed(p)
	}
	return a.kept(p)
}

// relayACL is the relay service's ACL in mode RelayMembers: a reservation
// for a peer relayFor accepts, and a circuit only between two of them.
type relayACL struct{ a *access }

func (r relayACL) AllowReserve(p peer.ID, _ ma.Multiaddr) bool { return r.a.relayFor(p) }
func (r relayACL) AllowConnect(src peer.ID, _ ma.Multiaddr, dest peer.ID) bool {
	return r.a.relayFor(src) && r.a.relayFor(dest)
}

// gate is the host's connection gater. It refuses to dial peers the
// allowlist refuses, drops their connections once the handshake names them
// (either direction: the peer ID is known only then), and admits an
// inbound connection of a peer this node does not keep only while such
// peers hold fewer than inbound connections; the resource manager's own
// inbound limit is inbound plus the reserve, so kept peers still get in
// when strangers have filled their share. Then it asks next (Config.Gater),
// if set.
type gate struct {
	a       *access
	inbound int
	next    connmgr.ConnectionGater
	log     *slog.Logger
	net     atomic.Pointer[network.Network] // set once the host is built
}

func (g *gate) InterceptPeerDial(p peer.ID) bool {
	if !g.a.allowed(p) {
		g.log.Debug("not dialling a peer not allowed in", "peer", p)
		return false
	}
	return g.next == nil || g.next.InterceptPeerDial(p)
}

func (g *gate) InterceptAddrDial(p peer.ID, addr ma.Multiaddr) bool {
	return g.next == nil || g.next.InterceptAddrDial(p, addr)
}

func (g *gate) InterceptAccept(cm network.ConnMultiaddrs) bool {
	return g.next == nil || g.next.InterceptAccept(cm)
}

func (g *gate) InterceptSecured(dir network.Direction, p peer.ID, cm network.ConnMultiaddrs) bool {
	if !g.a.allowed(p) {
		g.log.Debug("refused a peer not allowed in", "peer", p, "addr", cm.RemoteMultiaddr(), "dir", direction(dir))
		return false
	}
	if dir == network.DirInbound && !g.a.kept(p) && g.strangers() >= g.inbound {
		g.log.Debug("refused a peer: inbound connections full", "peer", p, "addr", cm.RemoteMultiaddr(), "limit", g.inbound)
		return false
	}
	return g.next == nil || g.next.InterceptSecured(dir, p, cm)
}

func (g *gate) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	if g.next == nil {
		return true, 0
	}
	return g.next.InterceptUpgraded(c)
}

// strangers counts the open inbound connections of peers this node does
// not keep. Handshakes that finish at once may each see the count below
// the limit, so it can be passed by a few; the resource manager's limit
// still holds.
func (g *gate) strangers() int {
	np := g.net.Load()
	if np == nil {
		return 0
	}
	n := 0
	for _, c := range (*np).Conns() {
		if c.Stat().Direction == network.DirInbound && !g.a.kept(c.RemotePeer()) {
			n++
		}
	}
	return n
}
