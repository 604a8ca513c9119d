package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/node/web"
	"github.com/weftmesh/weft/protocol/api"
)

// scrapeWeb reads d's /metrics on its loopback listener with its token.
func scrapeWeb(t testing.TB, d *Daemon) string {
	t.Helper()
	body, code := webGet(t, d, "/metrics", webToken(t, d))
	if code != 200 {
		t.Fatalf("GET /metrics: status %d: %s", code, body)
	}
	return body
}

// scrapeSocket reads d's GET /v1/metrics on its API socket.
func scrapeSocket(t testing.TB, d *Daemon) string {
	t.Helper()
	resp, err := rawHTTP(d.cfg.SocketPath()).Get("http://weft/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/metrics: status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func webToken(t testing.TB, d *Daemon) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.cfg.Home, web.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// webGet gets path on d's loopback listener, with token as bearer unless
// it is empty.
func webGet(t testing.TB, d *Daemon, path, token string) (string, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.WebAddr()+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// sample returns the value of the sample of metric name whose labels
// include want (in Prometheus's text format), and whether there is one.
func sample(text, name string, want map[string]string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := make(map[string]string)
		for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
			labels[p[1]] = p[2]
		}
		ok := true
		for k, v := range want {
			if labels[k] != v {
				ok = false
			}
		}
		if ok {
			v, err := strconv.ParseFloat(m[4], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestMetrics scrapes two running daemons, on the loopback listener and on
// the socket, and checks that weft's counters move with what their agents
// do (a send, a DM, a call), that libp2p's own metrics are there, and that
// /metrics and pprof need the token.
func TestMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	web := func(c *Config) { c.WebListen = "127.0.0.1:0" }
	// a exports the resource manager's metrics; b keeps the default (off).
	a, ca := startNode(t, func(c *Config) { web(c); c.ResourceMetrics = true })
	b, cb := startNode(t, func(c *Config) { web(c); bootstrapTo(a)(c) })
	eventually(t, 10*time.Second, "b connected to a", func() bool {
		ps, _ := ca.Peers(ctx)
		return len(ps) > 0
	})
	trust(t, cb, a)
	serve(t, cb, func(_ context.Context, c api.IncomingCall, _ func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		return c.Input, nil, nil
	}, "echo")
	serve(t, cb, func(context.Context, api.IncomingCall, func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		return nil, nil, &client.Error{Code: "nope", Message: "made-up code"}
	}, "fail")
	serve(t, cb, func(_ context.Context, _ api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		for range 3 {
			if err := send(json.RawMessage(`"delta"`)); err != nil {
				return nil, nil, err
			}
		}
		return json.RawMessage(`"done"`), nil, nil
	}, "count")

	before := scrapeWeb(t, a)
	if _, ok := sample(before, "weft_messages_sent_total", map[string]string{"space": "obs"}); ok {
		t.Fatal("a counts sends to a space it has not joined")
	}
	for _, c := range []*client.Client{ca, cb} {
		if _, err := c.Join(ctx, "obs"); err != nil {
			t.Fatal(err)
		}
	}
	const sends = 3
	for i := range sends {
		if _, err := ca.SendText(ctx, "obs", fmt.Sprint("hello ", i)); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := ca.DM(ctx, api.DMRequest{To: b.ID().String(), Content: json.RawMessage(`{"q":1}`)}); err != nil || res.Status != "delivered" {
		t.Fatalf("DM: %+v, %v", res, err)
	}
	if _, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "echo", Input: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "fail"}); err == nil {
		t.Fatal("call to fail succeeded")
	}
	frames := 0
	if err := ca.InvokeStream(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "count", Stream: true}, func(api.Frame) error {
		frames++
		return nil
	}); err != nil || frames < 4 {
		t.Fatalf("stream call: %d frames, %v", frames, err)
	}
	if _, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "nobody-serves-this"}); !client.IsCode(err, "no_handler") {
		t.Fatalf("call to nobody: %v", err)
	}

	// a, on its loopback listener.
	want := func(text, who, name string, labels map[string]string, atLeast float64) {
		t.Helper()
		v, ok := sample(text, name, labels)
		if !ok || v < atLeast {
			t.Errorf("%s: %s%v = %v (present %v), want at least %v", who, name, labels, v, ok, atLeast)
		}
	}
	am := scrapeWeb(t, a)
	want(am, "a", "weft_messages_sent_total", map[string]string{"space": "obs"}, sends)
	want(am, "a", "weft_dm_sent_total", map[string]string{"status": "delivered"}, 1)
	want(am, "a", "weft_dm_delivered_total", nil, 1)
	want(am, "a", "weft_dm_attempts_total", map[string]string{"result": "ok"}, 1)
	want(am, "a", "weft_calls_total", map[string]string{"side": "client", "name": "echo", "status": "ok"}, 1)
	want(am, "a", "weft_calls_total", map[string]string{"side": "client", "name": "fail", "status": "other"}, 1)
	want(am, "a", "weft_calls_total", map[string]string{"side": "client", "name": "nobody-serves-this", "status": "no_handler"}, 1)
	want(am, "a", "weft_call_duration_seconds_count", map[string]string{"side": "client", "name": "echo"}, 1)
	want(am, "a", "weft_calls_total", map[string]string{"side": "client", "name": "count", "status": "ok"}, 1)
	want(am, "a", "weft_api_requests_total", map[string]string{"route": "POST /v1/spaces/{space}/messages", "code": "201"}, sends)
	want(am, "a", "weft_api_request_duration_seconds_count", map[string]string{"route": "POST /v1/invoke"}, 4)
	want(am, "a", "weft_store_size_bytes", map[string]string{"part": "vlog"}, 0) // Badger measures once a minute
	want(am, "a", "weft_peers_connected", nil, 1)
	want(am, "a", "weft_dm_outbox_messages", nil, 0)
	want(am, "a", "weft_sync_sessions_total", nil, 0)
	// libp2p's own: the resource manager, the swarm, identify.
	for _, prefix := range []string{"libp2p_rcmgr_", "libp2p_swarm_", "libp2p_identify_"} {
		if !strings.Contains(am, "\n"+prefix) {
			t.Errorf("a's metrics have no %s… metric", prefix)
		}
	}
	// a exports the resource manager's (mesh.TestResourceMetrics checks
	// the default, off: libp2p's collectors are shared by the process).
	want(am, "a", "libp2p_rcmgr_limit", map[string]string{"scope": "system", "resource": "streams"}, 1)

	// Every metric the Grafana dashboard queries is registered (a vector
	// shows in a scrape only once it has a label set).
	registered := make(map[string]bool)
	descs := make(chan *prometheus.Desc)
	go func() { a.Node().Config().Metrics.Registry().Describe(descs); close(descs) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			registered[m[1]] = true
		}
	}
	dash, err := os.ReadFile("../../examples/grafana/weft.json")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\b(weft|libp2p|process|go)_[a-z_]+`).FindAllString(string(dash), -1)
	if len(names) < 20 {
		t.Fatalf("only %d metric names in the dashboard", len(names))
	}
	for _, name := range names {
		base := name
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			base = strings.TrimSuffix(base, suf)
		}
		if !registered[base] {
			t.Errorf("the dashboard queries %s, which a's registry lacks", name)
		}
	}

	// b, on its socket.
	var bm string
	eventually(t, 10*time.Second, "b counts a's messages", func() bool {
		bm = scrapeSocket(t, b)
		v, _ := sample(bm, "weft_messages_received_total", map[string]string{"space": "obs"})
		return v >= sends
	})
	want(bm, "b", "weft_dm_received_total", map[string]string{"result": "accepted"}, 1)
	// a's messages came to b by gossip or by sync (if they were sent before
	// b's gossip mesh formed).
	gossiped, _ := sample(bm, "weft_gossip_messages_total", map[string]string{"result": "delivered"})
	synced, _ := sample(bm, "weft_sync_messages_total", map[string]string{"direction": "received"})
	if gossiped+synced < sends {
		t.Errorf("b: %v gossip deliveries and %v sync receptions, want at least %d in all", gossiped, synced, sends)
	}
	want(bm, "b", "weft_gossip_messages_total", map[string]string{"result": "duplicate"}, 0)
	want(bm, "b", "weft_gap_repairs_total", nil, 0)
	want(bm, "b", "weft_calls_total", map[string]string{"side": "server", "name": "echo", "status": "ok"}, 1)
	want(bm, "b", "weft_calls_total", map[string]string{"side": "server", "name": "fail", "status": "other"}, 1)
	want(bm, "b", "weft_calls_total", map[string]string{"side": "server", "name": "count", "status": "ok"}, 1)
	// A name nobody serves here is not a label: strangers pick names.
	want(bm, "b", "weft_calls_total", map[string]string{"side": "server", "name": "other", "status": "no_handler"}, 1)
	if strings.Contains(bm, "nobody-serves-this") {
		t.Error("b labels a call name no handler serves")
	}
	bm = scrapeSocket(t, b) // counts the scrapes before it
	want(bm, "b", "weft_api_requests_total", map[string]string{"route": "GET /v1/metrics", "code": "200"}, 1)
	want(bm, "b", "weft_handler_connections", nil, 2)

	// The token guards /metrics and pprof on the loopback listener.
	if _, code := webGet(t, a, "/metrics", ""); code != 401 {
		t.Errorf("GET /metrics without the token: %d, want 401", code)
	}
	if _, code := webGet(t, a, "/debug/pprof/", ""); code != 401 {
		t.Errorf("GET /debug/pprof/ without the token: %d, want 401", code)
	}
	body, code := webGet(t, a, "/debug/pprof/goroutine?debug=1", webToken(t, a))
	if code != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine: %d %.80q", code, body)
	}
	body, code = webGet(t, a, "/debug/pprof/", webToken(t, a))
	if code != 200 || !strings.Contains(body, "heap") {
		t.Errorf("GET /debug/pprof/: %d %.80q", code, body)
	}
}

// TestMetricsSpaceLabelsBounded: a node gives at most MaxSpaces spaces a
// label of their own; sends to the others count as "other".
func TestMetricsSpaceLabelsBounded(t *testing.T) {
	ctx := t.Context()
	d, c := startNode(t, nil)
	const n = 66 // metrics.MaxSpaces + 2
	for i := range n {
		name := fmt.Sprint("s", i)
		if _, err := c.Join(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SendText(ctx, name, "x"); err != nil {
			t.Fatal(err)
		}
	}
	text := scrapeSocket(t, d)
	var spaces []string
	for line := range strings.SplitSeq(text, "\n") {
		if m := sampleLine.FindStringSubmatch(line); m != nil && m[1] == "weft_messages_sent_total" {
			for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
				if p[1] == "space" {
					spaces = append(spaces, p[2])
				}
			}
		}
	}
	if len(spaces) != 65 || !slices.Contains(spaces, "other") {
		t.Fatalf("%d space labels (%v), want 64 and other", len(spaces), spaces)
	}
	if v, _ := sample(text, "weft_messages_sent_total", map[string]string{"space": "other"}); v != 2 {
		t.Fatalf("other = %v, want 2", v)
	}
}
