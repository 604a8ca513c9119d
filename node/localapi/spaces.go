package localapi

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

func (a *API) node(w http.ResponseWriter, r *http.Request) {
	out := apiNode(a.b.Info())
	if a.webURL != nil {
		out.Web = a.webURL()
	}
	writeJSON(w, http.StatusOK, out)
}

func apiNode(info node.Info) api.Node {
	out := api.Node{ID: info.ID.String(), Version: info.Version, Home: info.Home, Addrs: []string{}, Reachability: info.Reachability,
		Sync: &api.SyncState{Active: info.Syncing, Sessions: info.SyncSessions}}
	if !info.Started.IsZero() {
		out.StartedAt, out.UptimeS = info.Started.UTC(), int64(time.Since(info.Started)/time.Second)
	}
	for _, ad := range info.Addrs {
		out.Addrs = append(out.Addrs, ad.String())
	}
	return out
}

func (a *API) peers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Peers{Peers: apiPeers(a.b.Peers())})
}

func apiPeers(peers []mesh.PeerInfo) []api.Peer {
	out := []api.Peer{}
	for _, p := range peers {
		ap := api.Peer{ID: p.ID.String(), Direction: p.Direction, Relayed: p.Relayed, Addrs: []string{},
			RTTMillis: float64(p.RTT.Microseconds()) / 1000}
		for _, ad := range p.Addrs {
			ap.Addrs = append(ap.Addrs, ad.String())
		}
		out = append(out, ap)
	}
	return out
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	st, err := a.b.Status()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Status{
		Node:          apiNode(st.Info),
		StartedAt:     st.Started.UTC(),
		UptimeSeconds: int64(time.Since(st.Started) / time.Second),
		Peers:         apiPeers(st.Peers),
		Spaces:        make([]api.Space, 0, len(st.Spaces)),
		Outbox:        st.Outbox,
		Handlers:      append([]string{}, st.Handlers...),
		Sync:          api.SyncStatus{Active: st.Syncing, Received: st.Synced},
	}
	for _, sp := range st.Spaces {
		out.Spaces = append(out.Spaces, apiSpace(sp))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) connect(w http.ResponseWriter, r *http.Request) {
	var req api.ConnectRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	addr, err := ma.NewMultiaddr(strings.TrimSpace(req.Addr))
	if err != nil {
		writeError(w, api.CodeBadAddr, "bad multiaddr "+strconv.Quote(req.Addr)+": "+err.Error())
		return
	}
	id, err := a.b.Connect(r.Context(), addr)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Peer{ID: id.String(), Addrs: []string{addr.String()}, Direction: "outbound"})
}

func (a *API) spaces(w http.ResponseWriter, r *http.Request) {
	spaces, err := a.b.Spaces()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Spaces{Spaces: make([]api.Space, 0, len(spaces))}
	for _, sp := range spaces {
		out.Spaces = append(out.Spaces, apiSpace(sp))
	}
	writeJSON(w, http.StatusOK, out)
}

// spaceOf resolves the {space} path value, or answers 404 or 503.
func (a *API) spaceOf(w http.ResponseWriter, r *http.Request) (node.Space, bool) {
	sp, err := a.b.Space(r.PathValue("space"))
	if err != nil {
		writeErr(w, err)
		return sp, false
	}
	return sp, true
}

// spaceIDOf resolves the {space} path value to its ID alone, or answers
// 404 or 503: a send or a read needs no more, and describing a space
// counts what it holds.
func (a *API) spaceIDOf(w http.ResponseWriter, r *http.Request) (protocol.ID, bool) {
	id, err := a.b.SpaceID(r.PathValue("space"))
	if err != nil {
		writeErr(w, err)
		return id, false
	}
	return id, true
}

func (a *API) space(w http.ResponseWriter, r *http.Request) {
	if sp, ok := a.spaceOf(w, r); ok {
		writeJSON(w, http.StatusOK, apiSpace(sp))
	}
}

func (a *API) join(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	keep, err := parseRetention(req.Retention)
	if err != nil {
		writeErr(w, err)
		return
	}
	if l := req.Limits; l != nil && (l.MaxBytes < 0 || l.MaxSenderBytes < 0 || l.MaxMessageSize < 0) {
		writeError(w, api.CodeBadRequest, "space limits must not be negative")
		return
	}
	sp, created, err := a.b.Join(req.Name, keep)
	if err != nil {
		writeErr(w, err)
		return
	}
	if l := req.Limits; l != nil {
		sp, err = a.b.SetSpaceLimits(sp.ID.String(), store.SpaceLimits{MaxBytes: l.MaxBytes, MaxSenderBytes: l.MaxSenderBytes, MaxMessageSize: l.MaxMessageSize})
		if err != nil {
			writeErr(w, err)
			return
		}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, apiSpace(sp))
}

