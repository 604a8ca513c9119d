package node

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh"
)

// Relay modes of Config.Relay.
const (
	RelayMembers = mesh.RelayMembers
	RelayOpen    = mesh.RelayOpen
	RelayOff     = mesh.RelayOff
)

// validateAccess checks the settings of who may reach the node.
func (c Config) validateAccess() error {
	for _, s := range c.AllowPeers {
		if _, err := peer.Decode(s); err != nil {
			return fmt.Errorf("config: allowed peer %q is not a peer ID: %w", s, err)
		}
	}
	switch c.Relay {
	case "", RelayMembers, RelayOpen, RelayOff:
	default:
		return fmt.Errorf("config: relay %q: want members, open or off", c.Relay)
	}
	if l := c.Conns; l.Inbound < 0 || l.Reserve < 0 || l.PerIP < 0 || l.PerPeer < 0 {
		return fmt.Errorf("config: negative connection limits %+v", l)
	}
	return nil
}

// meshAccess sets who may reach the node in the mesh's configuration: the
// network key (read from its file), the allowlist, the relay mode and the
// connection limits.
func (n *Node) meshAccess(mc *mesh.Config) error {
	cfg := n.cfg
	if cfg.NetworkKeyFile != "" {
		k, err := mesh.LoadNetworkKey(cfg.NetworkKeyFile)
		if err != nil {
			return err
		}
		mc.NetworkKey = k
	}
	if cfg.AllowPeers != nil {
		allowed := make(map[peer.ID]bool, len(cfg.AllowPeers))
		for _, s := range cfg.AllowPeers {
			p, err := peer.Decode(s)
			if err != nil { // checked by Validate
				return fmt.Errorf("allowed peer %q: %w", s, err)
			}
			allowed[p] = true
		}
		// Trusted peers are let in too: `weft trust add` opens a closed
		// mesh to a peer without a restart.
		mc.Allow = func(p peer.ID) bool { return allowed[p] || n.trust.IsTrusted(p) }
		n.log.Info("closed mesh: only listed and trusted peers may connect", "peers", len(allowed))
	}
	// Trusted peers are kept: they still get in when strangers fill the
	// inbound limit, and the relay (in its members mode) serves them.
	mc.Keep = n.trust.IsTrusted
	mc.Relay = cfg.Relay
	mc.Conns = cfg.Conns
	return nil
}

// maxPeersFile bounds a peers file: 1 MiB is over 15,000 peer IDs.
const maxPeersFile = 1 << 20

// ReadPeersFile reads a file of peer IDs, one per line; blank lines and
// lines starting with # are skipped, and so is anything after a peer ID
// and a space (a comment naming the peer, say). A file that lists no peer
// is no error: as AllowPeers, it lets in the bootstrap peers alone.
func ReadPeersFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("peers file: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, maxPeersFile))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if _, err := peer.Decode(fields[0]); err != nil {
			return nil, fmt.Errorf("peers file %s, line %d: %q is not a peer ID", path, line, fields[0])
		}
		out = append(out, fields[0])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("peers file %s: %w", path, err)
	}
	return out, nil
}
