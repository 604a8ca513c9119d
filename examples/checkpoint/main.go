// Command checkpoint shows weft's checkpoint convention: an agent that
// must get a human's approval before it acts.
//
// It joins a space, posts a checkpoint.request (naming its approvers, if
// given, in refs.nodes), prints the request's ID and the exact `weft send`
// commands a human runs, from any daemon in the space, to approve or reject
// it, and follows the space. The first valid checkpoint.response decides: it
// must reference the request, come from an approver (when approvers are
// named) and say "approve" or "reject"; anything else is ignored. On
// approve the agent does its action, a harmless local one: it writes a
// record of the approval to --out. On reject it prints the comment and
// exits 3; when --timeout passes first it exits 4, without acting.
//
//	checkpoint --space NAME [--title T] [--details D] [--approver PEER]... [--timeout 10m] [--out approved.json]
//
// It talks to the local weft daemon of --home (default $WEFT_HOME, else
// ~/.weft).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// The checkpoint convention's message types.
const (
	typeRequest  = "checkpoint.request"
	typeResponse = "checkpoint.response"
)

// Request is the content of a checkpoint.request.
type Request struct {
	Title   string          `json:"title"`
	Details string          `json:"details,omitempty"`
	Options []string        `json:"options"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Response is the content of a checkpoint.response.
type Response struct {
	Decision string `json:"decision"` // "approve" or "reject"
	Comment  string `json:"comment,omitempty"`
}

// Exit codes.
const (
	exitApproved = 0
	exitFailed   = 1
	exitUsage    = 2
	exitRejected = 3
	exitTimedOut = 4
)

// approvers collects repeated --approver flags.
type approvers []string

func (a *approvers) String() string     { return strings.Join(*a, ",") }
func (a *approvers) Set(s string) error { *a = append(*a, s); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run asks for approval and acts on the answer; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "weft home of the local daemon (default $WEFT_HOME, else ~/.weft)")
	space := fs.String("space", "", "the space to ask in")
	out := fs.String("out", "approved.json", "the action: write a record of the approval to this file")
	title := fs.String("title", "", `what the human approves (default "write FILE")`)
	details := fs.String("details", "", "more about it")
	timeout := fs.Duration("timeout", 0, "give up without acting after this long (0: wait for ever)")
	var only approvers
	fs.Var(&only, "approver", "peer ID whose answer counts (repeatable; default: anyone in the space)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *space == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "checkpoint: want --space NAME")
		return exitUsage
	}
	if *title == "" {
		*title = "write " + *out
	}
	c := &client.Client{Home: *home}
	if _, err := c.Join(ctx, *space); err != nil {
		fmt.Fprintf(stderr, "checkpoint: join %s: %v\n", *space, err)
		return exitFailed
	}

	req, err := ask(ctx, c, *space, Request{Title: *title, Details: *details, Options: []string{"approve", "reject"},
		Data: mustJSON(map[string]string{"action": "write", "file": *out})}, only)
	if err != nil {
		fmt.Fprintf(stderr, "checkpoint: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "checkpoint request %s in %s: %s\n", req.ID, *space, *title)
	who := "anyone in the space"
	if len(only) > 0 {
		who = strings.Join(only, ", ")
	}
	fmt.Fprintf(stdout, "waiting for a decision from %s; answer with\n", who)
	fmt.Fprintf(stdout, "  approve: %s\n", answerCommand(*space, req.ID, `{"decision":"approve"}`))
	fmt.Fprintf(stdout, "  reject:  %s\n", answerCommand(*space, req.ID, `{"decision":"reject","comment":"why not"}`))

	wctx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	m, r, err := wait(wctx, c, *space, req, only, stdout)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		fmt.Fprintf(stderr, "checkpoint: no decision on %s within %v; not acting\n", req.ID, *timeout)
		return exitTimedOut
	case err != nil:
		fmt.Fprintf(stderr, "checkpoint: waiting for a decision: %v\n", err)
		return exitFailed
	case r.Decision == "reject":
		fmt.Fprintf(stdout, "rejected by %s (response %s): %s\n", m.From, m.ID, r.Comment)
		return exitRejected
	}
	fmt.Fprintf(stdout, "approved by %s (response %s)%s\n", m.From, m.ID, suffix(": ", r.Comment))
	if err := act(*out, req, m, r); err != nil {
		fmt.Fprintf(stderr, "checkpoint: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "acted: wrote %s\n", *out)
	return exitApproved
}

// ask posts the checkpoint request, addressed to the approvers if any.
func ask(ctx context.Context, c *client.Client, space string, r Request, approvers []string) (api.Message, error) {
	req := api.SendRequest{Type: typeRequest, Content: mustJSON(r)}
	if len(approvers) > 0 {
		req.Refs = &api.Refs{Nodes: approvers}
	}
	return c.Send(ctx, space, req)
}

// errDecided ends the Follow in wait.
var errDecided = errors.New("decided")

// wait follows the space after the request until the first valid response
// arrives and returns it. Everything that answers the request is stored
// here after it, so following from the request's cursor misses nothing.
func wait(ctx context.Context, c *client.Client, space string, req api.Message, approvers []string, out io.Writer) (api.Message, Response, error) {
	var got api.Message
	var resp Response
	err := c.Follow(ctx, space, req.Cursor, func(m api.Message) error {
		if m.Type != typeResponse {
			return nil
		}
		r, why := check(m, req.ID, approvers)
		if why != "" {
			fmt.Fprintf(out, "ignored response %s from %s: %s\n", m.ID, m.From, why)
			return nil
		}
		got, resp = m, r
		return errDecided
	})
	if errors.Is(err, errDecided) {
		return got, resp, nil
	}
	return api.Message{}, Response{}, err
}

// check says why response m does not decide request, or returns its
// content when it does.
func check(m api.Message, request string, approvers []string) (Response, string) {
	if m.Refs == nil || !slices.Contains(m.Refs.Messages, request) {
		return Response{}, "it does not reference this request"
	}
	if len(approvers) > 0 && !slices.Contains(approvers, m.From) {
		return Response{}, "not an approver"
	}
	var r Response
	if err := json.Unmarshal(m.Content, &r); err != nil || (r.Decision != "approve" && r.Decision != "reject") {
		return Response{}, `its decision is neither "approve" nor "reject"`
	}
	return r, ""
}

// act is the approved action: it writes a record of the approval to file.
func act(file string, req, resp api.Message, r Response) error {
	record := map[string]string{
		"request": req.ID, "response": resp.ID, "approved_by": resp.From,
		"comment": r.Comment, "at": time.Now().UTC().Format(time.RFC3339),
	}
	b, _ := json.MarshalIndent(record, "", "  ")
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

// answerCommand is the weft CLI command that answers request in space.
func answerCommand(space, request, content string) string {
	return fmt.Sprintf("weft send %s --type %s --ref %s --data %s", shellQuote(space), typeResponse, request, shellQuote(content))
}

// shellQuote quotes s for a POSIX shell unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// suffix returns sep+s, or "" when s is empty.
func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// mustJSON encodes v, which is always encodable here.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
