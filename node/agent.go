package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// Discovery defaults.
const (
	defaultDiscoverWait = 10 * time.Second
	maxDiscoverWait     = 2 * time.Minute
	cardFile            = "card.json"
)

// cardState is the part of the agent card set by the daemon's flags or
// PUT /v1/card (kept in <home>/card.json); handlers add their names.
type cardState struct {
	mu     sync.Mutex
	static api.Card
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

func (n *Node) saveCard(c api.Card) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(n.cfg.Home, cardFile), b)
}

// Card returns this node's agent card: its static part plus the names its
// handlers serve.
func (n *Node) Card() protocol.Card {
	n.card.mu.Lock()
	st := n.card.static
	n.card.mu.Unlock()
	c := protocol.Card{ID: n.mesh.ID().String(), Name: st.Name, Description: st.Description, Version: Version}
	seen := make(map[string]bool)
	for _, cp := range append(slices.Clone(st.Capabilities), n.handlers.capabilities()...) {
		if seen[cp.Name] {
			continue
		}
		seen[cp.Name] = true
		c.Capabilities = append(c.Capabilities, protocol.Capability(cp))
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

func apiCard(c protocol.Card) api.Card {
	out := api.Card{ID: c.ID, Name: c.Name, Description: c.Description, Version: c.Version, Capabilities: []api.Capability{}}
	for _, cp := range c.Capabilities {
		out.Capabilities = append(out.Capabilities, api.Capability(cp))
	}
	return out
}

func (n *Node) handleCard(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, apiCard(n.Card()))
}

// handleSetCard serves PUT /v1/card: this node's name, description and
// static capabilities (kept across restarts).
func (n *Node) handleSetCard(w http.ResponseWriter, r *http.Request) {
	var u api.CardUpdate
	if !decodeBody(w, r, maxSmallBody, &u) {
		return
	}
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
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "card too big: name ≤ 256 bytes, description ≤ 4096 bytes, ≤ 64 capabilities")
		return
	}
	for _, cp := range c.Capabilities {
		if err := checkCapability(cp); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	n.card.mu.Lock()
	err := n.saveCard(c)
	if err == nil {
		n.card.static = c
	}
	n.card.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "save card: "+err.Error())
		return
	}
	n.advertise()
	writeJSON(w, http.StatusOK, apiCard(n.Card()))
}

// pathPeer resolves {peer}, or answers 400.
func pathPeer(w http.ResponseWriter, r *http.Request) (peer.ID, bool) {
	p, err := peer.Decode(r.PathValue("peer"))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadPeer, strconv.Quote(r.PathValue("peer"))+" is not a peer ID")
		return "", false
	}
	return p, true
}

func (n *Node) handlePeerCard(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPeer(w, r)
	if !ok {
		return
	}
	if p == n.mesh.ID() {
		writeJSON(w, http.StatusOK, apiCard(n.Card()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), defaultDiscoverWait)
	defer cancel()
	if cerr := n.reach(ctx, p); cerr != nil {
		writeCallError(w, cerr)
		return
	}
	c, err := n.agent.Card(ctx, p)
	if err != nil {
		writeError(w, http.StatusBadGateway, api.CodeUnreachable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, apiCard(c))
}

func (n *Node) handlePeerHealth(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPeer(w, r)
	if !ok {
		return
	}
	out := api.Health{Peer: p.String()}
	var h protocol.Health
	if p == n.mesh.ID() {
		h = n.Health()
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), defaultDiscoverWait)
		defer cancel()
		if cerr := n.reach(ctx, p); cerr != nil {
			writeCallError(w, cerr)
			return
		}
		var rtt time.Duration
		var err error
		h, rtt, err = n.agent.Health(ctx, p)
		if err != nil {
			writeError(w, http.StatusBadGateway, api.CodeUnreachable, err.Error())
			return
		}
		out.RTTMillis = float64(rtt.Microseconds()) / 1000
	}
	out.Status, out.ActiveCalls, out.Handlers, out.Load, out.UptimeS = h.Status, h.ActiveCalls, h.Handlers, h.Load, h.UptimeS
	writeJSON(w, http.StatusOK, out)
}

// handleDiscover serves GET /v1/discover?capability=NAME[&limit=N][&timeout=D].
func (n *Node) handleDiscover(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("capability")
	if err := protocol.CheckName(name); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "capability: "+err.Error())
		return
	}
	limit := 0
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "limit must be a non-negative integer")
			return
		}
		limit = v
	}
	wait := defaultDiscoverWait
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > maxDiscoverWait {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "timeout must be a duration up to "+maxDiscoverWait.String())
			return
		}
		wait = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	found, err := n.agent.Discover(ctx, name, limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	out := api.Discovery{Capability: name, Providers: []api.Provider{}}
	for _, p := range found {
		ap := api.Provider{Card: apiCard(p.Card)}
		for _, a := range p.Addrs {
			ap.Addrs = append(ap.Addrs, a.String())
		}
		out.Providers = append(out.Providers, ap)
	}
	writeJSON(w, http.StatusOK, out)
}
