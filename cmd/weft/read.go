package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

func runRead(ctx context.Context, e *env, args []string) error {
	fs := e.flags("read")
	after := fs.String("after", "", "start after this cursor (each message's \"cursor\")")
	limit := fs.Int("limit", 0, "at most N messages (default all)")
	follow := fs.Bool("follow", false, "after the stored messages, keep printing new ones as they arrive")
	asJSON := fs.Bool("json", false, "print one JSON message object per line")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usageError{"--limit must not be negative"}
	}
	c := e.client()
	space := pos[0]
	if !*asJSON {
		e.names = e.peerNames(ctx)
	}
	return readOrFollow(ctx, e, *after, *limit, *follow, *asJSON,
		func(cursor string, n int) (api.Page, error) { return c.Read(ctx, space, cursor, n) },
		func(cursor string, fn func(api.Message) error) error { return c.Follow(ctx, space, cursor, fn) })
}

// readOrFollow prints pages from read, or replays and follows with follow.
func readOrFollow(ctx context.Context, e *env, after string, limit int, follow, asJSON bool,
	read func(cursor string, n int) (api.Page, error),
	followFn func(cursor string, fn func(api.Message) error) error) error {
	print := func(m api.Message) error {
		if asJSON {
			return printJSON(e.stdout, m)
		}
		return printMessageAs(e.stdout, m, e.names, time.Now())
	}
	if follow {
		// From the cursor of the last message printed, across daemon
		// restarts: nothing missed, nothing repeated.
		n, cursor := 0, after
		err := resuming(ctx, e, func() error {
			return followFn(cursor, func(m api.Message) error {
				if err := print(m); err != nil {
					return err
				}
				cursor = m.Cursor
				n++
				if limit > 0 && n >= limit {
					return errDone
				}
				return nil
			})
		})
		if err == errDone || (errors.Is(err, context.Canceled) && ctx.Err() != nil) {
			return nil
		}
		return err
	}
	cursor, n := after, 0
	for {
		want := 1000
		if limit > 0 {
			want = min(want, limit-n)
		}
		page, err := read(cursor, want)
		if err != nil {
			return err
		}
		for _, m := range page.Messages {
			if err := print(m); err != nil {
				return err
			}
		}
		n += len(page.Messages)
		cursor = page.Next
		// A page may hold fewer than asked (pages are bounded in bytes too):
		// only an empty one is the end.
		if len(page.Messages) == 0 || (limit > 0 && n >= limit) {
			if n == 0 && !asJSON {
				e.empty("no messages")
			}
			return nil
		}
	}
}

var errDone = fmt.Errorf("done")

// printMessageAs writes a message for a person: time (with the date, for
// a message of another day than now), sender (as "name …abcd1234" when
// names has one for it), type, content, then its ID and what it replies to
// (so a reader can answer it with --ref).
func printMessageAs(w io.Writer, m api.Message, names map[string]string, now time.Time) error {
	var body struct {
		Text *string `json:"text"`
	}
	content := string(m.Content)
	if json.Unmarshal(m.Content, &body) == nil && body.Text != nil {
		content = *body.Text
	}
	from := m.From
	if len(from) > 12 {
		from = "…" + from[len(from)-8:]
	}
	if name := names[m.From]; name != "" {
		from = name + " " + from
	}
	at := m.CreatedAt.Local()
	when := at.Format(time.TimeOnly)
	if y, mo, d := at.Date(); y != now.Year() || mo != now.Month() || d != now.Day() {
		when = at.Format("2006-01-02 15:04:05")
	}
	ids := "id " + m.ID
	if m.Refs != nil && len(m.Refs.Messages) > 0 {
		ids += ", re " + strings.Join(m.Refs.Messages, " ")
	}
	_, err := fmt.Fprintf(w, "%s  %s  [%s]  %s  (%s)\n", when, from, m.Type, content, ids)
	return err
}

func runShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	m, err := e.client().Message(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, m)
	}
	fmt.Fprintf(e.stdout, "id:       %s\nspace:    %s\nfrom:     %s\ncreated:  %s\ntype:     %s\n",
		m.ID, m.Space, m.From, m.CreatedAt.Format(time.RFC3339Nano), m.Type)
	for _, p := range m.Prev {
		fmt.Fprintf(e.stdout, "prev:     %s\n", p)
	}
	if m.Refs != nil {
		for _, r := range m.Refs.Messages {
			fmt.Fprintf(e.stdout, "reply-to: %s\n", r)
		}
		for _, r := range m.Refs.Nodes {
			fmt.Fprintf(e.stdout, "to:       %s\n", r)
		}
	}
	for k, v := range m.Meta {
		fmt.Fprintf(e.stdout, "meta:     %s=%s\n", k, v)
	}
	fmt.Fprintf(e.stdout, "content:  %s\n", m.Content)
	return nil
}

func runThread(ctx context.Context, e *env, args []string) error {
	fs := e.flags("thread")
	down := fs.Bool("down", false, "descendants (the replies, and theirs) instead of ancestors")
	depth := fs.Int("depth", -1, "at most N steps from the message (default: the daemon's, 100)")
	asJSON := fs.Bool("json", false, "print one JSON object per line, each with its depth")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if !*asJSON {
		e.names = e.peerNames(ctx)
	}
	th, err := e.client().Thread(ctx, pos[0], !*down, *depth)
	if err != nil {
		return err
	}
	for _, m := range th.Messages {
		if *asJSON {
			if err := printJSON(e.stdout, m); err != nil {
				return err
			}
			continue
		}
		fmt.Fprint(e.stdout, strings.Repeat("  ", m.Depth))
		if err := printMessageAs(e.stdout, m.Message, e.names, time.Now()); err != nil {
			return err
		}
	}
	if th.Truncated {
		fmt.Fprintln(e.stderr, "(thread cut at the depth or size limit)")
	}
	return nil
}
