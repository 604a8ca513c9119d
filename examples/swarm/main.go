// Command swarm shows weft's swarm convention: a coordinator and any number
// of workers self-organise over one space to split a task, work on the
// parts and merge the results, with no scheduler and no server.
//
// The task is real and checkable: count the primes below N (default
// 2,000,000; the answer is 148,933), split into ranges. The coordinator
// posts a swarm.objective whose scopes are the ranges ("lo-hi", the
// integers lo ≤ n < hi). Each worker introduces itself (swarm.intro),
// claims a scope nobody has claimed yet (swarm.claim), counts the primes in
// it and posts a swarm.finding, then claims the next. When two claims for
// one scope exist, the claim with the lexicographically smallest message ID
// wins; the loser drops the scope. Once every scope has its winner's
// finding (and a grace period has passed without news, for late competing
// claims), the coordinator posts swarm.done with the merged result and who
// did what, and the workers stop.
//
//	swarm --role coordinator --space NAME [--name N] [--below 2000000] [--scopes 12] [--grace 1s] [--timeout 5m]
//	swarm --role worker --space NAME --name N [--first SCOPE]
//
// Both talk to the local weft daemon of --home (default $WEFT_HOME, else
// ~/.weft) and follow the space with client.Follow: first what is stored,
// then what arrives.
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

// The swarm convention's message types.
const (
	typeObjective = "swarm.objective"
	typeIntro     = "swarm.intro"
	typeClaim     = "swarm.claim"
	typeFinding   = "swarm.finding"
	typeDone      = "swarm.done"
)

// Objective is the content of a swarm.objective.
type Objective struct {
	Objective string   `json:"objective"`
	Scopes    []string `json:"scopes"`
	Merge     string   `json:"merge"`
}

// Intro is the content of a swarm.intro.
type Intro struct {
	Name         string   `json:"name"`
	Capabilities []string `json:"capabilities"`
}

// Claim is the content of a swarm.claim.
type Claim struct {
	Scope string `json:"scope"`
}

// Finding is the content of a swarm.finding.
type Finding struct {
	Scope  string `json:"scope"`
	Result Count  `json:"result"`
}

// Count is a finding's result: the primes in the scope.
type Count struct {
	Primes int `json:"primes"`
}

// Done is the content of a swarm.done.
type Done struct {
	Result Merged `json:"result"`
}

// Merged is the coordinator's merged result.
type Merged struct {
	Below  int                 `json:"below"`
	Primes int                 `json:"primes"`
	Scopes map[string]Accepted `json:"scopes"`
}

// Accepted is the finding the coordinator took for one scope.
type Accepted struct {
	Primes  int    `json:"primes"`
	Worker  string `json:"worker"` // the name from the worker's intro
	Peer    string `json:"peer"`
	Claim   string `json:"claim"`
	Finding string `json:"finding"`
}

// Exit codes besides 0.
const (
	exitFailed   = 1
	exitUsage    = 2
	exitTimedOut = 4
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses the flags, joins the space and plays the role.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("swarm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "weft home of the local daemon (default $WEFT_HOME, else ~/.weft)")
	role := fs.String("role", "", "coordinator or worker")
	space := fs.String("space", "", "the space to work in")
	name := fs.String("name", "", "this member's name")
	below := fs.Int("below", 2_000_000, "coordinator: count the primes below this")
	scopes := fs.Int("scopes", 12, "coordinator: split the range into this many scopes")
	timeout := fs.Duration("timeout", 5*time.Minute, "coordinator: give up when the findings are not in by then (0: never)")
	grace := fs.Duration("grace", time.Second, "coordinator: once all findings are in, wait this long for late competing claims")
	first := fs.String("first", "", "worker: claim this scope first, even if someone has claimed it (to see the rule settle it)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *space == "" || fs.NArg() > 0 || (*role != "coordinator" && *role != "worker") {
		fmt.Fprintln(stderr, "swarm: want --role coordinator|worker --space NAME")
		return exitUsage
	}
	if *role == "coordinator" && (*below < 2 || *scopes < 1 || *scopes > *below) {
		fmt.Fprintln(stderr, "swarm: want --below ≥ 2 and 1 ≤ --scopes ≤ --below")
		return exitUsage
	}
	if *name == "" {
		*name = *role
	}
	c := &client.Client{Home: *home}
	if _, err := c.Join(ctx, *space); err != nil {
		fmt.Fprintf(stderr, "swarm: join %s: %v\n", *space, err)
		return exitFailed
	}
	var err error
	if *role == "coordinator" {
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		err = coordinate(ctx, c, stdout, *space, *name, *below, *scopes, *grace)
	} else {
		err = work(ctx, c, stdout, *space, *name, *first)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "swarm: timed out after %v: %v\n", *timeout, err)
		return exitTimedOut
	}
	fmt.Fprintf(stderr, "swarm: %v\n", err)
	return exitFailed
}

