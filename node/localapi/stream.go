package localapi

import (
	"bufio"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/store"

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
	tail := store.Tail{After: after}
	for {
		changed := a.b.Changed(space)
		msgs, next, more, err := a.readTail(space, tail, eventBatch)
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
		tail = next
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

// readTail is readBounded for an event stream, from where its last read
// left it (store.Tail): what it reads again is only what was stored since.
func (a *API) readTail(space protocol.ID, t store.Tail, limit int) (msgs []node.Message, next store.Tail, more bool, err error) {
	msgs, next, cut, err := a.b.ReadTail(space, t, limit, node.MaxAnswerBytes)
	if err != nil {
		return nil, t, false, err
	}
	if i := answerCut(msgs); i < len(msgs) {
		return msgs[:i], store.Tail{After: msgs[i-1].Cursor}, true, nil
	}
	return msgs, next, cut || len(msgs) == limit, nil
}

// appendEvent appends m as one server-sent event: its cursor as the id,
// its JSON (as encoding/json writes it, by appendStored) as the data.
// False, b unchanged, for a message that has no JSON (it is skipped).
func appendEvent(b []byte, m node.Message) ([]byte, bool) {
	start := len(b)
	b = append(b, "id: "...)
	b, _ = m.Cursor.AppendText(b)
	b = append(b, "\nevent: message\ndata: "...)
	data := len(b)
	b, ok := appendStored(b, m)
	if !ok { // what appendStored leaves to encoding/json
		j, err := marshal(apiStored(m))
		if err != nil {
			return b[:start], false
		}
		b = append(b[:data], j...)
	}
	return append(b, "\n\n"...), true
}

// appendStored appends m's JSON as appendMessage(b, apiStored(m)) does,
// byte for byte, without building the api.Message: each event a
// follower gets was 8 allocations there (the text of every ID, the
// signature, the cursor), most of the cost of encoding it. False, as for
// appendMessage, for what it leaves to encoding/json.
func appendStored(b []byte, sm node.Message) ([]byte, bool) {
	m := sm.Message
	created := m.Created().UTC()
	if y := created.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, `{"id":`...)
	b = protocol.AppendJSONID(b, m.ID)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(m.V), 10)
	b = append(b, `,"space":`...)
	b = protocol.AppendJSONID(b, m.Space)
	b = append(b, `,"from":`...)
	b = jsonx.AppendString(b, m.From)
	b = append(b, `,"created_at":"`...)
	b = created.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(m.Prev) > 0 {
		b = protocol.AppendJSONIDs(append(b, `,"prev":`...), m.Prev)
	}
	if r := m.Refs; !r.IsZero() {
		b = appendRefs(b, r.Messages, protocol.AppendJSONIDs, r.Nodes)
	}
	b, ok := appendTail(b, m.Type, m.TTL, m.Meta, m.Content)
	if !ok {
		return b, false
	}
	b = append(b, `,"sig":"`...)
	b = base64.StdEncoding.AppendEncode(b, m.Sig)
	b = append(b, '"')
	if sm.Cursor != 0 {
		b = append(b, `,"cursor":"`...)
		b, _ = sm.Cursor.AppendText(b)
		b = append(b, '"')
	}
	return append(b, '}'), true
}

func (a *API) events(w http.ResponseWriter, r *http.Request) {
	if sp, ok := a.spaceOf(w, r); ok {
		a.streamEvents(w, r, sp.ID, sp.Name)
	}
}
