package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

// Environment of a handler process, and of nested weft commands it runs.
const (
	envCallID = "WEFT_CALL_ID" // weft invoke inside a handler makes a nested call
)

func runInvoke(ctx context.Context, e *env, args []string) error {
	fs := e.flags("invoke")
	input, out := addDataFlags(fs, "the call's input (default null)")
	stream := fs.Bool("stream", false, "stream invoke: print each delta as it arrives")
	timeout := fs.Duration("timeout", 0, "give up after this long (default 60s, none for --stream)")
	frames := fs.Bool("frames", false, "with --stream, print every frame as JSON (seq, kind, data, meta)")
	showMeta := fs.Bool("meta-out", false, "print the response's meta to stderr")
	capability := fs.String("capability", "", "call whichever peer offers this capability (instead of PEER NAME): the least loaded first, the next if one is unreachable or overloaded; says on stderr which peer answered")
	var meta stringList
	fs.Var(&meta, "meta", "metadata KEY=VALUE (repeatable); keys under \"local.\" are not sent")
	pos, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	want := 2
	if *capability != "" {
		want = 0
	}
	pos, in, err := takeLegacyInput(e, pos, want, *input, out)
	if err != nil {
		return err
	}
	req := api.InvokeRequest{Capability: *capability, Stream: *stream, Parent: os.Getenv(envCallID)}
	if want == 2 {
		req.Peer, req.Name = pos[0], pos[1]
	}
	if in != "" {
		if !json.Valid([]byte(in)) {
			return usageError{"--data is not valid JSON"}
		}
		req.Input = json.RawMessage(in)
	}
	if *timeout < 0 {
		return usageError{"--timeout must not be negative"}
	}
	if *timeout > 0 {
		req.Timeout = timeout.String()
	}
	if req.Meta, err = metaFlag(meta); err != nil {
		return err
	}
	c := e.client()
	if !*stream {
		res, err := c.Invoke(ctx, req)
		if err != nil {
			return err
		}
		if out.on {
			return printJSON(e.stdout, res)
		}
		if *showMeta {
			printJSON(e.stderr, res.Meta)
		}
		answeredBy(e.stderr, res.Peer, res.Attempts)
		fmt.Fprintln(e.stdout, string(res.Output))
		return nil
	}
	w := bufio.NewWriter(e.stdout)
	defer w.Flush()
	return c.InvokeStream(ctx, req, func(f api.Frame) error {
		answeredBy(e.stderr, f.Peer, f.Attempts)
		if *frames || out.on {
			if err := printJSON(w, f); err != nil {
				return err
			}
		} else if len(f.Data) > 0 && string(f.Data) != "null" {
			w.Write(f.Data)
			w.WriteByte('\n')
		}
		if f.Kind == "final" && *showMeta {
			printJSON(e.stderr, f.Meta)
		}
		return w.Flush()
	})
}

