package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
)

// span is what the test's OTLP receiver keeps of a span.
type span struct{ instance, trace, id, parent, name string }

// otlpSpans is an OTLP/HTTP receiver of traces: it decodes the protobuf
// exporters send.
type otlpSpans struct {
	mu    sync.Mutex
	spans []span
}

func (o *otlpSpans) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, fmt.Sprint("bad export: ", r.URL.Path, err), 400)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		inst := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.instance.id" {
				inst = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, span{inst, hex.EncodeToString(s.TraceId), hex.EncodeToString(s.SpanId), hex.EncodeToString(s.ParentSpanId), s.Name})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// String lists the spans received so far.
func (o *otlpSpans) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.spans)
}

func (o *otlpSpans) find(instance, trace, name string) (span, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if s.instance == instance && s.trace == trace && s.name == name {
			return s, true
		}
	}
	return span{}, false
}

// socketGet gets path from the API socket in home.
func socketGet(t *testing.T, home, path string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(home, client.SocketName))
	}}}
	resp, err := hc.Get("http://weft" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// TestObservabilityE2E: two `weft daemon` processes with
// OTEL_EXPORTER_OTLP_ENDPOINT set export to an OTLP receiver in the test:
// `weft invoke` with the agent's traceparent gives a client span on a, a
// server span on b and a handler (`weft handle --exec`) whose
// WEFT_TRACEPARENT is that server span, all in the agent's trace; b's
// metrics on its socket count the call.
func TestObservabilityE2E(t *testing.T) {
	rcv := &otlpSpans{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	b.OK("trust", "add", aID)
	startHandler(t, b, "env", "--exec", envScript(t, t.TempDir(), "no-secret"))

	const trace, agentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	out := a.OK("invoke", bID, "env", "--meta", "traceparent=00-"+trace+"-"+agentSpan+"-01")
	var env handlerEnv
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("handler output %q: %v", out, err)
	}
	var cs, ss span
	testbed.Poll(t, 20*time.Second, "both daemons' spans of the call", func() (bool, string) {
		var ok1, ok2 bool
		cs, ok1 = rcv.find(aID, trace, "invoke_agent env")
		ss, ok2 = rcv.find(bID, trace, "invoke_agent env")
		return ok1 && ok2, rcv.String()
	})
	if cs.parent != agentSpan || ss.parent != cs.id {
		t.Errorf("a's client span %+v (want parent %s), b's server span %+v (want parent a's)", cs, agentSpan, ss)
	}
	if want := "00-" + trace + "-" + ss.id + "-01"; env.Traceparent != want {
		t.Errorf("the handler got WEFT_TRACEPARENT %q, want b's server span %q", env.Traceparent, want)
	}
	m := socketGet(t, b.Home, "/v1/metrics")
	if !strings.Contains(m, `weft_calls_total{name="env",side="server",status="ok"} 1`) {
		t.Errorf("b's metrics do not count the call:\n%s", grepLines(m, "weft_calls_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
