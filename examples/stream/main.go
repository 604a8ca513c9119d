// Command stream shows weft's stream invoke with an LLM-like token stream.
//
// One agent serves a handler that answers a prompt token by token, as
// stream deltas, at a steady rate; another asks it and prints the tokens
// as they arrive, then the time to first token and the throughput. The
// "model" is a small deterministic Markov chain over an embedded text (no
// LLM, no internet): the same prompt always gives the same answer.
//
//	stream serve [--home DIR] [--name generate] [--rate 20] [--length 80] [--allow trusted|anyone|PEER]...
//	stream ask PEER PROMPT... [--home DIR] [--name generate] [--max-tokens N] [--frames]
//
// Both talk to the local weft daemon of --home (default $WEFT_HOME, else
// ~/.weft). Stopping `ask` early (Ctrl-C, or --max-tokens) cancels the
// call, and `serve` stops generating and says so.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// Delta is the data of one stream delta: one token.
type Delta struct {
	Token string `json:"token"`
}

// Final is the data of the final frame.
type Final struct {
	Tokens int    `json:"tokens"`
	Reason string `json:"finish_reason"` // "stop" (end of a sentence) or "length"
}

// Input is what a caller sends.
type Input struct {
	Prompt string `json:"prompt"`
}

const usage = `usage:
  stream serve [--home DIR] [--name NAME] [--rate TOKENS_PER_S] [--length N] [--allow trusted|anyone|PEER]...
  stream ask PEER PROMPT... [--home DIR] [--name NAME] [--max-tokens N] [--frames]`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one subcommand and returns the exit code: 0, 1 for a failure,
// 2 for a usage mistake, 130 when interrupted.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "ask":
		return ask(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "stream: unknown command %q\n%s\n", args[0], usage)
	return 2
}

// parse parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// serve registers the generator as a handler and serves calls until ctx
// ends.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "the daemon's home (default $WEFT_HOME, else ~/.weft)")
	name := fs.String("name", "generate", "the handler's name")
	rate := fs.Float64("rate", 20, "tokens per second (0: as fast as the caller reads)")
	length := fs.Int("length", 80, "the most tokens in an answer")
	var allow allowList
	fs.Var(&allow, "allow", "who may call (repeatable): trusted (the daemon's trusted peers; the default), anyone, or a peer ID")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 || *rate < 0 || *length < 1 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	c := &client.Client{Home: *home}
	node, err := c.Node(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "stream: %v\n", err)
		return 1
	}
	g := &generator{rate: *rate, length: *length, log: log.New(stdout, "", 0)}
	req := api.HandlerRequest{Names: []string{*name}, Allow: allow, Capabilities: []api.Capability{{
		Name:        *name,
		Description: `answers {"prompt": "…"} token by token (stream deltas {"token": "…"})`,
	}}}
	err = c.Serve(ctx, req, g.serve, func() {
		g.log.Printf("serving %q as %s", *name, node.ID)
	})
	if ctx.Err() != nil {
		return 0 // Ctrl-C: a normal way to stop serving
	}
	fmt.Fprintf(stderr, "stream: serve: %v\n", err)
	return 1
}

// allowList is a repeatable flag.
type allowList []string

func (a *allowList) String() string     { return strings.Join(*a, ",") }
func (a *allowList) Set(v string) error { *a = append(*a, v); return nil }

// generator serves calls with Generate's tokens at a steady rate.
type generator struct {
	rate   float64 // tokens per second; 0 = no pacing
	length int
	log    *log.Logger // safe for concurrent calls
}

// serve answers one call: for a stream call one delta per token, then the
// final frame; for a unary call the whole text at once. It stops as soon
// as ctx ends, which is how the caller's cancellation arrives.
func (g *generator) serve(ctx context.Context, call api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
	var in Input
	if err := json.Unmarshal(call.Input, &in); err != nil || strings.TrimSpace(in.Prompt) == "" {
		return nil, nil, &client.Error{Code: "bad_input", Message: `input must be {"prompt": "…"} with a prompt`}
	}
	toks := Generate(in.Prompt, g.length)
	id := short(call.ID)
	g.log.Printf("call %s from %s: %q (%d tokens)", id, call.From, in.Prompt, len(toks))
	if !call.Stream { // e.g. weft invoke without --stream: the whole text at once
		g.log.Printf("call %s done: %d tokens in one answer", id, len(toks))
		out, err := json.Marshal(map[string]string{"text": strings.Join(toks, "")})
		return out, nil, err
	}
	var tick <-chan time.Time
	if g.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / g.rate))
		defer t.Stop()
		tick = t.C
	}
	for i, tok := range toks {
		if tick != nil && i > 0 { // the first token goes at once
			select {
			case <-tick:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			g.log.Printf("call %s cancelled after %d of %d tokens: stopped generating", id, i, len(toks))
			return nil, nil, ctx.Err()
		}
		d, _ := json.Marshal(Delta{Token: tok})
		if err := send(d); err != nil {
			g.log.Printf("call %s cancelled after %d of %d tokens: stopped generating (%v)", id, i, len(toks), err)
			return nil, nil, err
		}
	}
	reason := "length"
	if endsSentence(toks[len(toks)-1]) {
		reason = "stop"
	}
	g.log.Printf("call %s done: %d tokens", id, len(toks))
	out, err := json.Marshal(Final{Tokens: len(toks), Reason: reason})
	return out, nil, err
}

