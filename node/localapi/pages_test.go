package localapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// batchCounter is the fake that records the most message bytes one Read
// of the backend returned: what a page holds at once before it is cut.
type batchCounter struct {
	*fake
	mu       sync.Mutex // the stream may still read while the test checks
	maxBatch int
	reads    int // reads of the backend
}

// most returns the most bytes one Read returned so far.
func (b *batchCounter) most() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxBatch
}

func (b *batchCounter) ReadWithin(space protocol.ID, after store.Cursor, limit, maxBytes int) ([]node.Message, store.Cursor, bool, error) {
	msgs, next, cut, err := b.fake.ReadWithin(space, after, limit, maxBytes)
	size := 0
	for _, m := range msgs {
		size += m.AnswerBytes()
	}
	b.mu.Lock()
	b.maxBatch = max(b.maxBatch, size)
	b.reads++
	b.mu.Unlock()
	return msgs, next, cut, err
}

// heavyFake holds 70 messages of mixed sizes: 12 of 600 KB, 50 of 1 KB,
// 8 of 1 MB, so that a page's batches must follow the sizes; index gives
// each message's position. The messages are made once (signing is slow).
func heavyFake() (*batchCounter, map[string]int) {
	f, index := heavyMessages()
	return &batchCounter{fake: f}, index
}

var heavyMessages = sync.OnceValues(func() (*fake, map[string]int) {
	f := newFake()
	index := map[string]int{}
	for i := range heavyCount {
		size := 600_000
		switch {
		case i >= 62:
			size = 1_000_000
		case i >= 12:
			size = 1000
		}
		m := f.add(fmt.Sprintf("%d %s", i, strings.Repeat("x", size)))
		index[m.ID.String()] = i
	}
	return f, index
})

const heavyCount = 70

// TestPagesBoundedInBytes: a page stops before the message that would
// take it past node.MaxAnswerBytes (always carrying one), its next
// continues after the last message carried, and following next returns
// every message once, in order. The backend is never asked for much more
// than the budget at once.
func TestPagesBoundedInBytes(t *testing.T) {
	f, index := heavyFake()
	srv := New(f, "/mcp", nil)
	after, want, pages := "", 0, 0
	for {
		req := httptest.NewRequest("GET", "/v1/spaces/lab/messages?limit=1000&after="+after, nil)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var page api.Page
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil {
			t.Fatalf("page %d: %d %.200s", pages, rec.Code, rec.Body.Bytes())
		}
		if len(page.Messages) == 0 {
			break
		}
		pages++
		for _, m := range page.Messages {
			if index[m.ID] != want {
				t.Fatalf("page %d: message %d, want %d", pages, index[m.ID], want)
			}
			want++
		}
		if len(page.Messages) > 1 && rec.Body.Len() > node.MaxAnswerBytes+64<<10 {
			t.Errorf("page %d: %d messages in %d bytes, over the budget of %d", pages, len(page.Messages), rec.Body.Len(), node.MaxAnswerBytes)
		}
		if last := page.Messages[len(page.Messages)-1]; page.Next != last.Cursor {
			t.Fatalf("page %d: next %s, want the last message's cursor %s", pages, page.Next, last.Cursor)
		}
		after = page.Next
	}
	if want != heavyCount {
		t.Fatalf("read %d messages, want %d", want, heavyCount)
	}
	if pages < 4 {
		t.Errorf("%d pages of 15 MB: not cut at the budget", pages)
	}
	if most := f.most(); most > node.MaxAnswerBytes+2<<20 {
		t.Errorf("the backend returned %d bytes at once, want about the budget (%d)", most, node.MaxAnswerBytes)
	}
}

// TestReplayBoundedInBytes: an event stream's replay of heavy messages
// delivers each once, in order, reading the backend a budget at a time.
func TestReplayBoundedInBytes(t *testing.T) {
	f, index := heavyFake()
	srv := httptest.NewServer(New(f, "/mcp", nil))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/spaces/lab/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 2<<20)
	for want := 0; want < heavyCount; {
		if !sc.Scan() {
			t.Fatalf("stream ended after %d messages: %v", want, sc.Err())
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m api.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatal(err)
		}
		if index[m.ID] != want {
			t.Fatalf("event %d is message %d", want, index[m.ID])
		}
		want++
	}
	if most := f.most(); most > node.MaxAnswerBytes+2<<20 {
		t.Errorf("the backend returned %d bytes at once, want about the budget (%d)", most, node.MaxAnswerBytes)
	}
}

// TestPageReadsBackendOnce: a page of small messages, full or the last
// few, is one read of the backend (each read is a store transaction and
// an index seek), and says where to continue.
func TestPageReadsBackendOnce(t *testing.T) {
	f := &batchCounter{fake: newFake()}
	for i := range 25 {
		f.add(fmt.Sprint("m", i))
	}
	srv := New(f, "/mcp", nil)
	for _, tc := range []struct {
		after string
		want  int
	}{{"", 10}, {f.msgs[9].Cursor.String(), 10}, {f.msgs[19].Cursor.String(), 5}} {
		f.reads = 0
		req := httptest.NewRequest("GET", "/v1/spaces/lab/messages?limit=10&after="+tc.after, nil)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var page api.Page
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil {
			t.Fatalf("after %q: %d %.200s", tc.after, rec.Code, rec.Body.Bytes())
		}
		if len(page.Messages) != tc.want || page.Next != page.Messages[len(page.Messages)-1].Cursor {
			t.Fatalf("after %q: %d messages, next %q; want %d, next the last one's", tc.after, len(page.Messages), page.Next, tc.want)
		}
		if f.reads != 1 {
			t.Errorf("after %q: %d reads of the backend, want 1", tc.after, f.reads)
		}
	}
}
