package a2abridge

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/weftmesh/weft/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got (as indented JSON) with testdata/name, or rewrites
// it with -update.
func golden(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the mapping's output:\n--- got\n%s--- want\n%s", file, b, want)
	}
}

// TestMappingInbound: A2A messages (as A2A JSON) and the weft call input,
// name and meta they become.
func TestMappingInbound(t *testing.T) {
	messages := []struct {
		Name    string          `json:"name"`
		Message json.RawMessage `json:"message"`
		Header  string          `json:"traceparent_header,omitempty"`
	}{
		{Name: "one text part", Message: json.RawMessage(`{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}`)},
		{Name: "one data part", Message: json.RawMessage(`{"messageId":"m2","role":"ROLE_USER","parts":[{"data":{"x":1,"y":[true,null]}}]}`)},
		{Name: "several parts", Message: json.RawMessage(`{"messageId":"m3","role":"ROLE_USER","parts":[{"text":"see"},{"url":"https://example.org/a.png","mediaType":"image/png"}]}`)},
		{Name: "a text part with a media type", Message: json.RawMessage(`{"messageId":"m4","role":"ROLE_USER","parts":[{"text":"# hi","mediaType":"text/markdown"}]}`)},
		{Name: "weft name and meta, trace header", Header: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			Message: json.RawMessage(`{"messageId":"m5","role":"ROLE_USER","contextId":"ctx-1","parts":[{"text":"x"}],"metadata":{"weft.name":"summarize","weft.meta":{"correlation":"c-9","local.secret":"dropped","n":3}}}`)},
	}
	type out struct {
		Name  string            `json:"name"`
		In    json.RawMessage   `json:"message"`
		Input json.RawMessage   `json:"input"`
		Call  string            `json:"call"`
		Meta  map[string]string `json:"meta"`
	}
	var got []out
	for _, m := range messages {
		var msg a2a.Message
		if err := json.Unmarshal(m.Message, &msg); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		in, err := InputOf(&msg)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		hdr := func(k string) string {
			if k == protocol.MetaTraceparent {
				return m.Header
			}
			return ""
		}
		got = append(got, out{Name: m.Name, In: m.Message, Input: in, Call: NameOf(&msg, nil, "default"), Meta: MetaOf(&msg, nil, hdr, msg.ContextID)})
	}
	golden(t, "inbound.json", got)
	if _, err := InputOf(&a2a.Message{}); err == nil {
		t.Error("a message with no parts became a call input")
	}
}

// TestMappingFrames: weft call frames and the A2A task events they
// become (timestamps left out).
func TestMappingFrames(t *testing.T) {
	info := a2a.TaskInfo{TaskID: "task-1", ContextID: "ctx-1"}
	frames := []protocol.CallFrame{
		{Seq: 0, Kind: protocol.FrameStarted},
		{Seq: 1, Kind: protocol.FrameDelta, Data: json.RawMessage(`"partial text"`)},
		{Seq: 2, Kind: protocol.FrameDelta, Data: json.RawMessage(`{"n":2}`)},
		{Seq: 3, Kind: protocol.FrameFinal, Data: json.RawMessage(`{"summary":"done"}`), Meta: map[string]string{"session": "ctx-1"}},
		{Seq: 3, Kind: protocol.FrameFinal, Data: json.RawMessage(`null`)},
		{Seq: 2, Kind: protocol.FrameError, Error: protocol.Errorf(protocol.CodeHandlerFailed, "it broke")},
		{Seq: 1, Kind: protocol.FrameError, Error: protocol.Errorf(protocol.CodeCancelled, "call cancelled")},
		{Seq: 0, Kind: protocol.FrameError, Error: protocol.Errorf(protocol.CodeNoHandler, "no handler for \"x\"")},
	}
	type out struct {
		Frame  protocol.CallFrame   `json:"frame"`
		Events []a2a.StreamResponse `json:"events"`
	}
	var got []out
	first := true
	for _, f := range frames {
		o := out{Frame: f, Events: []a2a.StreamResponse{}}
		for _, ev := range Events(info, f, "12D3KooWPeer", first) {
			switch v := ev.(type) {
			case *a2a.TaskStatusUpdateEvent:
				v.Status.Timestamp = nil
				if v.Status.Message != nil {
					v.Status.Message.ID = "(random)"
				}
			}
			o.Events = append(o.Events, a2a.StreamResponse{Event: ev})
		}
		if f.Kind == protocol.FrameDelta {
			first = false
		}
		got = append(got, o)
	}
	golden(t, "frames.json", got)
}

// TestMappingOutbound: weft call inputs and the A2A message sent to an
// A2A agent (weft handle --a2a), and A2A answer parts and the call output
// they become; InputOf(MessageOf(x)) == x and OutputOf(PartsOf(x)) == x.
func TestMappingOutbound(t *testing.T) {
	inputs := []string{`"hello"`, `{"x":1}`, `[1,2]`, `null`, `{"parts":[{"text":"a"},{"url":"https://example.org/b"}]}`, `{"parts":"not parts"}`}
	type out struct {
		Input   json.RawMessage `json:"input"`
		Message *a2a.Message    `json:"message"`
		Output  json.RawMessage `json:"output_of_its_parts"`
	}
	var got []out
	for _, in := range inputs {
		m, err := MessageOf(json.RawMessage(in), map[string]string{"session": "s", "local.k": "kept home"})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		m.ID = "(random)"
		o, err := OutputOf(m.Parts)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out{Input: json.RawMessage(in), Message: m, Output: o})
		if back, _ := InputOf(m); in != "null" && !bytes.Equal(back, []byte(in)) {
			t.Errorf("InputOf(MessageOf(%s)) = %s", in, back)
		}
		if in != "null" && !bytes.Equal(o, []byte(in)) {
			t.Errorf("OutputOf(MessageOf(%s).Parts) = %s", in, o)
		}
	}
	golden(t, "outbound.json", got)
	if _, err := MessageOf(json.RawMessage(`{`), nil); err == nil {
		t.Error("bad JSON input became a message")
	}

	// A task's state becomes the call's error.
	for _, tc := range []struct {
		state a2a.TaskState
		code  string
	}{{a2a.TaskStateCompleted, ""}, {a2a.TaskStateFailed, protocol.CodeHandlerFailed}, {a2a.TaskStateCanceled, protocol.CodeCancelled},
		{a2a.TaskStateRejected, protocol.CodeForbidden}, {a2a.TaskStateInputRequired, protocol.CodeHandlerFailed}} {
		task := &a2a.Task{ID: "t", Status: a2a.TaskStatus{State: tc.state, Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("why"))},
			Artifacts: []*a2a.Artifact{{ID: "a", Parts: []*a2a.Part{a2a.NewTextPart("out")}}}}
		out, ce := ResultOf(task)
		switch {
		case tc.code == "" && (ce != nil || string(out) != `"out"`):
			t.Errorf("%s: %s %v", tc.state, out, ce)
		case tc.code != "" && (ce == nil || ce.Code != tc.code):
			t.Errorf("%s: error %v, want code %s", tc.state, ce, tc.code)
		}
	}
}
