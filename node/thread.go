package node

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// Thread bounds.
const (
	defaultThreadDepth = 100
	maxThreadDepth     = 1000
	maxThreadSize      = 1000 // messages in one answer
)

// handleThread answers GET /v1/messages/{id}/thread?direction=&depth=: a
// breadth-first walk of refs.messages, up (ancestors: what the message
// replies to) or down (descendants: the replies to it), over the messages
// this node holds.
func (n *Node) handleThread(w http.ResponseWriter, r *http.Request) {
	id, err := protocol.ParseID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.Code(err), err.Error())
		return
	}
	q := r.URL.Query()
	dir := cmp.Or(q.Get("direction"), "ancestors")
	if dir != "ancestors" && dir != "descendants" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "direction must be ancestors or descendants")
		return
	}
	depth := defaultThreadDepth
	if s := q.Get("depth"); s != "" {
		depth, err = strconv.Atoi(s)
		if err != nil || depth < 0 || depth > maxThreadDepth {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "depth must be 0.."+strconv.Itoa(maxThreadDepth))
			return
		}
	}
	th, err := n.thread(id, dir == "ancestors", depth)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no message "+id.String())
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
	default:
		th.Direction = dir
		writeJSON(w, http.StatusOK, th)
	}
}

// thread walks from id breadth-first to maxDepth.
func (n *Node) thread(id protocol.ID, up bool, maxDepth int) (api.Thread, error) {
	th := api.Thread{Messages: []api.ThreadMessage{}}
	seen := map[protocol.ID]bool{id: true}
	level := []protocol.ID{id}
	for depth := 0; len(level) > 0; depth++ {
		var found []api.ThreadMessage
		var next []protocol.ID
		for _, mid := range level {
			e, err := n.store.Get(mid)
			if errors.Is(err, store.ErrNotFound) && depth > 0 {
				continue // a message this node does not hold (yet)
			}
			if err != nil {
				return th, err
			}
			m, err := protocol.Decode(e.Raw, protocol.DefaultLimits())
			if err != nil {
				return th, err
			}
			found = append(found, api.ThreadMessage{Depth: depth, Message: apiMessage(m, e.Cursor)})
			links := m.Refs.Messages
			if !up {
				if links, err = n.store.Replies(mid, maxThreadSize); err != nil {
					return th, err
				}
			}
			for _, l := range links {
				if !seen[l] {
					seen[l] = true
					next = append(next, l)
				}
			}
		}
		slices.SortFunc(found, func(a, b api.ThreadMessage) int {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
		th.Messages = append(th.Messages, found...)
		if len(th.Messages) >= maxThreadSize {
			th.Messages, th.Truncated = th.Messages[:maxThreadSize], true
			return th, nil
		}
		if depth == maxDepth {
			th.Truncated = len(next) > 0
			break
		}
		level = next
	}
	return th, nil
}