func (a *API) leave(w http.ResponseWriter, r *http.Request) {
	if err := a.b.Leave(r.Context(), r.PathValue("space")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) send(w http.ResponseWriter, r *http.Request) {
	space, ok := a.spaceIDOf(w, r)
	if !ok {
		return
	}
	var req api.SendRequest
	if !readSend(w, r, a.maxBody, &req) {
		return
	}
	refs, err := parseRefs(req.Refs)
	if err != nil {
		writeErr(w, err)
		return
	}
	m, err := a.b.Send(r.Context(), space, node.Post{
		Content: req.Content, Type: req.Type, Refs: refs,
		TTL: time.Duration(req.TTL) * time.Second, Meta: req.Meta,
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	writeStored(w, http.StatusCreated, m)
}

func (a *API) read(w http.ResponseWriter, r *http.Request) {
	if space, ok := a.spaceIDOf(w, r); ok {
		a.readPage(w, r, space)
	}
}

// after parses cursor text s of space ("" is the start, api.EndCursor the
// current end).
func (a *API) after(space protocol.ID, s string) (store.Cursor, error) {
	if s == api.EndCursor {
		return a.b.End(space)
	}
	c, err := store.ParseCursor(s)
	if err != nil {
		return 0, &node.Error{Code: api.CodeBadCursor, Msg: "bad cursor " + strconv.Quote(s)}
	}
	return c, nil
}

// readPage answers a page of a space (or of the inbox) after ?after=.
func (a *API) readPage(w http.ResponseWriter, r *http.Request, space protocol.ID) {
	after, err := a.after(space, r.URL.Query().Get("after"))
	if err != nil {
		writeErr(w, err)
		return
	}
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	msgs, next, _, err := a.readBounded(space, after, limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	page := api.Page{Messages: make([]api.Message, 0, len(msgs)), Next: next.String()}
	for _, m := range msgs {
		page.Messages = append(page.Messages, apiStored(m))
	}
	writeJSON(w, http.StatusOK, page)
}

// readBounded reads up to limit messages of space after a cursor, and
// stops before the message that would pass node.MaxAnswerBytes (always
// taking one), in one read of the backend, which stops there itself, so
// it holds little more than the budget whatever the messages weigh. next
// continues after the last message taken; more reports that it stopped at
// the limit or the budget, so more may follow at once.
func (a *API) readBounded(space protocol.ID, after store.Cursor, limit int) (msgs []node.Message, next store.Cursor, more bool, err error) {
	msgs, next, cut, err := a.b.ReadWithin(space, after, limit, node.MaxAnswerBytes)
	if err != nil {
		return nil, after, false, err
	}
	if i := answerCut(msgs); i < len(msgs) {
		return msgs[:i], msgs[i-1].Cursor, true, nil
	}
	return msgs, next, cut || len(msgs) == limit, nil
}

// answerCut returns how many of msgs (at least one) fit in
// node.MaxAnswerBytes as an answer carries them: the backend weighs what
// it stores, so this cuts again, should a message open to more than it
// weighed.
func answerCut(msgs []node.Message) int {
	size := 0
	for i, m := range msgs {
		if i > 0 && size+m.AnswerBytes() > node.MaxAnswerBytes {
			return i
		}
		size += m.AnswerBytes()
	}
	return len(msgs)
}

func (a *API) message(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	m, err := a.b.Get(id)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiStored(m))
}

// thread answers GET /v1/messages/{id}/thread?direction=&depth=.
func (a *API) thread(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	dir := cmp.Or(q.Get("direction"), "ancestors")
	if dir != "ancestors" && dir != "descendants" {
		writeError(w, api.CodeBadRequest, "direction must be ancestors or descendants")
		return
	}
	depth := node.DefaultThreadDepth
	if s := q.Get("depth"); s != "" {
		var err error
		if depth, err = strconv.Atoi(s); err != nil {
			writeError(w, api.CodeBadRequest, "depth must be 0.."+strconv.Itoa(node.MaxThreadDepth))
			return
		}
	}
	th, err := a.b.Thread(id, dir == "ancestors", depth)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Thread{Direction: dir, Messages: make([]api.ThreadMessage, 0, len(th.Messages)), Truncated: th.Truncated}
	for _, m := range th.Messages {
		out.Messages = append(out.Messages, api.ThreadMessage{Depth: m.Depth, Message: apiStored(m.Message)})
	}
	writeJSON(w, http.StatusOK, out)
}