// answeredBy says on stderr which provider answered a call by capability
// (nothing for a call to a given peer).
func answeredBy(w io.Writer, p string, attempts []api.Attempt) {
	if p == "" {
		return
	}
	fmt.Fprintf(w, "answered by %s", p)
	for i, a := range attempts {
		if i == 0 {
			fmt.Fprint(w, " (after ")
		} else {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprintf(w, "%s: %s", a.Peer, a.Code)
	}
	if len(attempts) > 0 {
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
}

func runHandle(ctx context.Context, e *env, args []string) error {
	fs := e.flags("handle")
	cmdline := fs.String("exec", "", "command run (by sh -c) for each call: input JSON on stdin, result JSON on stdout; for a stream call each stdout line is a delta")
	a2aURL := fs.String("a2a", "", "instead of --exec: forward each call to the HTTP A2A agent at this URL (SendMessage, or SendStreamingMessage for a stream call; cancels reach it)")
	a2aAuth := fs.String("a2a-auth", "", "with --a2a: the Authorization header to send it, e.g. \"Bearer TOKEN\"")
	conc := fs.Int("concurrency", 16, "calls run at once")
	desc := fs.String("description", "", "what the handler does, for the agent card")
	schema := fs.String("input-schema", "", "JSON schema of the input, for the agent card")
	var allow stringList
	fs.Var(&allow, "allow", "who may call (repeatable): trusted (peers on `weft trust list`; the default), anyone (strangers too: CMD runs with their input), or a peer ID")
	names, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageError{"give the name(s) to serve"}
	}
	if *cmdline != "" && *a2aURL != "" {
		return usageError{errA2AAndExec.Error()}
	}
	if *cmdline == "" && *a2aURL == "" {
		return usageError{"--exec CMD (or --a2a URL) is required"}
	}
	if *conc < 1 {
		return usageError{"--concurrency must be at least 1"}
	}
	serve := (&execHandler{cmd: *cmdline, home: e.home, log: e.stderr}).serve
	if *a2aURL != "" {
		f, err := newA2AForwarder(ctx, *a2aURL, *a2aAuth)
		if err != nil {
			return err
		}
		serve = f.serve
		if *desc == "" {
			*desc = f.card.Name + ": " + f.card.Description + " (the A2A agent at " + *a2aURL + ")"
			if len(*desc) > 1024 {
				*desc = (*desc)[:1024]
			}
		}
	}
	req := api.HandlerRequest{Names: names, Concurrency: *conc, Allow: allow}
	for _, n := range names {
		cp := api.Capability{Name: n, Description: *desc}
		if *schema != "" {
			if !json.Valid([]byte(*schema)) {
				return usageError{"--input-schema is not valid JSON"}
			}
			cp.InputSchema = json.RawMessage(*schema)
		}
		req.Capabilities = append(req.Capabilities, cp)
	}
	// Registered again whenever the daemon restarts.
	err = resuming(ctx, e, func() error {
		return e.client().Serve(ctx, req, serve, func() {
			fmt.Fprintf(e.stderr, "serving %s (up to %d at once) to %s\n", strings.Join(names, ", "), *conc, allowedText(allow))
		})
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// allowedText says who may call, for a person.
func allowedText(allow []string) string {
	if slices.Contains(allow, "anyone") {
		return "anyone (strangers too)"
	}
	var who []string
	for _, a := range allow {
		if a == "trusted" {
			who = append(who, "trusted peers")
		} else {
			who = append(who, strings.TrimPrefix(a, "peer:"))
		}
	}
	if len(who) == 0 {
		return "trusted peers only"
	}
	return strings.Join(who, ", ") + " only"
}

// execHandler runs a command per call.
type execHandler struct {
	cmd  string
	home string
	mu   sync.Mutex
	log  io.Writer
}

// maxOutput bounds what a handler process may print for a unary call.
const maxOutput = 1 << 20

func (h *execHandler) logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.log, format+"\n", args...)
}

func (h *execHandler) serve(ctx context.Context, c api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", h.cmd)
	ownGroup(cmd)
	cmd.Cancel = func() error { killGroup(cmd.Process.Pid); return nil }
	cmd.WaitDelay = 2 * time.Second
	input := []byte(c.Input)
	if len(input) == 0 {
		input = []byte("null")
	}
	cmd.Stdin = bytes.NewReader(input)
	cmd.Env = append(os.Environ(),
		envCallID+"="+c.ID,
		"WEFT_CALL_NAME="+c.Name,
		"WEFT_CALLER="+c.From,
		"WEFT_TRACEPARENT="+c.Meta["traceparent"],
		"WEFT_SESSION="+c.Meta["session"],
		"WEFT_CORRELATION="+c.Meta["correlation"],
	)
	if h.home != "" {
		cmd.Env = append(cmd.Env, "WEFT_HOME="+h.home)
	}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	var out json.RawMessage
	var err error
	if c.Stream {
		err = h.runStream(cmd, send)
	} else {
		var stdout bytes.Buffer
		cmd.Stdout = &limitedWriter{w: &stdout, n: maxOutput}
		err = cmd.Run()
		out = asJSON(bytes.TrimSpace(stdout.Bytes()))
	}
	switch {
	case ctx.Err() != nil:
		h.logf("call %s %s from %s: %v after %s; handler stopped", c.ID, c.Name, c.From, context.Cause(ctx), time.Since(start).Round(time.Millisecond))
		return nil, nil, ctx.Err()
	case err != nil:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		} else {
			msg = err.Error() + ": " + msg
		}
		h.logf("call %s %s from %s: failed: %s", c.ID, c.Name, c.From, msg)
		return nil, nil, errors.New(msg)
	}
	h.logf("call %s %s from %s: ok in %s", c.ID, c.Name, c.From, time.Since(start).Round(time.Millisecond))
	return out, nil, nil
}

// runStream runs cmd, sending each line it prints as a delta.
func (h *execHandler) runStream(cmd *exec.Cmd, send func(json.RawMessage) error) error {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), maxOutput)
	var sendErr error
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if sendErr = send(asJSON(line)); sendErr != nil {
			break
		}
	}
	if sendErr == nil {
		sendErr = sc.Err() // e.g. a line over the limit
	}
	if sendErr != nil {
		// Stop the handler, and keep its pipe drained so it can exit.
		killGroup(cmd.Process.Pid)
		io.Copy(io.Discard, stdout)
	}
	werr := cmd.Wait()
	if sendErr != nil {
		return sendErr
	}
	return werr
}

// asJSON returns b if it is JSON, else b as {"text": b}; nothing is null.
func asJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(b) {
		return json.RawMessage(bytes.Clone(b))
	}
	out, _ := json.Marshal(map[string]string{"text": string(b)})
	return out
}

// tailBuffer keeps the last 2 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2048 {
		t.buf = t.buf[len(t.buf)-2048:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// limitedWriter fails once more than n bytes were written.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, fmt.Errorf("handler output over %d bytes", maxOutput)
	}
	l.n -= len(p)
	return l.w.Write(p)
}
