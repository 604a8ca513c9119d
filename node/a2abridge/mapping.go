package a2abridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/weftmesh/weft/protocol"
)

// The mapping between A2A's data model and weft's call frames (see
// MAPPING.md beside this file; testdata/ holds its golden cases).

// Metadata keys the bridge reads and writes in A2A metadata maps.
const (
	// MetaName (in a message's or a request's metadata) names the weft call
	// (a skill ID of the card) when the agent serves more than one.
	MetaName = "weft.name"
	// MetaMeta (an object of strings) carries weft call meta: on a message,
	// added to the call's meta; on a final status, the response's meta.
	MetaMeta = "weft.meta"
	// MetaPeer (on status updates) is the peer that answers the call.
	MetaPeer = "weft.peer"
	// MetaCode (on a failed status) is the weft error code.
	MetaCode = "weft.code"
	// MetaSeq (on an artifact update) is the delta's frame seq; when the
	// update carries several deltas (one part each), MetaLastSeq is the
	// last one's.
	MetaSeq     = "weft.seq"
	MetaLastSeq = "weft.last_seq"
)

// Artifact IDs of a task's answer: the stream's deltas are chunks of one
// artifact, the final output another.
const (
	ArtifactDeltas = "weft-deltas"
	ArtifactResult = "weft-result"
)

// errNoInput is a message with no part the bridge can pass on.
var errNoInput = errors.New("the message has no parts")

// InputOf maps an A2A message to a call's input: a message of one text
// part is that text as a JSON string, one data part is its value as is,
// and anything else (several parts, raw bytes, URLs, a part with a
// filename or media type) is {"parts": [the parts as A2A JSON]}.
func InputOf(m *a2a.Message) (json.RawMessage, error) {
	if m == nil || len(m.Parts) == 0 {
		return nil, errNoInput
	}
	if len(m.Parts) == 1 && m.Parts[0] != nil {
		p := m.Parts[0]
		if p.Filename == "" && p.MediaType == "" && len(p.Metadata) == 0 {
			switch c := p.Content.(type) {
			case a2a.Text:
				return json.Marshal(string(c))
			case a2a.Data:
				return marshal(c.Value)
			}
		}
	}
	return marshal(map[string]any{"parts": m.Parts})
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// PartsOf maps a call's output (a final frame's data or a delta) to A2A
// parts: a JSON string is a text part, JSON null none, anything else one
// data part.
func PartsOf(data json.RawMessage) []*a2a.Part {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	if data[0] == '"' {
		var s string
		if json.Unmarshal(data, &s) == nil {
			return []*a2a.Part{a2a.NewTextPart(s)}
		}
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return []*a2a.Part{a2a.NewTextPart(string(data))}
	}
	return []*a2a.Part{a2a.NewDataPart(v)}
}

// MetaOf maps a message, its request's metadata and the request's
// headers to a call's meta: the W3C trace context headers (traceparent,
// tracestate) carry the trace, the task's context ID is the session,
// and the string values of "weft.meta" objects (the request's, then the
// message's) are added; keys under "local." are dropped, as are the
// entries of meta the call would refuse.
func MetaOf(m *a2a.Message, reqMeta map[string]any, header func(string) string, contextID string) map[string]string {
	meta := map[string]string{}
	for _, src := range []map[string]any{reqMeta, messageMeta(m)} {
		obj, _ := src[MetaMeta].(map[string]any)
		for k, v := range obj {
			if s, ok := v.(string); ok && !protocol.IsLocalMeta(k) {
				meta[k] = s
			}
		}
	}
	if contextID != "" && meta[protocol.MetaSession] == "" {
		meta[protocol.MetaSession] = contextID
	}
	if header != nil {
		if tp := header(protocol.MetaTraceparent); tp != "" {
			if _, err := protocol.ParseTraceparent(tp); err == nil {
				meta[protocol.MetaTraceparent] = tp
				if ts := header(protocol.MetaTracestate); ts != "" {
					meta[protocol.MetaTracestate] = ts
				}
			}
		}
	}
	for k, v := range meta {
		if protocol.ValidateMeta(map[string]string{k: v}) != nil {
			delete(meta, k)
		}
	}
	if protocol.ValidateMeta(meta) != nil { // too many or too big together
		return map[string]string{protocol.MetaSession: contextID}
	}
	return meta
}

func messageMeta(m *a2a.Message) map[string]any {
	if m == nil {
		return nil
	}
	return m.Metadata
}

// NameOf returns the weft call a message asks for: "weft.name" in the
// message's metadata, else in the request's, else def (the agent's one
// skill, or the one in its URL).
func NameOf(m *a2a.Message, reqMeta map[string]any, def string) string {
	for _, src := range []map[string]any{messageMeta(m), reqMeta} {
		if s, ok := src[MetaName].(string); ok && s != "" {
			return s
		}
	}
	return def
}

// anyMeta is meta as A2A metadata.
func anyMeta(meta map[string]string) map[string]any {
	out := make(map[string]any, len(meta))
	for k, v := range meta {
		out[k] = v
	}
	return out
}

// Events are what one call frame becomes on a task (info names the task).
// started is a working status (with the answering peer), a delta an
// append to the deltas artifact, a final the result artifact (if its data
// is not null) and a completed status with the response's meta, an error
// a failed status whose message is the error (a cancelled call becomes a
// canceled status).
func Events(info a2a.TaskInfoProvider, f protocol.CallFrame, peer string, firstDelta bool) []a2a.Event {
	switch f.Kind {
	case protocol.FrameStarted:
		ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, nil)
		ev.Metadata = map[string]any{MetaPeer: peer}
		return []a2a.Event{ev}
	case protocol.FrameDelta:
		ev := a2a.NewArtifactUpdateEvent(info, ArtifactDeltas, partsOrEmpty(f.Data)...)
		ev.Append = !firstDelta
		ev.Metadata = map[string]any{MetaSeq: f.Seq}
		return []a2a.Event{ev}
	case protocol.FrameFinal:
		var out []a2a.Event
		if parts := PartsOf(f.Data); len(parts) > 0 {
			ev := a2a.NewArtifactUpdateEvent(info, ArtifactResult, parts...)
			ev.Append, ev.LastChunk = false, true
			out = append(out, ev)
		}
		ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateCompleted, nil)
		ev.Metadata = map[string]any{MetaPeer: peer}
		if len(f.Meta) > 0 {
			ev.Metadata[MetaMeta] = anyMeta(f.Meta)
		}
		return append(out, ev)
	case protocol.FrameError:
		e := f.Error
		if e == nil {
			e = protocol.Errorf(protocol.CodeHandlerFailed, "the call failed")
		}
		return []a2a.Event{Failure(info, e, peer)}
	}
	return nil
}

