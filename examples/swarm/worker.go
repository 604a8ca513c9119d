package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// worker is one swarm member doing the counting.
type worker struct {
	c     *client.Client
	out   io.Writer
	space string
	name  string
	first string // a scope to claim first, whoever holds it

	b       *board          // the objective served; nil until one appears
	job     *job            // the scope being counted
	counted []*job          // scopes counted whose claims still win
	claims  map[string]bool // this worker's claim IDs
	results chan result     // from the job's goroutine

	introduced, idle, waiting, ended bool // what was done or said already
}

// job is a claimed scope being counted.
type job struct {
	claim, scope string
	cancel       context.CancelFunc
}

// result is a job's outcome.
type result struct {
	claim  string
	primes int
	err    error
}

// work follows the space as a worker until the objective it serves is
// done. It first catches up with what the space already holds (so it never
// claims a scope it has not seen is taken), then acts on each new message.
func work(ctx context.Context, c *client.Client, out io.Writer, space, name, first string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	node, err := c.Node(ctx)
	if err != nil {
		return err
	}
	end, err := c.Read(ctx, space, api.EndCursor, 1) // the cursor of what is stored now
	if err != nil {
		return err
	}
	w := &worker{c: c, out: out, space: space, name: name, first: first,
		claims: map[string]bool{}, results: make(chan result)}
	fmt.Fprintf(out, "%s: worker %s following %s\n", name, short(node.ID), space)

	events, followErr := follow(ctx, c, space, "")
	live := end.Next == ""
	for {
		if live {
			if err := w.step(ctx); err != nil || w.ended {
				return err
			}
		}
		select {
		case m := <-events:
			w.take(m, live)
			live = live || m.Cursor == end.Next
		case r := <-w.results:
			if err := w.finished(ctx, r); err != nil {
				return err
			}
		case err := <-followErr:
			return err
		}
	}
}

// take notes message m. Before the worker is live (while it catches up),
// an objective that is already done is forgotten: it waits for a new one.
func (w *worker) take(m api.Message, live bool) {
	switch {
	case w.b == nil && m.Type == typeObjective:
		b, err := newBoard(m)
		if err != nil {
			fmt.Fprintf(w.out, "%s: ignoring %v\n", w.name, err)
			return
		}
		w.b = b
		fmt.Fprintf(w.out, "%s: objective %s: %s\n", w.name, m.ID, strings.Join(b.scopes, " "))
	case w.b != nil:
		w.b.add(m)
		if !live && w.b.done != nil {
			w.b = nil
		}
	}
}

// step does what the board calls for: introduce, drop a lost scope, claim
// the next, or stop once the objective is done.
func (w *worker) step(ctx context.Context) error {
	if w.b == nil {
		if !w.waiting {
			fmt.Fprintf(w.out, "%s: waiting for an objective\n", w.name)
			w.waiting = true
		}
		return nil
	}
	if w.b.done != nil {
		w.stop()
		return nil
	}
	if !w.introduced {
		if _, err := send(ctx, w.c, w.space, typeIntro, Intro{Name: w.name, Capabilities: []string{"count_primes"}}, w.b.objective.ID); err != nil {
			return err
		}
		w.introduced = true
	}
	if w.job != nil && !w.holds(w.job, "") {
		w.job.cancel()
		w.job = nil
	}
	// A claim can lose even after its finding is posted, when a competing
	// claim arrives late; the finding then does not count.
	w.counted = slices.DeleteFunc(w.counted, func(j *job) bool { return !w.holds(j, " after counting it") })
	if w.job == nil {
		return w.claimNext(ctx)
	}
	return nil
}

// holds reports whether j's claim still wins its scope, and says so (with
// note) when it does not.
func (w *worker) holds(j *job, note string) bool {
	win, _ := w.b.winner(j.scope)
	if win.ID == j.claim {
		return true
	}
	fmt.Fprintf(w.out, "%s: dropped %s%s: my claim %s lost to %s's %s\n", w.name, j.scope, note, short(j.claim), w.b.name(win.From), short(win.ID))
	return false
}

// claimNext claims a scope nobody has claimed yet (or the --first scope)
// and starts counting it.
func (w *worker) claimNext(ctx context.Context) error {
	scope := w.next()
	if scope == "" {
		if !w.idle {
			fmt.Fprintf(w.out, "%s: every scope is claimed; waiting for swarm.done\n", w.name)
			w.idle = true
		}
		return nil
	}
	m, err := send(ctx, w.c, w.space, typeClaim, Claim{Scope: scope}, w.b.objective.ID)
	if err != nil {
		return err
	}
	w.b.add(m)
	w.claims[m.ID] = true
	fmt.Fprintf(w.out, "%s: claimed %s (%s)\n", w.name, scope, short(m.ID))
	lo, hi, _ := parseScope(scope) // next checked it
	jctx, cancel := context.WithCancel(ctx)
	w.job = &job{claim: m.ID, scope: scope, cancel: cancel}
	go func() {
		n, err := countPrimes(jctx, lo, hi)
		select {
		case w.results <- result{claim: m.ID, primes: n, err: err}:
		case <-ctx.Done():
		}
	}()
	return nil
}

// next picks the scope to claim: the --first one once, then one of the
// unclaimed ones at random (workers that finish together rarely pick the
// same).
func (w *worker) next() string {
	if s := w.first; s != "" {
		w.first = ""
		if _, _, err := parseScope(s); err == nil && slices.Contains(w.b.scopes, s) {
			return s
		}
	}
	var free []string
	for _, s := range w.b.scopes {
		if _, _, err := parseScope(s); err == nil && len(w.b.claims[s]) == 0 {
			free = append(free, s)
		}
	}
	if len(free) == 0 {
		return ""
	}
	return free[rand.IntN(len(free))]
}

// finished posts the finding of a counted scope, unless the scope was lost
// meanwhile.
func (w *worker) finished(ctx context.Context, r result) error {
	if w.job == nil || w.job.claim != r.claim || r.err != nil {
		return nil // a dropped job
	}
	j := w.job
	w.job = nil
	j.cancel()
	if !w.holds(j, "") {
		return nil
	}
	m, err := send(ctx, w.c, w.space, typeFinding, Finding{Scope: j.scope, Result: Count{Primes: r.primes}}, w.b.objective.ID, j.claim)
	if err != nil {
		return err
	}
	w.b.add(m)
	w.counted = append(w.counted, j)
	fmt.Fprintf(w.out, "%s: finding for %s: %d primes\n", w.name, j.scope, r.primes)
	return nil
}

// stop ends the work once the objective is done and prints what the
// coordinator credited to this worker.
func (w *worker) stop() {
	if w.job != nil {
		w.job.cancel()
	}
	var d Done
	_ = json.Unmarshal(w.b.done.Content, &d)
	var mine []string
	for _, s := range w.b.scopes {
		if a, ok := d.Result.Scopes[s]; ok && w.claims[a.Claim] {
			mine = append(mine, s)
		}
	}
	fmt.Fprintf(w.out, "%s: done: %d primes below %d; %d scopes were mine: %s\n", w.name, d.Result.Primes, d.Result.Below, len(mine), strings.Join(mine, " "))
	w.ended = true
}
