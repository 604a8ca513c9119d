package localapi

import (
	"bufio"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/node"

	"github.com/weftmesh/weft/protocol"
)

// Streaming tuning.
const (
	eventBatch     = 256              // messages read from the store per round (at most node.MaxAnswerBytes of them)
	keepAlive      = 15 * time.Second // sent to an idle stream
	eventWriteWait = time.Minute      // a reader that takes longer for one write is cut off
	ndjson         = "application/x-ndjson"
)

// stream is the one writer of every streamed answer (server-sent events,
// handler events, stream calls): it buffers, bounds each write by
// eventWriteWait (a reader that stops reading is cut off, not waited on
// forever) and flushes on demand. After a failed write every call fails.
type stream struct {
	w   *bufio.Writer
	rc  *http.ResponseController
	err error
}

// startStream sends the headers of a streamed answer of contentType.
func startStream(w http.ResponseWriter, contentType string) *stream {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &stream{w: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w)}
}

func (s *stream) write(b []byte) bool {
	if s.err == nil {
		if len(b) > s.w.Available() { // this write reaches the connection
			_ = s.rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		}
		_, s.err = s.w.Write(b)
	}
	return s.err == nil
}

// json writes v as one NDJSON line.
func (s *stream) json(v any) bool {
	b, err := marshal(v)
	if err != nil {
		s.err = err
		return false
	}
	return s.write(append(b, '\n'))
}

// flush sends what is buffered.
func (s *stream) flush() bool {
	if s.err == nil {
		_ = s.rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if s.err = s.w.Flush(); s.err == nil {
			s.err = s.rc.Flush()
		}
	}
	return s.err == nil
}

// marshal is jsonx.Marshal: agents' JSON as they wrote it.
var marshal = jsonx.Marshal

// streamEvents streams a space (or the inbox) named label as server-sent
// events: everything after the cursor (?after= or the Last-Event-ID
// header), then each new message as it is stored. Each event's id is the
// message's cursor. It reads from the store, never from a buffer: a slow
// reader falls behind but loses nothing, and a reconnect with
// Last-Event-ID resumes exactly.
func (a *API) streamEvents(w http.ResponseWriter, r *http.Request, space protocol.ID, label string) {
	from := r.URL.Query().Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
	}
	after, err := a.after(space, from)
	if err != nil {
		writeErr(w, err)
		return
	}
	s := startStream(w, "text/event-stream")
	if !s.write([]byte(": stream of "+label+"\n\n")) || !s.flush() {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	ctx := r.Context()
	var buf []byte
	for {
		changed := a.b.Changed(space)
		msgs, next, more, err := a.readBounded(space, after, eventBatch)
		if err != nil {
			s.write([]byte("event: error\ndata: " + strconv.Quote(err.Error()) + "\n\n"))
			s.flush()
			return
		}
		for _, m := range msgs {
			var ok bool
			if buf, ok = appendEvent(buf[:0], m); !ok {
				continue
			}
			if !s.write(buf) {
				return
			}
		}
		if len(msgs) > 0 && !s.flush() {
			return
		}
		after = next
		if more {
			continue
		}
		select {
		case <-changed:
		case <-tick.C:
			if !s.write([]byte(": keep-alive\n\n")) || !s.flush() {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// appendEvent appends m as one server-sent event: its cursor as the id,
// its JSON (as encoding/json writes it, by appendMessage) as the data.
// False, b unchanged, for a message that has no JSON (it is skipped).
func appendEvent(b []byte, m node.Message) ([]byte, bool) {
	start := len(b)
	b = append(b, "id: "...)
	b = append(b, m.Cursor.String()...)
	b = append(b, "\nevent: message\ndata: "...)
	am := apiStored(m)
	data := len(b)
	b, ok := appendMessage(b, am)
	if !ok { // what appendMessage leaves to encoding/json
		j, err := marshal(am)
		if err != nil {
			return b[:start], false
		}
		b = append(b[:data], j...)
	}
	return append(b, "\n\n"...), true
}

func (a *API) events(w http.ResponseWriter, r *http.Request) {
	if sp, ok := a.spaceOf(w, r); ok {
		a.streamEvents(w, r, sp.ID, sp.Name)
	}
}
