package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

func runDM(ctx context.Context, e *env, args []string) error {
	fs := e.flags("dm")
	text := fs.String("text", "", "send {\"text\": TEXT}")
	data, out := addDataFlags(fs, "send this object as the content")
	kind := fs.String("kind", "event", "request, response, event, error or heartbeat")
	replyTo := fs.String("reply-to", "", "ID of the direct message this one answers (inherits its correlation, trace and session)")
	var ttl ttlFlag
	fs.Var(&ttl, "ttl", "expire after this long, e.g. 90s or 24h (a number alone: seconds); the outbox retries until then (default: no expiry, retried for 24h)")
	var meta stringList
	fs.Var(&meta, "meta", "metadata KEY=VALUE (repeatable); keys under \"local.\" are not sent")
	jsonOutFlag := fs.Bool("json-out", false, "the same as --json")
	pos, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	pos, obj, err := takeLegacyInput(e, pos, 1, *data, out)
	if err != nil {
		return err
	}
	asJSON := new(bool)
	*asJSON = out.on || *jsonOutFlag
	req := api.DMRequest{To: pos[0], Kind: *kind, ReplyTo: *replyTo, TTL: ttl.seconds()}
	if req.Content, err = contentFlag(*text, obj); err != nil {
		return err
	}
	if req.Meta, err = metaFlag(meta); err != nil {
		return err
	}
	res, err := e.client().DM(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "%s %s\n", res.Message.ID, res.Status)
	return nil
}

func runInbox(ctx context.Context, e *env, args []string) error {
	fs := e.flags("inbox")
	after := fs.String("after", "", "start after this cursor")
	limit := fs.Int("limit", 0, "at most N messages (default all)")
	follow := fs.Bool("follow", false, "after the stored messages, keep printing new ones as they arrive")
	asJSON := fs.Bool("json", false, "print one JSON message object per line")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *limit < 0 {
		return usageError{"--limit must not be negative"}
	}
	c := e.client()
	if !*asJSON {
		e.names = e.peerNames(ctx)
	}
	return readOrFollow(ctx, e, *after, *limit, *follow, *asJSON,
		func(cursor string, n int) (api.Page, error) { return c.Inbox(ctx, cursor, n) },
		func(cursor string, fn func(api.Message) error) error { return c.FollowInbox(ctx, cursor, fn) })
}

func runOutbox(ctx context.Context, e *env, args []string) error {
	fs := e.flags("outbox")
	dead := fs.Bool("dead", false, "show the dead letters: messages not delivered before their deadline, or refused")
	sent := fs.Bool("sent", false, "show the direct messages delivered (the last 1,000 within 7 days), oldest first")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	cancel := fs.String("cancel", "", "give up the direct message `ID` waiting for delivery (it becomes a dead letter, reason \"cancelled\")")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	c := e.client()
	if *cancel != "" {
		if err := c.CancelOutgoing(ctx, *cancel); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "cancelled", *cancel)
		return nil
	}
	if *dead && *sent {
		return usageError{"--dead and --sent exclude each other"}
	}
	var list []api.Outgoing
	if *dead || *sent {
		pageOf := c.DeadLetters
		if *sent {
			pageOf = c.Sent
		}
		cursor := ""
		for {
			page, err := pageOf(ctx, cursor, 1000)
			if err != nil {
				return err
			}
			list = append(list, page.Messages...)
			if len(page.Messages) < 1000 {
				break
			}
			cursor = page.Next
		}
	} else {
		var err error
		if list, err = c.Outbox(ctx, ""); err != nil {
			return err
		}
	}
	if len(list) == 0 && !*asJSON {
		switch {
		case *dead:
			e.empty("no dead letters")
		case *sent:
			e.empty("no direct messages delivered in the last 7 days")
		default:
			e.empty("the outbox is empty: every direct message sent was delivered (or is a dead letter: weft outbox --dead)")
		}
	}
	for _, o := range list {
		if *asJSON {
			if err := printJSON(e.stdout, o); err != nil {
				return err
			}
			continue
		}
		if *sent {
			fmt.Fprintf(e.stdout, "%s  to %s  %s  delivered %s, %s\n", o.ID, o.To, o.Kind,
				o.DeliveredAt.Local().Format(time.DateTime), plural(o.Attempts, "attempt", "attempts"))
			continue
		}
		status := fmt.Sprintf("attempts %d, deadline %s", o.Attempts, o.Deadline.Local().Format(time.DateTime))
		if *dead {
			status = o.Reason
		} else if o.LastError != "" {
			status += ", last error: " + o.LastError
		}
		fmt.Fprintf(e.stdout, "%s  to %s  %s\n", o.ID, o.To, status)
	}
	return nil
}

func runIACP(ctx context.Context, e *env, args []string) error {
	fs := e.flags("iacp")
	asJSON := fs.Bool("json", false, "send: print the result as JSON")
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	c := e.client()
	switch pos[0] {
	case "send":
		var b []byte
		if pos[1] == "-" {
			b, err = io.ReadAll(io.LimitReader(os.Stdin, 8<<20))
		} else {
			b, err = os.ReadFile(pos[1])
		}
		if err != nil {
			return err
		}
		res, err := c.DMIACP(ctx, b)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.stdout, res)
		}
		fmt.Fprintf(e.stdout, "%s %s\n", res.Message.ID, res.Status)
		return nil
	case "show":
		b, err := c.MessageIACP(ctx, pos[1])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	return usageError{fmt.Sprintf("iacp %q: want send FILE|- or show ID", pos[0])}
}
