package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol/api"
)

// TestBodyTimeout: a client that sends a request's headers and then stops
// sending its body, or trickles it a byte at a time, is cut off once the
// body timeout passes (the whole body, not each read), instead of holding
// its connection forever; the daemon serves the next client as before.
// The API had only a 10 s header timeout: ~21,000 such connections used up
// the process's file descriptors.
func TestBodyTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	d, c := startNode(t, func(c *Config) { c.BodyTimeout = timeout })
	for _, tc := range []struct {
		name  string
		every time.Duration // a byte this often after the first part; 0: none
	}{
		{"stops", 0},
		{"trickles", timeout / 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("unix", d.cfg.SocketPath())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := `{"name":"` + strings.Repeat("s", 1000) + `"}`
			start := time.Now()
			fmt.Fprintf(conn, "POST /v1/spaces HTTP/1.1\r\nHost: weft\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
			if tc.every > 0 {
				go func() {
					for i := 10; i < len(body); i++ {
						time.Sleep(tc.every)
						if _, err := conn.Write([]byte{body[i]}); err != nil {
							return
						}
					}
				}()
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("after %v: %v, want an answer when the body timeout passes", took, err)
			}
			answer, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(answer), "in time") {
				t.Errorf("answer %d %s, want 400 saying the body did not arrive in time", resp.StatusCode, answer)
			}
			if took < timeout || took > timeout+3*time.Second {
				t.Errorf("cut off after %v, want soon after the body timeout (%v)", took, timeout)
			}
		})
	}
	if _, err := c.Join(context.Background(), "after"); err != nil {
		t.Fatalf("a well-behaved client after them: %v", err)
	}
}

// TestStreamFramesOutlastBodyTimeout: a handler may take longer than the
// body timeout between the frames of a stream call: its frames upload
// lasts as long as the call does.
func TestStreamFramesOutlastBodyTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	a, ca := startNode(t, nil)
	b, cb := startNode(t, func(c *Config) {
		c.BodyTimeout = timeout
		bootstrapTo(a)(c)
	})
	eventually(t, 10*time.Second, "b connected to a", func() bool {
		ps, _ := ca.Peers(context.Background())
		return len(ps) > 0
	})
	serveReq(t, cb, api.HandlerRequest{Names: []string{"slow"}, Allow: []string{"anyone"}}, func(ctx context.Context, _ api.IncomingCall, delta func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		for i := range 2 {
			if err := delta(fmt.Appendf(nil, `{"part":%d}`, i)); err != nil {
				return nil, nil, err
			}
			select {
			case <-time.After(3 * timeout):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		return json.RawMessage(`{"done":true}`), nil, nil
	})
	var kinds []string
	err := ca.InvokeStream(t.Context(), api.InvokeRequest{Peer: b.ID().String(), Name: "slow"}, func(f api.Frame) error {
		kinds = append(kinds, f.Kind)
		return nil
	})
	if err != nil || strings.Join(kinds, " ") != "started delta delta final" {
		t.Fatalf("frames %v, %v; want started delta delta final", kinds, err)
	}
}

// TestConnCap: connections beyond the cap wait to be accepted, and are
// served once one closes, while the ones being served carry on.
func TestConnCap(t *testing.T) {
	d, _ := startNode(t, func(c *Config) { c.MaxConns = 2 })
	ctx := t.Context()
	sp, _, err := d.node.Join("capped", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two event streams take the two connections (each rawHTTP client has
	// its own).
	var streams [2]*bufio.Reader
	var closers [2]io.Closer
	for i := range streams {
		resp, err := rawHTTP(d.cfg.SocketPath()).Get("http://weft/v1/spaces/capped/events")
		if err != nil {
			t.Fatal(err)
		}
		closers[i] = resp.Body
		streams[i] = bufio.NewReader(resp.Body)
		defer resp.Body.Close()
	}
	third := make(chan error, 1)
	go func() {
		resp, err := rawHTTP(d.cfg.SocketPath()).Get("http://weft/v1/node")
		if err == nil {
			resp.Body.Close()
		}
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("a third connection was served while two were open (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	m, err := d.node.Send(ctx, sp.ID, node.Post{Content: json.RawMessage(`{"text":"still flowing"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		waitEvent(t, s, m.ID.String(), fmt.Sprintf("stream %d", i))
	}
	closers[1].Close()
	select {
	case err := <-third:
		if err != nil {
			t.Fatalf("the waiting connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was not served after one closed")
	}
}

// waitEvent reads server-sent events until one carries id.
func waitEvent(t *testing.T, r *bufio.Reader, id, what string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v before the event of %s", what, err, id)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, id) {
			return
		}
	}
}
