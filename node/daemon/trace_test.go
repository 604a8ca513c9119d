package daemon

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// gotSpan is a span an OTLP receiver got, with the service.instance.id of
// the resource that sent it.
type gotSpan struct {
	instance string
	span     *tracepb.Span
}

func (s gotSpan) trace() string  { return hex.EncodeToString(s.span.TraceId) }
func (s gotSpan) id() string     { return hex.EncodeToString(s.span.SpanId) }
func (s gotSpan) parent() string { return hex.EncodeToString(s.span.ParentSpanId) }
func (s gotSpan) attr(k string) string {
	for _, a := range s.span.Attributes {
		if a.Key == k {
			return a.Value.GetStringValue()
		}
	}
	return ""
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what exporters
// send (protobuf, gzipped or not) and keeps the spans.
type otlpReceiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []gotSpan
	bad   []string
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		r.bad = append(r.bad, fmt.Sprintf("%s %s %s: %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err))
		http.Error(w, "bad export", 400)
		return
	}
	for _, rs := range msg.ResourceSpans {
		inst := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.instance.id" {
				inst = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, gotSpan{instance: inst, span: s})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// find returns the span named name that instance sent in trace, if any.
func (r *otlpReceiver) find(instance, trace, name string) (gotSpan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.instance == instance && s.trace() == trace && s.span.Name == name {
			return s, true
		}
	}
	return gotSpan{}, false
}

func (r *otlpReceiver) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, s := range r.spans {
		fmt.Fprintf(&b, "\n  %s %s trace %s span %s parent %s", s.instance, s.span.Name, s.trace(), s.id(), s.parent())
	}
	fmt.Fprintf(&b, "\n  bad exports: %v", r.bad)
	return b.String()
}

// traceparentSpan returns the span ID in a traceparent.
func traceparentSpan(tp string) string {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[2]
}

