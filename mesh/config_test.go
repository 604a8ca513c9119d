package mesh

import (
	"slices"
	"strings"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

func TestConfigValidate(t *testing.T) {
	const pid = "12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
	tooBig := protocol.DefaultLimits()
	tooBig.MaxSize = protocol.MaxMessageSize + 1
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string // "" = valid
	}{
		{"zero", Config{}, ""},
		{"full", Config{
			ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"},
			Bootstrap:   []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + pid, "/ip4/127.0.0.1/udp/4001/quic-v1/p2p/" + pid},
			DHTMode:     "client", Reachability: ReachabilityPrivate, ConnLow: 10, ConnHigh: 20, Limits: protocol.DefaultLimits(),
		}, ""},
		{"bad listen", Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/nope/tcp/1"}}, `bad multiaddr "/ip4/nope/tcp/1"`},
		{"bad bootstrap", Config{Bootstrap: []string{"127.0.0.1:4001"}}, `bad multiaddr "127.0.0.1:4001"`},
		{"bootstrap without p2p", Config{Bootstrap: []string{"/ip4/127.0.0.1/tcp/4001"}}, `"/ip4/127.0.0.1/tcp/4001": must end in /p2p/`},
		{"dht mode", Config{DHTMode: "lighthouse"}, `"lighthouse"`},
		{"reachability", Config{Reachability: "behind-nat"}, `bad reachability "behind-nat"`},
		{"negative watermark", Config{ConnLow: -1}, "negative"},
		{"low above high", Config{ConnLow: 30, ConnHigh: 20}, "low watermark 30 above high watermark 20"},
		{"limits", Config{Limits: tooBig}, "limits"},
		{"closed", Config{NetworkKey: make([]byte, 32), ListenAddrs: []string{"/ip4/0.0.0.0/tcp/0", "/ip6/::/tcp/0"}, Relay: RelayOff, Conns: ConnLimits{Inbound: 10, PerIP: 2}}, ""},
		{"quic with a network key", Config{NetworkKey: make([]byte, 32), ListenAddrs: []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}}, `"/ip4/0.0.0.0/udp/0/quic-v1": a private network (network key) runs over TCP only`},
		{"websocket with a network key", Config{NetworkKey: make([]byte, 32), ListenAddrs: []string{"/ip4/0.0.0.0/tcp/0/ws"}}, "TCP only"},
		{"short network key", Config{NetworkKey: make([]byte, 16)}, "network key must be 32 bytes, not 16"},
		{"relay", Config{Relay: "friends"}, `bad relay mode "friends"`},
		{"negative conns", Config{Conns: ConnLimits{PerIP: -1}}, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("no error, want one containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	for _, c := range []Config{{ConnLow: 300}, {ConnHigh: 20}} {
		c = c.withDefaults()
		if c.ConnHigh < c.ConnLow || c.ConnLow == 0 {
			t.Errorf("watermarks low %d, high %d", c.ConnLow, c.ConnHigh)
		}
	}
	c := Config{}.withDefaults()
	if c.Limits != protocol.DefaultLimits() || c.Logger == nil || c.Now == nil || c.DHTMode != DHTServer || c.Reachability != ReachabilityAuto || len(c.ListenAddrs) == 0 {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.Relay != RelayMembers || c.Conns.PerIP != DefaultConnsPerIP || c.Conns.PerPeer != DefaultConnsPerPeer || c.Conns.Reserve != DefaultConnReserve {
		t.Errorf("access defaults not applied: relay %q, conns %+v", c.Relay, c.Conns)
	}
	if c := (Config{NetworkKey: make([]byte, 32)}).withDefaults(); !slices.Equal(c.ListenAddrs, DefaultPrivateListenAddrs) {
		t.Errorf("default listen addresses with a network key: %v", c.ListenAddrs)
	}
}
