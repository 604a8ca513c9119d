package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weftmesh/weft/mesh/internal/advert"
	"github.com/weftmesh/weft/protocol"
)

// maxAdvertised bounds the names one node advertises.
const maxAdvertised = 256

// Advertise sets the capability names this node advertises, replacing the
// previous set: each name is advertised in the DHT under
// protocol.CapabilityNamespace(name) and kept there (retried until the DHT
// has peers, renewed before its TTL ends) until a later Advertise leaves it
// out or Close. Advertise(nil) stops advertising. Records already stored
// by other nodes stay until they expire (the DHT has no withdrawal); since
// Discover checks every provider's card, the card is what counts: remove a
// capability from the card when it stops being offered.
//
// Every name must pass protocol.CheckName; otherwise, or without a
// discovery (see New), nothing changes and an error is returned.
func (s *Service) Advertise(names []string) error {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		if err := protocol.CheckName(n); err != nil {
			return fmt.Errorf("agent: advertise: %w", err)
		}
		set[n] = true
	}
	if len(set) > maxAdvertised {
		return fmt.Errorf("agent: advertise: %d names, at most %d", len(set), maxAdvertised)
	}
	if len(set) > 0 && s.disc == nil {
		return errors.New("agent: advertise: no discovery to advertise in")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for n, stop := range s.ads {
		if !set[n] {
			stop()
			delete(s.ads, n)
		}
	}
	for n := range set {
		if _, ok := s.ads[n]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(s.ctx)
		s.ads[n] = cancel
		s.wg.Go(func() { s.advertiseLoop(ctx, n) })
	}
	return nil
}

// Advertised returns the names this node advertises, sorted.
func (s *Service) Advertised() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.ads))
	for n := range s.ads {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// advertiseLoop keeps this node advertised as a provider of capability
// name until ctx ends.
func (s *Service) advertiseLoop(ctx context.Context, name string) {
	advert.Loop(ctx, s.disc, protocol.CapabilityNamespace(name), s.cfg.log, "capability", name)
}