// TestTraceAcrossDaemons: with OTEL_EXPORTER_OTLP_ENDPOINT set, two
// daemons export spans to a real OTLP receiver, and one trace, started by
// the calling agent's traceparent, follows a call through both daemons to
// the handler, into a call the handler makes back (nested, by parent), and
// to the handler of that; a message and a DM sent with the same
// traceparent are in it too, on the sender and on the receiver.
func TestTraceAcrossDaemons(t *testing.T) {
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a, ca, b, cb := pair(t)
	trust(t, ca, b)
	trust(t, cb, a)

	const traceID, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	agentTP := "00-" + traceID + "-" + agentSpan + "-01"
	var handlerMu sync.Mutex
	var outerTP, innerTP string // what each handler got
	serve(t, ca, func(_ context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		handlerMu.Lock()
		innerTP = c.Meta["traceparent"]
		handlerMu.Unlock()
		return json.RawMessage(`"inner done"`), nil, nil
	}, "inner")
	serve(t, cb, func(ctx context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		handlerMu.Lock()
		outerTP = c.Meta["traceparent"]
		handlerMu.Unlock()
		res, err := cb.Invoke(ctx, api.InvokeRequest{Peer: a.ID().String(), Name: "inner", Parent: c.ID})
		if err != nil {
			return nil, nil, err
		}
		return res.Output, nil, nil
	}, "outer")

	res, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "outer", Meta: map[string]string{"traceparent": agentTP}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"inner done"` {
		t.Fatalf("output %s", res.Output)
	}
	for _, c := range []*client.Client{ca, cb} {
		if _, err := c.Join(ctx, "traced"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ca.Send(ctx, "traced", api.SendRequest{Content: json.RawMessage(`{"text":"hi"}`), Meta: map[string]string{"traceparent": agentTP}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.DM(ctx, api.DMRequest{To: b.ID().String(), Content: json.RawMessage(`{"q":1}`), Meta: map[string]string{"traceparent": agentTP}}); err != nil {
		t.Fatal(err)
	}

	ia, ib := a.ID().String(), b.ID().String()
	want := []struct{ instance, name string }{
		{ia, "invoke_agent outer"}, {ib, "invoke_agent outer"},
		{ib, "invoke_agent inner"}, {ia, "invoke_agent inner"},
		{ia, "send traced"}, {ib, "process traced"},
		{ia, "send dm"}, {ib, "process dm"},
	}
	got := make([]gotSpan, len(want))
	eventually(t, 20*time.Second, "every span of the trace at the receiver", func() bool {
		for i, w := range want {
			var ok bool
			if got[i], ok = rcv.find(w.instance, traceID, w.name); !ok {
				return false
			}
		}
		return true
	})
	clientOuter, serverOuter, clientInner, serverInner := got[0], got[1], got[2], got[3]
	chain := []struct {
		what         string
		span         gotSpan
		parent       string
		kind         tracepb.Span_SpanKind
		handlerSawTP string
	}{
		{"a's client span of outer", clientOuter, agentSpan, tracepb.Span_SPAN_KIND_CLIENT, ""},
		{"b's server span of outer", serverOuter, clientOuter.id(), tracepb.Span_SPAN_KIND_SERVER, outerTP},
		{"b's client span of the nested inner", clientInner, serverOuter.id(), tracepb.Span_SPAN_KIND_CLIENT, ""},
		{"a's server span of inner", serverInner, clientInner.id(), tracepb.Span_SPAN_KIND_SERVER, innerTP},
		{"a's send", got[4], agentSpan, tracepb.Span_SPAN_KIND_PRODUCER, ""},
		{"b's delivery", got[5], agentSpan, tracepb.Span_SPAN_KIND_CONSUMER, ""},
		{"a's DM", got[6], agentSpan, tracepb.Span_SPAN_KIND_PRODUCER, ""},
		{"b's DM delivery", got[7], agentSpan, tracepb.Span_SPAN_KIND_CONSUMER, ""},
	}
	for _, c := range chain {
		if c.span.parent() != c.parent {
			t.Errorf("%s: parent %s, want %s%s", c.what, c.span.parent(), c.parent, rcv.dump())
		}
		if c.span.span.Kind != c.kind {
			t.Errorf("%s: kind %v, want %v", c.what, c.span.span.Kind, c.kind)
		}
		if c.span.span.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s: status %v", c.what, c.span.span.Status)
		}
	}
	for _, s := range []gotSpan{clientOuter, serverOuter, clientInner, serverInner} {
		if s.attr("gen_ai.operation.name") != "invoke_agent" || !strings.HasSuffix(s.span.Name, s.attr("gen_ai.agent.name")) {
			t.Errorf("%s: gen_ai attributes %v", s.span.Name, s.span.Attributes)
		}
	}
	// The join's sync sessions are spans too, each its own trace.
	eventually(t, 20*time.Second, "a sync span", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, s := range rcv.spans {
			if s.span.Name == "sync traced" && (s.instance == ia || s.instance == ib) {
				return true
			}
		}
		return false
	})
	handlerMu.Lock()
	defer handlerMu.Unlock()
	if traceparentSpan(outerTP) != serverOuter.id() || traceparentSpan(innerTP) != serverInner.id() {
		t.Errorf("handlers got traceparents %s and %s, want the server spans %s and %s", outerTP, innerTP, serverOuter.id(), serverInner.id())
	}
}

// TestNoTracingByDefault: without OTEL_EXPORTER_OTLP_* the daemon makes
// no tracer, and a call's traceparent goes through as it always did (the
// handler gets a child of the caller's trace).
func TestNoTracingByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	a, ca, b, cb := pair(t)
	if a.tracer != nil || b.tracer != nil {
		t.Fatal("a tracer without OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	trust(t, cb, a)
	got := make(chan string, 1)
	serve(t, cb, func(_ context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		got <- c.Meta["traceparent"]
		return nil, nil, nil
	}, "plain")
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := ca.Invoke(t.Context(), api.InvokeRequest{Peer: b.ID().String(), Name: "plain", Meta: map[string]string{"traceparent": tp}}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h != tp {
		t.Fatalf("handler got traceparent %q, want the caller's %q", h, tp)
	}
}
