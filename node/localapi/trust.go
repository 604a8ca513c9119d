package localapi

import (
	"net/http"

	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol/api"
)

// trustList serves GET /v1/trust: the trusted peers and the DM policy.
func (a *API) trustList(w http.ResponseWriter, r *http.Request) {
	out := api.TrustList{Peers: []api.TrustedPeer{}}
	for _, t := range a.b.Trusted() {
		out.Peers = append(out.Peers, apiTrusted(t))
	}
	d := a.b.DMPolicy()
	out.DM = &api.DMPolicy{Policy: d.Policy, Rate: d.Rate, Burst: d.Burst, Quota: d.Quota,
		AllRate: d.AllRate, AllBurst: d.AllBurst, AllQuota: d.AllQuota}
	writeJSON(w, http.StatusOK, out)
}

// trust serves POST /v1/trust: 201 with the entry when the peer is new to
// the list, 200 when it was on it (its name is replaced).
func (a *API) trust(w http.ResponseWriter, r *http.Request) {
	var req api.TrustRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	p, err := parsePeer("peer", req.Peer)
	if err != nil {
		writeErr(w, err)
		return
	}
	t, added, err := a.b.Trust(p, req.Name)
	if err != nil {
		writeErr(w, err)
		return
	}
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	writeJSON(w, status, apiTrusted(t))
}

// untrust serves DELETE /v1/trust/{peer}.
func (a *API) untrust(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPeer(w, r)
	if !ok {
		return
	}
	removed, err := a.b.Untrust(p)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Untrusted{Peer: p.String(), Removed: removed})
}

func apiTrusted(t policy.Trusted) api.TrustedPeer {
	return api.TrustedPeer{Peer: t.Peer.String(), Name: t.Name, Added: t.Added.UTC()}
}
