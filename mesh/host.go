package mesh

import (
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	tls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/weftmesh/weft/protocol"
)

// newHost builds the libp2p host: TCP and QUIC, Noise and TLS, libp2p's
// auto-scaled default resource limits, a connection manager with cfg's
// watermarks, no relay and no NAT port mapping. cfg has its defaults set.
func newHost(key crypto.PrivKey, cfg Config) (host.Host, error) {
	listen, err := parseListen(cfg.ListenAddrs)
	if err != nil {
		return nil, err
	}
	limits := rcmgr.DefaultLimits // a copy; its maps are nil, so the global is untouched
	libp2p.SetDefaultServiceLimits(&limits)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()))
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(cfg.ConnLow, cfg.ConnHigh)
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("connection manager: %w", err)
	}
	// On error libp2p.New closes rm and cm itself.
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrs(listen...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(tls.ID, tls.New),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.UserAgent(protocol.AgentVersion + "/" + Version),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(), // no Prometheus registry: weft serves no /metrics
	}
	if cfg.Gater != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.Gater))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("libp2p host: %w", err)
	}
	return h, nil
}
