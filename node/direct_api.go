package node

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/iacp"
	"github.com/weftmesh/weft/store"
)

func (n *Node) handleDM(w http.ResponseWriter, r *http.Request) {
	var req api.DMRequest
	if !decodeBody(w, r, int64(n.cfg.Limits.MaxSize)+maxSmallBody, &req) {
		return
	}
	m, deadline, delivered, err := n.DM(r.Context(), req)
	n.answerDM(w, m, deadline, delivered, err)
}

// handleDMIACP serves POST /v1/dm/iacp: the body is an IACP 1.x envelope.
func (n *Node) handleDMIACP(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if !decodeBody(w, r, iacp.MaxSize, &raw) {
		return
	}
	m, deadline, delivered, err := n.DMIACP(r.Context(), raw)
	n.answerDM(w, m, deadline, delivered, err)
}

func (n *Node) answerDM(w http.ResponseWriter, m *protocol.Message, deadline time.Time, delivered bool, err error) {
	if err != nil {
		writeSendError(w, err, http.StatusBadRequest, api.CodeBadRequest)
		return
	}
	res := api.DMResult{Message: apiMessage(m, 0), Status: "queued", Deadline: deadline.UTC()}
	status := http.StatusAccepted
	if delivered {
		res.Status, status = "delivered", http.StatusCreated
	}
	writeJSON(w, status, res)
}

// handleMessageIACP serves GET /v1/messages/{id}/iacp: a direct message as
// an IACP 1.x envelope.
func (n *Node) handleMessageIACP(w http.ResponseWriter, r *http.Request) {
	e, ok := n.storedMessage(w, r)
	if !ok {
		return
	}
	m, err := protocol.Decode(e.Raw, protocol.DefaultLimits())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	b, err := iacp.Export(m)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, api.CodeInvalid, "not exportable as IACP (only direct messages are): "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

func (n *Node) handleInbox(w http.ResponseWriter, r *http.Request) {
	n.readPage(w, r, n.inbox())
}

func (n *Node) handleInboxEvents(w http.ResponseWriter, r *http.Request) {
	n.streamEvents(w, r, n.inbox(), "inbox")
}

func (n *Node) handleOutbox(w http.ResponseWriter, r *http.Request) {
	pending, err := n.store.Pending(r.URL.Query().Get("to"), maxPageSize)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	out := api.Outbox{Messages: make([]api.Outgoing, 0, len(pending))}
	for _, o := range pending {
		out.Messages = append(out.Messages, apiOutgoing(o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := store.ParseCursor(q.Get("after"))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadCursor, "bad cursor "+strconv.Quote(q.Get("after")))
		return
	}
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	dead, next, err := n.store.DeadLetters(after, limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	out := api.Outbox{Messages: make([]api.Outgoing, 0, len(dead)), Next: next.String()}
	for _, d := range dead {
		o := apiOutgoing(d.Outgoing)
		o.Reason, o.DeadAt = d.Reason, time.UnixMilli(d.DeadAt).UTC()
		out.Messages = append(out.Messages, o)
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleDeleteDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := protocol.ParseID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.Code(err), err.Error())
		return
	}
	if err := n.store.DeleteDeadLetter(id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, api.CodeNotFound, "no dead letter "+id.String())
			return
		}
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func apiOutgoing(o store.Outgoing) api.Outgoing {
	out := api.Outgoing{
		ID: o.ID.String(), To: o.To,
		Created: time.UnixMilli(o.Created).UTC(), Deadline: time.UnixMilli(o.Deadline).UTC(),
		Attempts: o.Attempts, LastError: o.LastError,
	}
	if o.NextTry > 0 {
		out.NextTry = time.UnixMilli(o.NextTry).UTC()
	}
	if m, err := protocol.Decode(o.Raw, protocol.DefaultLimits()); err == nil {
		am := apiMessage(m, 0)
		out.Message = &am
	}
	return out
}

// pageLimit reads ?limit= (default defaultPageSize).
func pageLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return defaultPageSize, true
	}
	limit, err := strconv.Atoi(s)
	if err != nil || limit < 1 || limit > maxPageSize {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "limit must be 1.."+strconv.Itoa(maxPageSize))
		return 0, false
	}
	return limit, true
}
