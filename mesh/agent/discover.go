package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
)

// Discover's bounds.
const (
	// maxFound bounds the DHT records read per Discover.
	maxFound = 256
	// discoverConcurrency bounds the candidates dialled and asked at once.
	discoverConcurrency = 8
	// findTimeout bounds the DHT lookup of one Discover.
	findTimeout = 30 * time.Second
)

// Provider is a peer that offers a capability, as Discover found it.
type Provider struct {
	ID    peer.ID
	Card  protocol.Card  // fetched from ID (checked: its ID is ID) and offering the capability
	Addrs []ma.Multiaddr // the addresses this node knows for ID
}

// Discover finds the providers of capability name, with no registry. The
// candidates are the peers advertised under
// protocol.CapabilityNamespace(name) in the DHT and the peers this node is
// connected to (which covers LAN peers found by mDNS); each is dialled if
// need be and asked for its card (at most 8 at a time, each within the
// WithTimeout), and only those whose card has the capability are kept, so
// stale DHT records and peers advertising what they do not offer are left
// out. Connected peers known not to serve Protocol are not asked. This node
// is included if its own card has the capability.
//
// Providers are sorted by peer ID (in its text form), with no repeats; a
// limit > 0 keeps the first limit. Peers that fail are left out: the result
// may be partial. Discover fails only for an invalid name, or when ctx
// ends before any peer could be asked.
func (s *Service) Discover(ctx context.Context, name string, limit int) ([]Provider, error) {
	if err := protocol.CheckName(name); err != nil {
		return nil, fmt.Errorf("agent: discover: %w", err)
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel := s.bind(ctx, 0)
	defer cancel()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("agent: discover %s: %w", name, context.Cause(ctx))
	}

	self := s.h.ID()
	var (
		mu    sync.Mutex
		found []Provider
	)
	if c := s.LocalCard(); c.Has(name) {
		found = append(found, Provider{ID: self, Card: c, Addrs: s.h.Addrs()})
	}

	var finds <-chan peer.AddrInfo
	if s.disc != nil {
		fctx, fcancel := context.WithTimeout(ctx, findTimeout)
		defer fcancel() // after wg.Wait below: ends the lookup if we stopped reading
		ch, err := s.disc.FindPeers(fctx, protocol.CapabilityNamespace(name), discovery.Limit(maxFound))
		if err != nil {
			s.cfg.log.Debug("agent: DHT lookup failed; asking connected peers only", "capability", name, "err", err)
		} else {
			finds = ch
		}
	}

	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, discoverConcurrency)
		seen  = map[peer.ID]bool{self: true}
		asked int
	)
	// try asks ai in the background; false once ctx has ended.
	try := func(ai peer.AddrInfo) bool {
		if ai.ID == "" {
			return true
		}
		if seen[ai.ID] { // the DHT sends a provider again once it learns its addresses
			if len(ai.Addrs) > 0 {
				s.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			}
			return true
		}
		seen[ai.ID] = true
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		asked++
		wg.Go(func() {
			defer func() { <-sem }()
			if pr, ok := s.probe(ctx, ai, name); ok {
				mu.Lock()
				found = append(found, pr)
				mu.Unlock()
			}
		})
		return true
	}
	stopped := false
	for _, p := range s.h.Network().Peers() {
		if s.knownNotToServe(p) {
			continue
		}
		if !try(peer.AddrInfo{ID: p}) {
			stopped = true
			break
		}
	}
	if finds != nil && !stopped {
		for ai := range finds {
			if !try(ai) {
				break
			}
		}
	}
	wg.Wait()

	if asked == 0 && ctx.Err() != nil {
		return nil, fmt.Errorf("agent: discover %s: %w", name, context.Cause(ctx))
	}
	slices.SortFunc(found, func(a, b Provider) int { return strings.Compare(a.Card.ID, b.Card.ID) })
	if limit > 0 && len(found) > limit {
		found = found[:limit]
	}
	return found, nil
}

// probe dials ai if need be and fetches its card; ok if it offers name.
func (s *Service) probe(ctx context.Context, ai peer.AddrInfo, name string) (_ Provider, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if err := s.h.Connect(ctx, ai); err != nil { // at once when connected
		s.cfg.log.Debug("agent: discover: candidate unreachable", "capability", name, "peer", ai.ID, "err", err)
		return Provider{}, false
	}
	// Always the current card: a capability added or withdrawn a moment ago
	// must count now, not when a cached card expires.
	c, err := s.fetchCard(ctx, ai.ID)
	if err != nil {
		s.cfg.log.Debug("agent: discover: no card", "capability", name, "peer", ai.ID, "err", err)
		return Provider{}, false
	}
	if !c.Has(name) {
		s.cfg.log.Debug("agent: discover: candidate does not offer it", "capability", name, "peer", ai.ID)
		return Provider{}, false
	}
	return Provider{ID: ai.ID, Card: c, Addrs: s.h.Peerstore().Addrs(ai.ID)}, true
}

// knownNotToServe reports whether identify has told which protocols p
// speaks and Protocol is not among them.
func (s *Service) knownNotToServe(p peer.ID) bool {
	protos, err := s.h.Peerstore().GetProtocols(p)
	return err == nil && len(protos) > 0 && !slices.Contains(protos, Protocol)
}