// Failure is the status a failed call leaves its task in: canceled for a
// cancelled call, rejected when no handler would take it (no_handler,
// forbidden, bad_request), failed otherwise; its message says why.
func Failure(info a2a.TaskInfoProvider, e *protocol.CallError, peer string) *a2a.TaskStatusUpdateEvent {
	state := a2a.TaskStateFailed
	switch e.Code {
	case protocol.CodeCancelled:
		state = a2a.TaskStateCanceled
	case protocol.CodeNoHandler, protocol.CodeForbidden, protocol.CodeBadRequest:
		state = a2a.TaskStateRejected
	}
	msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(fmt.Sprintf("%s: %s", e.Code, e.Message)))
	ev := a2a.NewStatusUpdateEvent(info, state, msg)
	ev.Metadata = map[string]any{MetaCode: e.Code}
	if peer != "" {
		ev.Metadata[MetaPeer] = peer
	}
	return ev
}

func partsOrEmpty(data json.RawMessage) []*a2a.Part {
	if p := PartsOf(data); len(p) > 0 {
		return p
	}
	return []*a2a.Part{a2a.NewTextPart("")}
}

// skillOf maps a weft capability to an A2A skill.
func skillOf(c protocol.Capability) a2a.AgentSkill {
	desc := c.Description
	if desc == "" {
		desc = "the weft call " + c.Name
	}
	s := a2a.AgentSkill{ID: c.Name, Name: c.Name, Description: desc, Tags: []string{"weft"},
		InputModes: []string{"text/plain", "application/json"}, OutputModes: []string{"text/plain", "application/json"}}
	if c.Access != "" {
		s.Tags = append(s.Tags, "access:"+c.Access)
	}
	if len(c.InputSchema) > 0 {
		s.Examples = []string{"input schema: " + strings.TrimSpace(string(c.InputSchema))}
	}
	return s
}

// The other way: a weft call served by an A2A agent (weft handle NAME
// --a2a URL).

