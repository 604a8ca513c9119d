package mesh

import (
	"math"
	"net/netip"

	"github.com/libp2p/go-libp2p"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

// loopbackNets are the networks exempt from the per-IP limit by default, as in
// libp2p: a machine's own connections.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// resourceLimits returns the resource manager's limits and options for
// cfg (with its defaults set): libp2p's auto-scaled defaults with weft's
// service limits (serviceLimits), the system's inbound connections raised
// by the reserve kept for kept peers, each peer's inbound connections at
// PerPeer, and connections per address at PerIP outside the exempt
// networks. It also returns the strangers' share of inbound connections,
// which the gate enforces.
func resourceLimits(cfg ConnLimits) (rcmgr.ConcreteLimitConfig, []rcmgr.Option, int) {
	scaling := rcmgr.DefaultLimits // a copy; its maps are nil, so the global is untouched
	libp2p.SetDefaultServiceLimits(&scaling)
	addServiceLimits(&scaling)
	auto := scaling.AutoScale()
	defaults := auto.ToPartialLimitConfig()
	sys, perPeer := defaults.System, defaults.PeerDefault
	inbound := cfg.Inbound
	if inbound == 0 {
		inbound = int(sys.ConnsInbound)
	}
	// The total grows by what the inbound limit grew, so that a full
	// inbound share leaves the outbound connections their room.
	grow := inbound + cfg.Reserve - int(sys.ConnsInbound)
	limits := rcmgr.PartialLimitConfig{
		System: rcmgr.ResourceLimits{
			ConnsInbound: rcmgr.LimitVal(inbound + cfg.Reserve),
			Conns:        rcmgr.LimitVal(int(sys.Conns) + max(grow, 0)),
		},
		PeerDefault: rcmgr.ResourceLimits{
			ConnsInbound: rcmgr.LimitVal(cfg.PerPeer),
			Conns:        max(perPeer.Conns, rcmgr.LimitVal(cfg.PerPeer)),
		},
	}.Build(auto)

	exempt := cfg.Exempt
	if exempt == nil {
		exempt = loopbackNets
	}
	exempt4, exempt6 := []rcmgr.NetworkPrefixLimit{}, []rcmgr.NetworkPrefixLimit{} // non-nil: replace libp2p's
	for _, p := range exempt {
		l := rcmgr.NetworkPrefixLimit{Network: p.Masked(), ConnCount: math.MaxInt}
		if p.Addr().Is4() {
			exempt4 = append(exempt4, l)
		} else {
			exempt6 = append(exempt6, l)
		}
	}
	opts := []rcmgr.Option{
		rcmgr.WithNetworkPrefixLimit(exempt4, exempt6),
		rcmgr.WithLimitPerSubnet(
			[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 32, ConnCount: cfg.PerIP}},
			[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 56, ConnCount: cfg.PerIP}, {PrefixLength: 48, ConnCount: 8 * cfg.PerIP}},
		),
	}
	return limits, opts, inbound
}
