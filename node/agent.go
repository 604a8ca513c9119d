package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/atomicfile"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// Discovery defaults.
const (
	// DefaultDiscoverWait bounds discovery and card and health look-ups.
	DefaultDiscoverWait = 10 * time.Second
	// MaxDiscoverWait is the longest a discovery may be given.
	MaxDiscoverWait = 2 * time.Minute
	cardFile        = "card.json"
)

// cardState is the part of the agent card set by the daemon's flags or
// SetCard (kept in <home>/card.json); handlers add their names.
type cardState struct {
	mu     sync.Mutex
	static protocol.Card // ID and Version unused
}

// loadCard reads the stored card, then applies cfg's (flags win).
func (n *Node) loadCard() error {
	b, err := os.ReadFile(filepath.Join(n.cfg.Home, cardFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &n.card.static); err != nil {
			return fmt.Errorf("%s: %w", cardFile, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	c := n.cfg.Card
	if c.Name == "" && c.Description == "" && len(c.Capabilities) == 0 {
		return nil
	}
	if c.Name != "" {
		n.card.static.Name = c.Name
	}
	if c.Description != "" {
		n.card.static.Description = c.Description
	}
	if len(c.Capabilities) > 0 {
		n.card.static.Capabilities = c.Capabilities
	}
	return n.saveCard(n.card.static)
}

func (n *Node) saveCard(c protocol.Card) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(n.cfg.Home, cardFile), b)
}

// Card returns this node's agent card: its static part plus the names its
// handlers serve. A name a handler serves says who may call it (Access).
func (n *Node) Card() protocol.Card {
	n.card.mu.Lock()
	st := n.card.static
	n.card.mu.Unlock()
	c := protocol.Card{ID: n.mesh.ID().String(), Name: st.Name, Description: st.Description, Version: Version}
	served := n.handlers.capabilities()
	access := make(map[string]string, len(served))
	for _, cp := range served {
		access[cp.Name] = cp.Access
	}
	seen := make(map[string]bool)
	for _, cp := range append(slices.Clone(st.Capabilities), served...) {
		if seen[cp.Name] {
			continue
		}
		seen[cp.Name] = true
		cp.Access = access[cp.Name]
		c.Capabilities = append(c.Capabilities, cp)
	}
	slices.SortFunc(c.Capabilities, func(a, b protocol.Capability) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return c
}

// Health returns this node's heartbeat.
func (n *Node) Health() protocol.Health {
	active := int(n.handlers.active.Load())
	conns, capacity := n.handlers.capacity()
	h := protocol.Health{
		Status:      "ok",
		ActiveCalls: active,
		Handlers:    conns,
		UptimeS:     int64(time.Since(n.started) / time.Second),
		Time:        time.Now().UnixMilli(),
	}
	if capacity > 0 {
		h.Load = float64(active) / float64(capacity)
		if active >= capacity {
			h.Status = "busy"
		}
	}
	return h
}

// advertise keeps the DHT advertisements in step with the card.
func (n *Node) advertise() {
	if n.agent == nil {
		return
	}
	var names []string
	for _, c := range n.Card().Capabilities {
		names = append(names, c.Name)
	}
	if err := n.agent.Advertise(names); err != nil && !errors.Is(err, agent.ErrClosed) {
		n.log.Warn("advertise capabilities", "err", err)
	}
}

// CardUpdate changes this node's card; nil fields are left as they are.
type CardUpdate struct {
	Name         *string
	Description  *string
	Capabilities *[]protocol.Capability
}

// SetCard changes this node's name, description and static capabilities
// (kept across restarts) and returns the new card.
func (n *Node) SetCard(u CardUpdate) (protocol.Card, error) {
	n.card.mu.Lock()
	c := n.card.static
	n.card.mu.Unlock()
	if u.Name != nil {
		c.Name = *u.Name
	}
	if u.Description != nil {
		c.Description = *u.Description
	}
	if u.Capabilities != nil {
		c.Capabilities = *u.Capabilities
	}
	if len(c.Name) > 256 || len(c.Description) > 4096 || len(c.Capabilities) > 64 {
		return protocol.Card{}, errorf(api.CodeBadRequest, "card too big: name ≤ 256 bytes, description ≤ 4096 bytes, ≤ 64 capabilities")
	}
	for _, cp := range c.Capabilities {
		if err := checkCapability(cp); err != nil {
			return protocol.Card{}, err
		}
	}
	n.card.mu.Lock()
	err := n.saveCard(c)
	if err == nil {
		n.card.static = c
	}
	n.card.mu.Unlock()
	if err != nil {
		return protocol.Card{}, fmt.Errorf("save card: %w", err)
	}
	n.advertise()
	return n.Card(), nil
}

// PeerCard returns a peer's agent card (this node's own for its ID).
func (n *Node) PeerCard(ctx context.Context, p peer.ID) (protocol.Card, error) {
	if p == n.mesh.ID() {
		return n.Card(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoverWait)
	defer cancel()
	if err := n.reach(ctx, p); err != nil {
		return protocol.Card{}, err
	}
	c, err := n.agent.Card(ctx, p)
	if err != nil {
		return protocol.Card{}, protocol.Errorf(protocol.CodeUnreachable, "%v", err)
	}
	return c, nil
}

// PeerHealth returns a peer's heartbeat and the round trip it took (this
// node's own, with no round trip, for its ID).
func (n *Node) PeerHealth(ctx context.Context, p peer.ID) (protocol.Health, time.Duration, error) {
	if p == n.mesh.ID() {
		return n.Health(), 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoverWait)
	defer cancel()
	if err := n.reach(ctx, p); err != nil {
		return protocol.Health{}, 0, err
	}
	h, rtt, err := n.agent.Health(ctx, p)
	if err != nil {
		return protocol.Health{}, 0, protocol.Errorf(protocol.CodeUnreachable, "%v", err)
	}
	return h, rtt, nil
}

// Discover finds up to limit (0: any number) peers offering a capability
// within ctx's time (DefaultDiscoverWait when ctx has no deadline).
func (n *Node) Discover(ctx context.Context, capability string, limit int) ([]agent.Provider, error) {
	if err := protocol.CheckName(capability); err != nil {
		return nil, errorf(api.CodeBadRequest, "capability: %v", err)
	}
	if limit < 0 {
		return nil, errorf(api.CodeBadRequest, "limit must be a non-negative integer")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDiscoverWait)
		defer cancel()
	}
	return n.agent.Discover(ctx, capability, limit)
}