// MessageOf maps a call's input to the A2A message sent to the agent: the
// inverse of InputOf (a JSON string is one text part, {"parts": [...]} the
// parts it holds, any other value one data part; no input, an empty text
// part), with the call's meta in "weft.meta".
func MessageOf(input json.RawMessage, meta map[string]string) (*a2a.Message, error) {
	var parts []*a2a.Part
	input = bytes.TrimSpace(input)
	switch {
	case len(input) == 0 || string(input) == "null":
		parts = []*a2a.Part{a2a.NewTextPart("")}
	case input[0] == '"':
		var s string
		if err := json.Unmarshal(input, &s); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		parts = []*a2a.Part{a2a.NewTextPart(s)}
	default:
		var wrapped struct {
			Parts []*a2a.Part `json:"parts"`
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(input, &keys) == nil && len(keys) == 1 && keys["parts"] != nil &&
			json.Unmarshal(input, &wrapped) == nil && len(wrapped.Parts) > 0 {
			parts = wrapped.Parts
			break
		}
		var v any
		if err := json.Unmarshal(input, &v); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		parts = []*a2a.Part{a2a.NewDataPart(v)}
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	if len(meta) > 0 {
		m.Metadata = map[string]any{MetaMeta: anyMeta(protocol.StripLocal(meta))}
	}
	return m, nil
}

// OutputOf maps an A2A agent's answer parts to a call's output: the
// inverse of PartsOf (no part is null, one text part its text as a JSON
// string, one data part its value, several {"parts": [...]}).
func OutputOf(parts []*a2a.Part) (json.RawMessage, error) {
	switch {
	case len(parts) == 0:
		return json.RawMessage("null"), nil
	case len(parts) == 1 && parts[0] != nil && parts[0].Filename == "" && parts[0].MediaType == "":
		switch c := parts[0].Content.(type) {
		case a2a.Text:
			return marshal(string(c))
		case a2a.Data:
			return marshal(c.Value)
		}
	}
	return marshal(map[string]any{"parts": parts})
}

// ResultOf maps what an A2A agent answered a SendMessage with to a call's
// output or error: a message's parts, or a task's artifacts' parts (in
// order) when it completed; a task that failed, was rejected or canceled,
// or wants input or authentication, is an error whose message is the
// task's status message.
func ResultOf(r a2a.SendMessageResult) (json.RawMessage, *protocol.CallError) {
	switch v := r.(type) {
	case *a2a.Message:
		out, err := OutputOf(v.Parts)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeHandlerFailed, "the agent's answer: %v", err)
		}
		return out, nil
	case *a2a.Task:
		if e := taskError(v); e != nil {
			return nil, e
		}
		var parts []*a2a.Part
		for _, a := range v.Artifacts {
			parts = append(parts, a.Parts...)
		}
		out, err := OutputOf(parts)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeHandlerFailed, "the agent's answer: %v", err)
		}
		return out, nil
	}
	return nil, protocol.Errorf(protocol.CodeHandlerFailed, "the agent answered with %T", r)
}

// taskError is the call error of a task in a state other than completed.
func taskError(t *a2a.Task) *protocol.CallError {
	st := t.Status.State
	if st == a2a.TaskStateCompleted {
		return nil
	}
	why := string(st)
	if m := t.Status.Message; m != nil {
		var texts []string
		for _, p := range m.Parts {
			if p != nil && p.Text() != "" {
				texts = append(texts, p.Text())
			}
		}
		if len(texts) > 0 {
			why += ": " + strings.Join(texts, " ")
		}
	}
	code := protocol.CodeHandlerFailed
	switch st {
	case a2a.TaskStateCanceled:
		code = protocol.CodeCancelled
	case a2a.TaskStateRejected:
		code = protocol.CodeForbidden
	}
	return protocol.Errorf(code, "the A2A agent's task %s ended %s", t.ID, why)
}

// StatusError is the call error of a status update that ends a task other
// than completed (nil for completed or a state that does not end it).
func StatusError(ev *a2a.TaskStatusUpdateEvent) *protocol.CallError {
	if !ev.Status.State.Terminal() && ev.Status.State != a2a.TaskStateInputRequired && ev.Status.State != a2a.TaskStateAuthRequired {
		return nil
	}
	return taskError(&a2a.Task{ID: ev.TaskID, Status: ev.Status})
}
