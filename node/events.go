package node

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// SSE tuning.
const (
	eventBatch     = 256              // messages read from the store per round
	keepAlive      = 15 * time.Second // comment line sent to an idle stream
	eventWriteWait = time.Minute      // a reader that takes longer for one write is cut off
)

// handleEvents streams a space as server-sent events: everything after the
// cursor (?after= or the Last-Event-ID header), then each new message as it
// is stored. Each event's id is the message's cursor. The stream reads from
// the store, never from a buffer: a slow reader falls behind but loses
// nothing, and a reconnect with Last-Event-ID resumes exactly.
func (n *Node) handleEvents(w http.ResponseWriter, r *http.Request) {
	if sp, ok := n.space(w, r); ok {
		n.streamEvents(w, r, sp.ID, sp.Name)
	}
}

// streamEvents streams a space (or the inbox) named label.
func (n *Node) streamEvents(w http.ResponseWriter, r *http.Request, space protocol.ID, label string) {
	from := r.URL.Query().Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
	}
	after, ok := n.after(w, space, from)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if _, err := w.Write([]byte(s)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(": stream of " + label + "\n\n") {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	ctx := r.Context()
	for {
		changed := n.store.Changed(space)
		entries, next, err := n.store.Read(space, after, eventBatch)
		if err != nil {
			write("event: error\ndata: " + strconv.Quote(err.Error()) + "\n\n")
			return
		}
		var buf []byte
		for _, e := range entries {
			m, err := n.entryMessage(e)
			if err != nil {
				n.log.Warn("event stream", "err", err)
				continue
			}
			data, err := marshal(m)
			if err != nil {
				continue
			}
			buf = fmt.Appendf(buf, "id: %s\nevent: message\ndata: %s\n\n", e.Cursor, data)
		}
		if len(buf) > 0 && !write(string(buf)) {
			return
		}
		after = next
		if len(entries) == eventBatch {
			continue
		}
		select {
		case <-changed:
		case <-tick.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