// board is what a member knows of one objective: the intros, claims,
// findings and done seen so far. Members that have seen the same messages
// draw the same conclusions from it, whatever order they arrived in.
type board struct {
	objective api.Message
	scopes    []string
	names     map[string]string        // peer → name from its intro
	claims    map[string][]claimRec    // scope → its claims
	findings  map[string][]api.Message // claim ID → findings naming it
	results   map[string]Finding       // finding ID → content
	seen      map[string]bool          // message IDs taken in
	done      *api.Message             // the swarm.done, once seen
}

// claimRec is one swarm.claim.
type claimRec struct {
	ID, From, Scope string
}

// newBoard starts a board for the objective m, or fails if m is not one.
func newBoard(m api.Message) (*board, error) {
	var o Objective
	if err := json.Unmarshal(m.Content, &o); err != nil || len(o.Scopes) == 0 {
		return nil, fmt.Errorf("objective %s: no scopes (%v)", m.ID, err)
	}
	return &board{
		objective: m, scopes: o.Scopes,
		names: map[string]string{}, claims: map[string][]claimRec{},
		findings: map[string][]api.Message{}, results: map[string]Finding{},
		seen: map[string]bool{m.ID: true},
	}, nil
}

// add takes in m if it belongs to the objective (its first ref) and
// reports whether it did.
func (b *board) add(m api.Message) bool {
	if b.seen[m.ID] || m.Refs == nil || len(m.Refs.Messages) == 0 || m.Refs.Messages[0] != b.objective.ID {
		return false
	}
	switch m.Type {
	case typeIntro:
		var in Intro
		if json.Unmarshal(m.Content, &in) != nil || in.Name == "" {
			return false
		}
		b.names[m.From] = in.Name
	case typeClaim:
		var cl Claim
		if json.Unmarshal(m.Content, &cl) != nil || !slices.Contains(b.scopes, cl.Scope) {
			return false
		}
		b.claims[cl.Scope] = append(b.claims[cl.Scope], claimRec{m.ID, m.From, cl.Scope})
	case typeFinding:
		var f Finding
		if json.Unmarshal(m.Content, &f) != nil || len(m.Refs.Messages) < 2 {
			return false
		}
		claim := m.Refs.Messages[1]
		b.findings[claim] = append(b.findings[claim], m)
		b.results[m.ID] = f
	case typeDone:
		b.done = &m
	default:
		return false
	}
	b.seen[m.ID] = true
	return true
}

// winner returns the claim that holds scope: the one with the smallest ID.
func (b *board) winner(scope string) (claimRec, bool) {
	cs := b.claims[scope]
	if len(cs) == 0 {
		return claimRec{}, false
	}
	return slices.MinFunc(cs, func(x, y claimRec) int { return strings.Compare(x.ID, y.ID) }), true
}

// accepted returns the winning claim's finding for scope, if it is in: the
// first finding for that claim from its claimant about that scope.
func (b *board) accepted(scope string) (Accepted, bool) {
	w, ok := b.winner(scope)
	if !ok {
		return Accepted{}, false
	}
	for _, f := range b.findings[w.ID] {
		if r := b.results[f.ID]; f.From == w.From && r.Scope == scope {
			return Accepted{Primes: r.Result.Primes, Worker: b.name(w.From), Peer: w.From, Claim: w.ID, Finding: f.ID}, true
		}
	}
	return Accepted{}, false
}

// name is a peer's name from its intro, or its peer ID.
func (b *board) name(peer string) string {
	if n, ok := b.names[peer]; ok {
		return n
	}
	return peer
}

// send sends content as a message of type typ replying to refs.
func send(ctx context.Context, c *client.Client, space, typ string, content any, refs ...string) (api.Message, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return api.Message{}, err
	}
	req := api.SendRequest{Type: typ, Content: b}
	if len(refs) > 0 {
		req.Refs = &api.Refs{Messages: refs}
	}
	m, err := c.Send(ctx, space, req)
	if err != nil {
		return api.Message{}, fmt.Errorf("send %s: %w", typ, err)
	}
	return m, nil
}

// follow follows the space after cursor in a goroutine, until ctx ends:
// each message arrives on the first channel, and how the stream ended on
// the second.
func follow(ctx context.Context, c *client.Client, space, after string) (<-chan api.Message, <-chan error) {
	events, errc := make(chan api.Message), make(chan error, 1)
	go func() {
		errc <- c.Follow(ctx, space, after, func(m api.Message) error {
			select {
			case events <- m:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return events, errc
}

// short abbreviates an ID for people to read.
func short(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}
