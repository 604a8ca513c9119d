package localapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/iacp"
	"github.com/weftmesh/weft/store"
)

func (a *API) dm(w http.ResponseWriter, r *http.Request) {
	var req api.DMRequest
	if !decodeBody(w, r, a.maxBody, &req) {
		return
	}
	to, err := parsePeer("to", req.To)
	if err != nil {
		writeErr(w, err)
		return
	}
	dm := node.DM{To: to, Kind: req.Kind, Content: req.Content, TTL: time.Duration(req.TTL) * time.Second, Meta: req.Meta}
	if req.ReplyTo != "" {
		if dm.ReplyTo, err = protocol.ParseID(req.ReplyTo); err != nil {
			writeError(w, api.CodeInvalid, "reply_to: "+err.Error())
			return
		}
	}
	sent, err := a.b.DM(r.Context(), dm)
	answerDM(w, sent, err)
}

// dmIACP serves POST /v1/dm/iacp: the body is an IACP 1.x envelope.
func (a *API) dmIACP(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if !decodeBody(w, r, iacp.MaxSize, &raw) {
		return
	}
	sent, err := a.b.DMIACP(r.Context(), raw)
	answerDM(w, sent, err)
}

func answerDM(w http.ResponseWriter, sent node.Sent, err error) {
	if err != nil {
		writeErr(w, err)
		return
	}
	res := api.DMResult{Message: apiMessage(sent.Message, 0), Status: "queued", Deadline: sent.Deadline.UTC()}
	status := http.StatusAccepted
	if sent.Delivered {
		res.Status, status = "delivered", http.StatusCreated
	}
	writeJSON(w, status, res)
}

// messageIACP serves GET /v1/messages/{id}/iacp: a direct message as an
// IACP 1.x envelope.
func (a *API) messageIACP(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	b, err := a.b.ExportIACP(id)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

func (a *API) inbox(w http.ResponseWriter, r *http.Request) { a.readPage(w, r, a.b.Inbox()) }

func (a *API) inboxEvents(w http.ResponseWriter, r *http.Request) {
	a.streamEvents(w, r, a.b.Inbox(), "inbox")
}

func (a *API) outbox(w http.ResponseWriter, r *http.Request) {
	pending, err := a.b.Outbox(r.URL.Query().Get("to"), maxPageSize)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Outbox{Messages: make([]api.Outgoing, 0, len(pending))}
	for _, o := range pending {
		out.Messages = append(out.Messages, apiOutgoing(o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) deadLetters(w http.ResponseWriter, r *http.Request) {
	after, limit, ok := pageArgs(w, r)
	if !ok {
		return
	}
	dead, next, err := a.b.DeadLetters(after, limit)
	if err != nil {
		writeErr(w, err)
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

// sent serves GET /v1/sent: the delivered direct messages the store still
// keeps (the last store.SentMax within store.SentMaxAge), oldest first.
func (a *API) sent(w http.ResponseWriter, r *http.Request) {
	after, limit, ok := pageArgs(w, r)
	if !ok {
		return
	}
	sent, next, err := a.b.Sent(after, limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.Outbox{Messages: make([]api.Outgoing, 0, len(sent)), Next: next.String()}
	for _, m := range sent {
		out.Messages = append(out.Messages, api.Outgoing{
			ID: m.ID.String(), To: m.To, Kind: m.Kind, Attempts: m.Attempts,
			Created:     time.UnixMilli(m.Created).UTC(),
			DeliveredAt: time.UnixMilli(m.Delivered).UTC(),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) cancelOutgoing(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	if err := a.b.CancelOutgoing(id); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) deleteDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	if err := a.b.DeleteDeadLetter(id); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pageArgs reads a paged listing's after cursor and limit, answering the
// request itself when either is bad.
func pageArgs(w http.ResponseWriter, r *http.Request) (store.Cursor, int, bool) {
	q := r.URL.Query()
	after, err := store.ParseCursor(q.Get("after"))
	if err != nil {
		writeError(w, api.CodeBadCursor, "bad cursor "+strconv.Quote(q.Get("after")))
		return after, 0, false
	}
	limit, ok := pageLimit(w, r)
	return after, limit, ok
}
