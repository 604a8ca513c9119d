package localapi

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSharesKeepForOthers: a read is kept only while another stream
// follows the space, and found only from its cursor under its change
// signal.
func TestSharesKeepForOthers(t *testing.T) {
	var s shares
	c1, c2 := make(chan struct{}), make(chan struct{})
	r := &sharedRead{from: 5, changed: c1, events: []byte("id: x\n\n")}
	leave1 := s.join(labID)
	if s.keep(labID, r) {
		t.Fatal("a lone stream's read was kept")
	}
	leave2 := s.join(labID)
	if !s.keep(labID, r) {
		t.Fatal("the read of one of two streams was not kept")
	}
	if got := s.get(labID, 5, c1); got != r {
		t.Fatalf("get from its cursor under its signal = %v, want the kept read", got)
	}
	if s.get(labID, 4, c1) != nil || s.get(labID, 5, c2) != nil {
		t.Fatal("a read was found from another cursor or under a later change signal")
	}
	leave2()
	if s.get(labID, 5, c1) != nil {
		t.Fatal("a read was still kept for a lone stream")
	}
	leave1()
	if len(s.bySpace) != 0 {
		t.Fatalf("%d spaces left after their streams ended", len(s.bySpace))
	}
}

// TestEventStreamsShareReads: three streams following a space each get
// every message once, in order, while they share reads: fewer backend
// reads than one per stream per message.
func TestEventStreamsShareReads(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, "/mcp", nil))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const streams, messages = 3, 40
	ids := make([]chan string, streams)
	for i := range ids {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/spaces/lab/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		ch := make(chan string, messages)
		ids[i] = ch
		go func() {
			sc := bufio.NewScanner(resp.Body)
			var id string
			for sc.Scan() {
				switch line := sc.Text(); {
				case strings.HasPrefix(line, "id: "):
					id = line[4:]
				case strings.HasPrefix(line, "data: "):
					ch <- id + " " + line[6:]
				}
			}
			close(ch)
		}()
	}
	for n := range messages {
		m := f.add("m")
		for i, ch := range ids {
			select {
			case got, ok := <-ch:
				if !ok {
					t.Fatalf("stream %d ended at message %d", i, n)
				}
				id, data, _ := strings.Cut(got, " ")
				if want, _ := appendStored(nil, m); id != m.Cursor.String() || data != string(want) {
					t.Fatalf("stream %d: message %d is %s %s, want %s", i, n, id, data, m.Cursor)
				}
			case <-ctx.Done():
				t.Fatalf("stream %d: no message %d", i, n)
			}
		}
	}
	reads := f.tailReads.Load()
	t.Logf("%d reads of the backend for %d streams of %d messages", reads, streams, messages)
	if reads >= streams*messages {
		t.Errorf("%d reads of the backend for %d streams of %d messages: none shared", reads, streams, messages)
	}
}
