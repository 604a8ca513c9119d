package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
)

// postReplies opens POST /v1/calls/replies with a body the test writes
// to; the answer's headers come before any of it.
func postReplies(t *testing.T, srv *httptest.Server) (*io.PipeWriter, *http.Response) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/calls/replies", pr)
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		answered <- answer{resp, err}
	}()
	var resp *http.Response
	select { // nothing written yet: the headers come anyway
	case a := <-answered:
		if a.err != nil {
			t.Fatal(a.err)
		}
		resp = a.resp
	case <-time.After(10 * time.Second):
		pw.CloseWithError(errors.New("no answer"))
		t.Fatal("no answer before the body")
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return pw, resp
}

func repliesEnd(t *testing.T, resp *http.Response) repliesResult {
	t.Helper()
	var res repliesResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRepliesStream: a handler's answers on one stream finish their calls
// as they come; an answer of the wrong kind fails its call, one to a call
// that is over is refused, and the stream goes on after both.
func TestRepliesStream(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, "/mcp", nil))
	t.Cleanup(srv.Close) // after the body is closed (cleanups run last first)
	pw, resp := postReplies(t, srv)
	write := func(line string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := fmt.Fprintln(pw, line); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("write: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the daemon does not read the stream") // Cleanup's pw.Close ends the write
		}
	}

	write(`{"id":"c1","output":{"a":1},"meta":{"m":"1"}}`)
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.replies) == 1 }) // before the body ends
	write(`{"id":"c2","kind":"delta","output":1}`)
	write(`{"id":"c3","error":{"code":"nope","message":"no"}}`)
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.replies) == 3 })
	f.mu.Lock()
	f.err = node.ErrCallOver
	f.mu.Unlock()
	write(`{"id":"c4","output":2}`)
	pw.Close()

	if res := repliesEnd(t, resp); res != (repliesResult{Taken: 2, Refused: 2}) {
		t.Fatalf("result %+v, want 2 taken and 2 refused", res)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.replies[0]; string(r.Output) != `{"a":1}` || r.Meta["m"] != "1" || r.Error != nil {
		t.Errorf("first answer %+v", r)
	}
	if r := f.replies[1]; r.Error == nil || r.Error.Code != protocol.CodeHandlerFailed {
		t.Errorf("a delta as an answer: %+v, want the call failed", r)
	}
	if r := f.replies[2]; r.Error == nil || r.Error.Code != "nope" {
		t.Errorf("error answer %+v", r)
	}
}

// TestRepliesStreamBadLine: a line that is no answer with an id ends the
// stream, with why, and nothing after it is taken.
func TestRepliesStreamBadLine(t *testing.T) {
	for _, bad := range []string{`{"output":1}`, `{"id":"c1","output":`, `[1]`} {
		t.Run(bad, func(t *testing.T) {
			f := newFake()
			srv := httptest.NewServer(New(f, "/mcp", nil))
			t.Cleanup(srv.Close) // after the body is closed (cleanups run last first)
			pw, resp := postReplies(t, srv)
			go func() {
				fmt.Fprintln(pw, bad)
				fmt.Fprintln(pw, `{"id":"c1","output":1}`)
				pw.Close()
			}()
			if res := repliesEnd(t, resp); res.Taken != 0 || res.Error == "" {
				t.Fatalf("result %+v, want an error and nothing taken", res)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.replies) != 0 {
				t.Fatalf("answers taken after a bad line: %+v", f.replies)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