// errEnough stops reading a stream once --max-tokens tokens arrived.
var errEnough = errors.New("enough tokens")

// ask invokes the generator on a peer and prints its tokens as they come.
func ask(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "the daemon's home (default $WEFT_HOME, else ~/.weft)")
	name := fs.String("name", "generate", "the handler's name")
	maxTokens := fs.Int("max-tokens", 0, "stop reading after N tokens, cancelling the rest (0: read all)")
	frames := fs.Bool("frames", false, "print each frame as a JSON line instead of the text")
	pos, err := parse(fs, args)
	if err != nil || len(pos) < 2 || *maxTokens < 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	peer, prompt := pos[0], strings.Join(pos[1:], " ")
	input, _ := json.Marshal(Input{Prompt: prompt})

	c := &client.Client{Home: *home}
	var (
		start  = time.Now()
		first  time.Duration // time to the first token
		tokens int
		seq    uint64 // the seq the next frame must have
		final  Final
	)
	err = c.InvokeStream(ctx, api.InvokeRequest{Peer: peer, Name: *name, Input: input}, func(f api.Frame) error {
		if f.Seq != seq {
			return fmt.Errorf("frame %d arrived when %d was due", f.Seq, seq)
		}
		seq++
		if *frames {
			line, _ := json.Marshal(f)
			fmt.Fprintf(stdout, "%s\n", line)
		}
		switch f.Kind {
		case "delta":
			var d Delta
			if err := json.Unmarshal(f.Data, &d); err != nil {
				return fmt.Errorf("delta %d: %w", f.Seq, err)
			}
			if tokens == 0 {
				first = time.Since(start)
			}
			tokens++
			if !*frames {
				fmt.Fprint(stdout, d.Token)
			}
			if *maxTokens > 0 && tokens >= *maxTokens {
				return errEnough // returning an error cancels the call
			}
		case "final":
			if err := json.Unmarshal(f.Data, &final); err != nil {
				return fmt.Errorf("final frame: %w", err)
			}
		}
		return nil
	})
	total := time.Since(start)
	if !*frames && tokens > 0 {
		fmt.Fprintln(stdout)
	}
	switch {
	case err == nil:
		if final.Tokens != tokens {
			fmt.Fprintf(stderr, "stream: the final frame counts %d tokens, %d arrived\n", final.Tokens, tokens)
			return 1
		}
		fmt.Fprintf(stderr, "%s (finish: %s)\n", stats(tokens, first, total), final.Reason)
		return 0
	case errors.Is(err, errEnough):
		fmt.Fprintf(stderr, "%s (stopped at --max-tokens %d; the rest was cancelled)\n", stats(tokens, first, total), *maxTokens)
		return 0
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s (interrupted; the call was cancelled)\n", stats(tokens, first, total))
		return 130
	}
	fmt.Fprintf(stderr, "stream: ask %s: %v\n", peer, err)
	return 1
}

// stats describes a finished stream: time to first token, rate, total.
func stats(tokens int, first, total time.Duration) string {
	if tokens == 0 {
		return fmt.Sprintf("no tokens in %v", total.Round(time.Millisecond))
	}
	rate := float64(tokens) / total.Seconds()
	return fmt.Sprintf("first token after %v, %d tokens in %v (%.1f tokens/s)",
		first.Round(time.Millisecond), tokens, total.Round(time.Millisecond), rate)
}

// short abbreviates a long ID for logs.
func short(id string) string {
	if len(id) > 12 {
		return id[:6] + "…" + id[len(id)-6:]
	}
	return id
}
