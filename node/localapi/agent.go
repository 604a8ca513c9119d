package localapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol/api"
)

func (a *API) card(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, apiCard(a.b.Card()))
}

// setCard serves PUT /v1/card: this node's name, description and static
// capabilities (kept across restarts).
func (a *API) setCard(w http.ResponseWriter, r *http.Request) {
	var u api.CardUpdate
	if !decodeBody(w, r, maxSmallBody, &u) {
		return
	}
	nu := node.CardUpdate{Name: u.Name, Description: u.Description}
	if u.Capabilities != nil {
		caps := capabilities(*u.Capabilities)
		nu.Capabilities = &caps
	}
	c, err := a.b.SetCard(nu)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiCard(c))
}

func (a *API) peerCard(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPeer(w, r)
	if !ok {
		return
	}
	c, err := a.b.PeerCard(r.Context(), p)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiCard(c))
}

func (a *API) peerHealth(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPeer(w, r)
	if !ok {
		return
	}
	h, rtt, err := a.b.PeerHealth(r.Context(), p)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Health{
		Peer: p.String(), Status: h.Status, ActiveCalls: h.ActiveCalls, Handlers: h.Handlers,
		Load: h.Load, UptimeS: h.UptimeS, RTTMillis: float64(rtt.Microseconds()) / 1000,
	})
}

// discover serves GET /v1/discover?capability=NAME[&limit=N][&timeout=D].
func (a *API) discover(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("capability")
	limit := 0
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeError(w, api.CodeBadRequest, "limit must be a non-negative integer")
			return
		}
		limit = v
	}
	wait := node.DefaultDiscoverWait
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > node.MaxDiscoverWait {
			writeError(w, api.CodeBadRequest, "timeout must be a duration up to "+node.MaxDiscoverWait.String())
			return
		}
		wait = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	found, err := a.b.Discover(ctx, name, limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Discovery{Capability: name, Providers: make([]api.Provider, 0, len(found))}
	for _, p := range found {
		out.Providers = append(out.Providers, apiProvider(p))
	}
	writeJSON(w, http.StatusOK, out)
}
