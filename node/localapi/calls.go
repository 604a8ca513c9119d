package localapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/weftmesh/weft/internal/framejson"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// register serves POST /v1/handlers: the connection becomes a handler for
// the names in the body, and the answer streams the calls it is given
// (NDJSON HandlerEvents) until it disconnects.
func (a *API) register(w http.ResponseWriter, r *http.Request) {
	var req api.HandlerRequest
	if !decodeBody(w, r, maxSmallBody, &req) {
		return
	}
	h, err := a.b.RegisterHandler(node.HandlerSpec{Names: req.Names, Capabilities: capabilities(req.Capabilities),
		Concurrency: req.Concurrency, Allow: req.Allow})
	if err != nil {
		writeErr(w, err)
		return
	}
	defer h.Close()
	s := startStream(w, ndjson)
	if !s.json(api.HandlerEvent{Type: "ready", Allow: h.Allow()}) || !s.flush() {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	calls := h.Calls()
	for {
		select {
		case c := <-calls:
			if !s.callEvent(apiIncoming(c)) {
				return
			}
			for len(calls) > 0 { // batch what is queued into one flush
				if !s.callEvent(apiIncoming(<-calls)) {
					return
				}
			}
			if !s.flush() {
				return
			}
		case <-h.Cancelled():
			for _, id := range h.TakeCancels() {
				if !s.json(api.HandlerEvent{Type: "cancel", ID: id}) {
					return
				}
			}
			if !s.flush() {
				return
			}
		case <-tick.C:
			if !s.json(api.HandlerEvent{Type: "ping"}) || !s.flush() {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// reply serves POST /v1/calls/{id}/reply: the call's answer.
func (a *API) reply(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.b.CallIsStream(id); err != nil {
		writeErr(w, err)
		return
	}
	var rep api.Reply
	if !decodeBody(w, r, a.maxBody, &rep) {
		a.b.FailCall(id, "the handler's reply could not be read")
		return
	}
	if rep.Kind == "" {
		rep.Kind = protocol.FrameFinal
		if rep.Error != nil {
			rep.Kind = protocol.FrameError
		}
	}
	if rep.Kind != protocol.FrameFinal && rep.Kind != protocol.FrameError {
		a.b.FailCall(id, fmt.Sprintf("the handler sent a reply of kind %q", rep.Kind))
		writeError(w, api.CodeBadRequest, "a reply is final or error; stream deltas with POST /v1/calls/{id}/frames")
		return
	}
	a.answerWrite(w, 1, a.b.Finish(id, nodeReply(rep)))
}

// replies serves POST /v1/calls/replies: a handler's answers to its unary
// calls, as NDJSON lines, each a Reply with the call's "id", for as long
// as the handler serves. It answers at once with the headers, so the
// handler knows the route is there before it writes; the body, when the
// handler closes its side, counts the answers taken and those refused (a
// call that ended, an answer of the wrong kind, which fails its call). A
// line that cannot be read ends the stream with an error: the handler
// then answers with POST /v1/calls/{id}/reply. One stream saves each
// answer a request of its own.
func (a *API) replies(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		writeError(w, api.CodeInternal, "answers on one stream need a full-duplex connection: answer with POST /v1/calls/{id}/reply")
		return
	}
	// Idle between calls for as long as the handler serves.
	defer keepReading(r, func() bool { return true })()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	br := bufio.NewReaderSize(r.Body, 64<<10)
	var taken, refused int
	end := func(why string) {
		enc := json.NewEncoder(w)
		_ = enc.Encode(repliesResult{Taken: taken, Refused: refused, Error: why})
	}
	for {
		line, err := readLine(br, int(a.maxBody))
		if err == io.EOF {
			break
		}
		if err != nil {
			end(err.Error())
			return
		}
		var rep idReply
		if !parseIDReply(line, &rep) {
			rep = idReply{}
			if err := json.Unmarshal(line, &rep); err != nil {
				rep.ID = ""
			}
		}
		if rep.ID == "" {
			end("a line that is not an answer with an id")
			return
		}
		if rep.Kind == "" {
			rep.Kind = protocol.FrameFinal
			if rep.Error != nil {
				rep.Kind = protocol.FrameError
			}
		}
		switch {
		case rep.Kind != protocol.FrameFinal && rep.Kind != protocol.FrameError:
			a.b.FailCall(rep.ID, fmt.Sprintf("the handler sent an answer of kind %q", rep.Kind))
			refused++
		case a.b.Finish(rep.ID, nodeReply(rep.Reply)) != nil:
			refused++ // the call is over
		default:
			taken++
		}
	}
	end("")
}

// callEvent writes the handler event of call c as json would
// (appendCallEvent), and with json when appendCallEvent cannot.
func (s *stream) callEvent(c *api.IncomingCall) bool {
	b, ok := appendCallEvent(make([]byte, 0, 192+len(c.Input)), c)
	if !ok {
		return s.json(api.HandlerEvent{Type: "call", Call: c})
	}
	return s.write(append(b, '\n'))
}

// idReply is one line of POST /v1/calls/replies.
type idReply struct {
	ID string `json:"id"`
	api.Reply
}

// repliesResult is the body of POST /v1/calls/replies's answer.
type repliesResult struct {
	Taken   int    `json:"taken"`
	Refused int    `json:"refused"`
	Error   string `json:"error,omitempty"` // why the stream ended early
}

// nodeReply reads a final or error frame of a handler.
func nodeReply(rep api.Reply) node.Reply {
	out := node.Reply{Output: rep.Output, Meta: rep.Meta}
	if rep.Error != nil || rep.Kind == protocol.FrameError {
		out.Error = protocol.Errorf(protocol.CodeHandlerFailed, "the handler failed")
		if rep.Error != nil {
			if rep.Error.Code != "" {
				out.Error.Code = rep.Error.Code
			}
			out.Error.Message = rep.Error.Message
		}
	}
	return out
}

// frames serves POST /v1/calls/{id}/frames: a stream call's answer as
// NDJSON Reply lines (delta…, then final or error), forwarded as they are
// read, under the caller's flow control.
func (a *API) frames(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	stream, err := a.b.CallIsStream(id)
	if err != nil {
		writeErr(w, err)
		return
	}
	if !stream {
		writeError(w, api.CodeBadRequest, "not a stream call: answer with POST /v1/calls/{id}/reply")
		return
	}
	// The frames come as the handler makes them: however slowly, for as
	// long as the call lasts.
	defer keepReading(r, func() bool { _, err := a.b.CallIsStream(id); return err == nil })()
	br := bufio.NewReaderSize(r.Body, 64<<10)
	limit := int(a.maxBody)
	fail := func(why, answer string) {
		a.b.FailCall(id, why)
		writeError(w, api.CodeBadRequest, answer)
	}
	for frames := 0; ; frames++ {
		line, err := readLine(br, limit)
		if err == io.EOF {
			fail("the handler's frames ended without a final frame", "frames ended without a final or error frame; the call failed")
			return
		}
		if err != nil {
			fail(fmt.Sprintf("the handler's frames broke off: %v", err), err.Error())
			return
		}
		var rep api.Reply
		if kind, out, ok := framejson.ParseReply(bytes.TrimRight(line, "\r\n")); ok { // a delta, say: no reflection
			rep = api.Reply{Kind: kind, Output: out}
		} else if err := json.Unmarshal(line, &rep); err != nil {
			fail("the handler sent a malformed frame", fmt.Sprintf("frame %d: malformed JSON: %v", frames, err))
			return
		}
		switch rep.Kind {
		case protocol.FrameDelta:
			// About to wait for the handler: send what we have.
			if err := a.b.Delta(id, rep.Output, br.Buffered() == 0); err != nil {
				a.answerWrite(w, frames+1, err)
				return
			}
		case protocol.FrameFinal, protocol.FrameError:
			a.answerWrite(w, frames+1, a.b.Finish(id, nodeReply(rep)))
			return
		default:
			fail("the handler sent a frame of unknown kind", fmt.Sprintf("frame %d: kind %q: want delta, final or error", frames, rep.Kind))
			return
		}
	}
}

// readLine reads one non-empty line of at most limit bytes. The line may
// be br's own buffer: it is valid until br's next read.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	for {
		var line []byte
		for {
			chunk, err := br.ReadSlice('\n')
			if line == nil && err == nil && len(chunk) <= limit { // the whole line is buffered
				line = chunk
				break
			}
			line = append(line, chunk...)
			if len(line) > limit {
				return nil, fmt.Errorf("frame over %d bytes", limit)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && (err != io.EOF || len(line) == 0) {
				return nil, err
			}
			break
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// answerWrite answers a handler's reply request.
func (a *API) answerWrite(w http.ResponseWriter, frames int, err error) {
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"frames": frames})
}

// invoke serves POST /v1/invoke: a call to a peer's handler, unary (one
// JSON answer) or streamed (NDJSON frames).
func (a *API) invoke(w http.ResponseWriter, r *http.Request) {
	var req api.InvokeRequest
	if !readInvoke(w, r, a.maxBody, &req) {
		return
	}
	inv := node.Invocation{Name: req.Name, Input: req.Input, Meta: req.Meta, Parent: req.Parent}
	anycast := req.Capability != ""
	if anycast {
		if req.Peer != "" {
			writeError(w, api.CodeBadRequest, "give a peer or a capability, not both")
			return
		}
		if req.Name != "" && req.Name != req.Capability {
			writeError(w, api.CodeBadRequest, "a call by capability calls the capability's own name: leave name empty")
			return
		}
		inv.Name = req.Capability
	} else {
		to, err := parsePeer("peer", req.Peer)
		if err != nil {
			writeErr(w, err)
			return
		}
		inv.Peer = to
	}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 {
			writeError(w, api.CodeBadRequest, fmt.Sprintf("timeout %q is not a positive duration such as \"30s\"", req.Timeout))
			return
		}
		inv.Timeout = d
	}
	if !req.Stream {
		var (
			res node.Result
			ar  node.AnyResult
			err error
		)
		if anycast {
			res, ar, err = a.b.InvokeAny(r.Context(), inv)
		} else {
			res, err = a.b.Invoke(r.Context(), inv)
		}
		if err != nil {
			writeErr(w, err)
			return
		}
		out := api.InvokeResult{Output: res.Output, Meta: res.Meta}
		if anycast {
			out.Peer, out.Attempts = ar.Peer.String(), apiAttempts(ar.Attempts)
		}
		writeInvokeResult(w, out)
		return
	}
	var (
		cs  CallStream
		ar  node.AnyResult
		err error
	)
	if anycast {
		cs, ar, err = a.b.StreamInvokeAny(r.Context(), inv)
	} else {
		cs, err = a.b.StreamInvoke(r.Context(), inv)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	defer cs.Close()
	s := startStream(w, ndjson)
	var line []byte
	for first := true; ; first = false {
		f, err := cs.Next()
		if err != nil { // io.EOF: the answer ended
			s.flush()
			return
		}
		var ok bool
		if b, err := bareFrame(line[:0], f, first && anycast); err == nil {
			line = b
			ok = s.write(line)
		} else {
			out := api.Frame{Seq: f.Seq, Kind: f.Kind, Data: f.Data, Meta: f.Meta, Error: apiErrorBody(f.Error)}
			if first && anycast {
				out.Peer, out.Attempts = ar.Peer.String(), apiAttempts(ar.Attempts)
			}
			ok = s.json(out)
		}
		if !ok {
			return // the client left: Close cancels the call
		}
		if !cs.Buffered() && !s.flush() {
			return
		}
	}
}

// errNotBare is bareFrame's answer for a frame with more than seq, kind
// and data.
var errNotBare = errors.New("not a bare frame")

// bareFrame appends f's NDJSON line to dst without reflection when it has
// only seq, kind and data (every delta does), the same bytes as s.json.
func bareFrame(dst []byte, f protocol.CallFrame, extra bool) ([]byte, error) {
	if f.Meta != nil || f.Error != nil || extra {
		return dst, errNotBare
	}
	b, err := framejson.AppendFrame(dst, f.Seq, f.Kind, f.Data)
	if err != nil {
		return dst, err
	}
	return append(b, '\n'), nil
}

// callsInFlight serves GET /v1/calls: the handlers registered and the
// calls in flight both ways.
func (a *API) callsInFlight(w http.ResponseWriter, r *http.Request) {
	s := a.b.Serving()
	now := time.Now()
	conv := func(cs []node.ServedCall) []api.CallInFlight {
		out := make([]api.CallInFlight, 0, len(cs))
		for _, c := range cs {
			out = append(out, api.CallInFlight{ID: c.ID, Name: c.Name, Peer: c.From.String(), Stream: c.Stream,
				StartedAt: c.Started.UTC(), ElapsedMS: float64(now.Sub(c.Started).Microseconds()) / 1000})
		}
		return out
	}
	out := api.Calls{Handlers: make([]api.HandlerInfo, 0, len(s.Handlers)), Serving: conv(s.Calls), Calling: conv(s.Outgoing)}
	for _, h := range s.Handlers {
		out.Handlers = append(out.Handlers, api.HandlerInfo{Names: h.Names, Allow: h.Allow, InFlight: h.InFlight, Capacity: h.Capacity})
	}
	writeJSON(w, http.StatusOK, out)
}

// apiAttempts converts the providers a call by capability tried.
func apiAttempts(as []node.Attempt) []api.Attempt {
	var out []api.Attempt
	for _, a := range as {
		out = append(out, api.Attempt{Peer: a.Peer.String(), Code: a.Code, Message: a.Msg})
	}
	return out
}
