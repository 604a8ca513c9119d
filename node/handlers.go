package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

func (n *Node) handleNode(w http.ResponseWriter, r *http.Request) {
	out := api.Node{ID: n.mesh.ID().String(), Version: Version, Home: n.cfg.Home, Addrs: []string{}, Reachability: n.mesh.Reachability()}
	for _, a := range n.mesh.Addrs() {
		out.Addrs = append(out.Addrs, a.String())
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handlePeers(w http.ResponseWriter, r *http.Request) {
	out := api.Peers{Peers: []api.Peer{}}
	for _, p := range n.mesh.Peers() {
		ap := api.Peer{ID: p.ID.String(), Direction: p.Direction, Relayed: p.Relayed, Addrs: []string{}}
		for _, a := range p.Addrs {
			ap.Addrs = append(ap.Addrs, a.String())
		}
		out.Peers = append(out.Peers, ap)
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleConnect(w http.ResponseWriter, r *http.Request) {
	var req api.ConnectRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	addr, err := ma.NewMultiaddr(strings.TrimSpace(req.Addr))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadAddr, "bad multiaddr "+strconv.Quote(req.Addr)+": "+err.Error())
		return
	}
	if _, err := addr.ValueForProtocol(ma.P_P2P); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadAddr, "multiaddr "+strconv.Quote(req.Addr)+" must end in /p2p/<peer id>")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	id, err := n.mesh.Connect(ctx, addr)
	if err != nil {
		writeError(w, http.StatusBadGateway, api.CodeConnectFailed, "connect to "+req.Addr+": "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, api.Peer{ID: id.String(), Addrs: []string{addr.String()}, Direction: "outbound"})
}

func (n *Node) apiSpace(sp store.Space) api.Space {
	out := api.Space{ID: sp.ID.String(), Name: sp.Name, JoinedAt: sp.JoinedAt.UTC(), Peers: len(n.mesh.SpacePeers(sp.ID))}
	if c, err := n.store.Count(sp.ID); err == nil {
		out.Messages = c
	}
	r := sp.Retention
	if r == (store.Retention{}) {
		r = n.cfg.Retention
	}
	if r != (store.Retention{}) {
		out.Retention = &api.Retention{MaxCount: r.MaxCount}
		if r.MaxAge > 0 {
			out.Retention.MaxAge = r.MaxAge.String()
		}
	}
	return out
}

// parseRetention reads an API retention; nil stays nil.
func parseRetention(r *api.Retention) (*store.Retention, error) {
	if r == nil {
		return nil, nil
	}
	out := &store.Retention{MaxCount: r.MaxCount}
	if out.MaxCount < 0 {
		return nil, fmt.Errorf("retention max_count %d is negative", r.MaxCount)
	}
	if r.MaxAge != "" {
		d, err := time.ParseDuration(r.MaxAge)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("retention max_age %q is not a positive duration such as \"720h\"", r.MaxAge)
		}
		out.MaxAge = d
	}
	return out, nil
}

func (n *Node) handleSpaces(w http.ResponseWriter, r *http.Request) {
	spaces, err := n.store.Spaces()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	out := api.Spaces{Spaces: []api.Space{}}
	for _, sp := range spaces {
		out.Spaces = append(out.Spaces, n.apiSpace(sp))
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleSpace(w http.ResponseWriter, r *http.Request) {
	if sp, ok := n.space(w, r); ok {
		writeJSON(w, http.StatusOK, n.apiSpace(sp))
	}
}

func (n *Node) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	if err := checkSpaceName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	ret, err := parseRetention(req.Retention)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	sp, created, err := n.Join(req.Name, ret)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, n.apiSpace(sp))
}

// Join joins the open space called name; joining again changes nothing
// but the retention, when ret is not nil (nil keeps the space's, or the
// node's default for a new space).
func (n *Node) Join(name string, ret *store.Retention) (store.Space, bool, error) {
	sp, created, err := n.store.JoinSpace(store.Space{ID: protocol.SpaceID(name), Name: name, JoinedAt: time.Now().UTC()})
	if err != nil {
		return sp, false, err
	}
	if ret != nil && *ret != sp.Retention {
		if sp, err = n.store.SetRetention(sp.ID, *ret); err != nil {
			return sp, false, err
		}
	}
	if err := n.mesh.JoinSpace(sp.ID, n); err != nil {
		return sp, false, err
	}
	return sp, created, nil
}

func (n *Node) handleLeave(w http.ResponseWriter, r *http.Request) {
	sp, ok := n.space(w, r)
	if !ok {
		return
	}
	if err := n.mesh.LeaveSpace(sp.ID); err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	if err := n.store.LeaveSpace(sp.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) handleSend(w http.ResponseWriter, r *http.Request) {
	sp, ok := n.space(w, r)
	if !ok {
		return
	}
	var req api.SendRequest
	// A message body may be up to the limit; its JSON request carries a little more.
	if !decodeBody(w, r, int64(n.cfg.Limits.MaxSize)+maxSmallBody, &req) {
		return
	}
	m, e, err := n.Send(r.Context(), sp.ID, req)
	if err != nil {
		writeSendError(w, err, http.StatusUnprocessableEntity, api.CodeInvalid)
		return
	}
	writeJSON(w, http.StatusCreated, apiMessage(m, e.Cursor))
}

func (n *Node) handleRead(w http.ResponseWriter, r *http.Request) {
	if sp, ok := n.space(w, r); ok {
		n.readPage(w, r, sp.ID)
	}
}

// after parses the cursor text s of space, writing the error answer if it
// is malformed.
func (n *Node) after(w http.ResponseWriter, space protocol.ID, s string) (store.Cursor, bool) {
	if s == api.EndCursor {
		c, err := n.store.End(space)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
			return 0, false
		}
		return c, true
	}
	c, err := store.ParseCursor(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadCursor, "bad cursor "+strconv.Quote(s))
		return 0, false
	}
	return c, true
}

// readPage answers a page of a space (or of the inbox) after ?after=.
func (n *Node) readPage(w http.ResponseWriter, r *http.Request, space protocol.ID) {
	after, ok := n.after(w, space, r.URL.Query().Get("after"))
	if !ok {
		return
	}
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	entries, next, err := n.store.Read(space, after, limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	page := api.Page{Messages: make([]api.Message, 0, len(entries)), Next: next.String()}
	for _, e := range entries {
		m, err := n.entryMessage(e)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
			return
		}
		page.Messages = append(page.Messages, m)
	}
	writeJSON(w, http.StatusOK, page)
}

// storedMessage resolves the {id} path value to a stored message, or
// answers 400, 404 or 503.
func (n *Node) storedMessage(w http.ResponseWriter, r *http.Request) (store.Entry, bool) {
	id, err := protocol.ParseID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.Code(err), err.Error())
		return store.Entry{}, false
	}
	e, err := n.store.Get(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no message "+id.String())
		return store.Entry{}, false
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return store.Entry{}, false
	}
	return e, true
}

func (n *Node) handleMessage(w http.ResponseWriter, r *http.Request) {
	e, ok := n.storedMessage(w, r)
	if !ok {
		return
	}
	m, err := n.entryMessage(e)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, m)
}
