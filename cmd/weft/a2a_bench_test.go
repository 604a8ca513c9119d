package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// BenchmarkA2ARoundTrip measures, in one run, the round trip of a call
// three ways, each through separate processes on loopback: a plain weft
// invoke through two daemons (the Go client on A's socket, a handler on
// B); an A2A SendMessage through the same two daemons (the a2a-go client
// to A's loopback listener, JSON-RPC); and the a2a-go client to an A2A
// server directly (`a2a serve --echo --transport jsonrpc`). It also
// measures stream frames/s through the A2A path (SendStreamingMessage of
// calls with 100, 1,000 and 10,000 deltas). The round trips report p50 and p99 (µs).
//
//	go test -run XXX -bench 'A2ARoundTrip/(weft|a2a-via|a2a-go)' -benchtime 2000x ./cmd/weft
//	go test -run XXX -bench 'A2ARoundTrip/a2a-stream' -benchtime 5x ./cmd/weft
func BenchmarkA2ARoundTrip(b *testing.B) {
	a2aBin := a2aCLIForBench(b)
	da := testbed.Start(b)
	db := testbed.Start(b, "--bootstrap", da.Addrs[0])
	da.WaitConnected(db.ID)

	// Handlers on B: echo (unary), stream (N deltas).
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ready := make(chan struct{})
	go db.Client.Serve(ctx, api.HandlerRequest{Names: []string{"echo", "deltas"}, Allow: []string{"anyone"}, Concurrency: 64},
		func(ctx context.Context, c api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
			if c.Name == "echo" {
				return c.Input, nil, nil
			}
			var n int
			json.Unmarshal(c.Input, &n)
			for i := range n {
				if err := send(json.RawMessage(fmt.Sprintf(`"tok%d"`, i))); err != nil {
					return nil, nil, err
				}
			}
			return json.RawMessage(`"done"`), nil, nil
		}, func() { close(ready) })
	<-ready

	// The A2A agent of B's echo on A, and a client of it.
	tok, err := os.ReadFile(da.Home + "/web.token")
	if err != nil {
		b.Fatal(err)
	}
	var info struct{ URL string }
	raw, _ := os.ReadFile(da.Home + "/a2a.json")
	json.Unmarshal(raw, &info)
	auth := "Bearer " + strings.TrimSpace(string(tok))
	viaDaemons := a2aClient(b, strings.TrimRight(info.URL, "/")+"/peer/"+db.ID+"/skill/echo", auth)
	streamer := a2aClient(b, strings.TrimRight(info.URL, "/")+"/peer/"+db.ID+"/skill/deltas", auth)

	// a2a serve --echo: the SDK's own server, as a separate process.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	testbed.Run(b, nil, nil, a2aBin, "serve", "--echo", "--quiet", "--transport", "jsonrpc", "--host", "127.0.0.1", "--port", port)
	testbed.Poll(b, 20*time.Second, "a2a serve", func() (bool, string) {
		resp, err := http.Get("http://127.0.0.1:" + port + "/.well-known/agent-card.json")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	direct := a2aClient(b, "http://127.0.0.1:"+port, "")
	params := a2aclient.ServiceParams{}
	params.Append("Authorization", auth)
	actx := a2aclient.AttachServiceParams(context.Background(), params)

	send := func(c *a2aclient.Client) func() error {
		return func() error {
			res, err := c.SendMessage(actx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))})
			if err != nil {
				return err
			}
			if task, ok := res.(*a2a.Task); ok && task.Status.State != a2a.TaskStateCompleted {
				return fmt.Errorf("task %s", task.Status.State)
			}
			return nil
		}
	}
	for _, bc := range []struct {
		name string
		call func() error
	}{
		{"weft-invoke", func() error {
			_, err := da.Client.Invoke(context.Background(), api.InvokeRequest{Peer: db.ID, Name: "echo", Input: json.RawMessage(`"ping"`)})
			return err
		}},
		{"a2a-via-2-daemons", send(viaDaemons)},
		{"a2a-go-direct", send(direct)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range 50 { // warm up
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
	// A2A streams: a2a-go's task manager copies the whole task (gob) at
	// every event, so a stream's cost grows with the square of its length:
	// measured at two lengths.
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("a2a-stream-%d-deltas", n), func(b *testing.B) {
			frames := 0
			start := time.Now()
			for range b.N {
				for ev, err := range streamer.SendStreamingMessage(actx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(n))}) {
					if err != nil {
						b.Fatal(err)
					}
					if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && a.Artifact.ID == "weft-deltas" {
						frames += len(a.Artifact.Parts)
					}
				}
			}
			if frames < b.N*n {
				b.Fatalf("%d deltas for %d streams of %d", frames, b.N, n)
			}
			b.ReportMetric(float64(frames)/time.Since(start).Seconds(), "frames/s")
		})
	}
}

// a2aClient resolves the card at url (with auth) and makes an a2a-go client.
func a2aClient(b *testing.B, url, auth string) *a2aclient.Client {
	b.Helper()
	var opts []agentcard.ResolveOption
	if auth != "" {
		opts = append(opts, agentcard.WithRequestHeader("Authorization", auth))
	}
	card, err := agentcard.DefaultResolver.Resolve(context.Background(), url, opts...)
	if err != nil {
		b.Fatalf("card of %s: %v", url, err)
	}
	c, err := a2aclient.NewFromCard(context.Background(), card)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func a2aCLIForBench(b *testing.B) string {
	b.Helper()
	return testbed.Build(b, a2aCLIPackage)
}
