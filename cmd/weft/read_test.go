package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/weftmesh/weft/protocol/api"
)

// TestReadShortPages: a page shorter than asked is not the end (the daemon
// bounds pages in bytes too): read goes on until a page is empty, with or
// without --limit.
func TestReadShortPages(t *testing.T) {
	const total = 7
	read := func(cursor string, n int) (api.Page, error) {
		from, _ := strconv.Atoi(cursor)
		var page api.Page
		for i := from; i < total && len(page.Messages) < min(n, 2); i++ { // at most 2 a page
			page.Messages = append(page.Messages, api.Message{ID: "m" + strconv.Itoa(i), Content: []byte(`{}`)})
		}
		page.Next = strconv.Itoa(from + len(page.Messages))
		return page, nil
	}
	for _, tc := range []struct{ limit, want int }{{0, total}, {5, 5}, {100, total}} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out}
		if err := readOrFollow(context.Background(), e, "", tc.limit, false, true, read, nil); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out.String(), "\n"); got != tc.want {
			t.Errorf("--limit %d: printed %d messages, want %d:\n%s", tc.limit, got, tc.want, out.String())
		}
	}
}
