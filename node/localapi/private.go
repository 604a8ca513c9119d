package localapi

import (
	"net/http"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
)

// Routes of private spaces (protocol/member): create, invite, join by
// invite, members, remove.

func (a *API) createPrivate(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	sp, err := a.b.CreatePrivate(r.Context(), req.Name, req.Sealed)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiSpace(sp))
}

func (a *API) invite(w http.ResponseWriter, r *http.Request) {
	var req api.InviteRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	o := node.InviteOptions{Role: member.Role(req.Role)}
	if req.Peer != "" {
		p, err := parsePeer("peer", req.Peer)
		if err != nil {
			writeErr(w, err)
			return
		}
		o.Peer = p
	}
	if req.Expires != "" {
		d, err := time.ParseDuration(req.Expires)
		if err != nil || d <= 0 {
			writeError(w, api.CodeBadRequest, "expires: want a positive duration such as 24h")
			return
		}
		o.Expires = d
	}
	inv, tok, err := a.b.Invite(r.PathValue("space"), o)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Invite{Token: tok, Space: inv.Space.String(), Role: string(inv.Role), Peer: inv.Peer,
		Expires: inv.ExpiresAt().UTC().Format(time.RFC3339), Sealed: inv.Key != nil})
}

func (a *API) joinInvite(w http.ResponseWriter, r *http.Request) {
	var req api.JoinInviteRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	sp, err := a.b.JoinInvite(r.Context(), req.Invite)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiSpace(sp))
}

func (a *API) members(w http.ResponseWriter, r *http.Request) {
	sp, ms, err := a.b.Members(r.PathValue("space"))
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Members{Space: sp.ID.String(), Name: sp.Name, Sealed: sp.Sealed, Members: make([]api.Member, 0, len(ms))}
	for _, m := range ms {
		out.Members = append(out.Members, api.Member{Peer: m.Peer.String(), Role: string(m.Role)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) removeMember(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPeer(w, r)
	if !ok {
		return
	}
	m, err := a.b.Remove(r.Context(), r.PathValue("space"), p)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiStored(m))
}
