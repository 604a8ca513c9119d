package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// coordinate posts the objective, follows the space until every scope has
// its winning claim's finding and nothing has changed for grace, then posts
// swarm.done with the merged result and prints it.
//
// The grace period is there because a claim can arrive late: two workers
// may claim a scope in the same instant, and the claim with the smaller ID
// wins even if it arrives after the other's finding. Waiting a little
// longer than the mesh takes to deliver a message lets such a claim, and
// then its finding, arrive before the result is final.
func coordinate(ctx context.Context, c *client.Client, out io.Writer, space, name string, below, n int, grace time.Duration) error {
	obj := Objective{
		Objective: fmt.Sprintf("count the primes below %d", below),
		Scopes:    splitRange(below, n),
		Merge:     "sum the primes of every scope, taking each scope's finding from its winning claim (the smallest claim ID)",
	}
	om, err := send(ctx, c, space, typeObjective, obj)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: objective %s in %s: %s, %d scopes\n", name, om.ID, space, obj.Objective, n)
	b, err := newBoard(om)
	if err != nil {
		return err
	}
	if err := collect(ctx, c, out, space, name, b, om.Cursor, grace); err != nil {
		return err
	}

	merged := Merged{Below: below, Scopes: acceptedAll(b)}
	for _, a := range merged.Scopes {
		merged.Primes += a.Primes
	}
	dm, err := send(ctx, c, space, typeDone, Done{Result: merged}, om.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: done %s: %d primes below %d\n", name, dm.ID, merged.Primes, below)
	byWorker := map[string][]string{}
	for _, s := range b.scopes {
		a := merged.Scopes[s]
		byWorker[a.Worker] = append(byWorker[a.Worker], s)
	}
	for _, w := range slices.Sorted(maps.Keys(byWorker)) {
		fmt.Fprintf(out, "%s: %s counted %d scopes: %s\n", name, w, len(byWorker[w]), strings.Join(byWorker[w], " "))
	}
	return nil
}

// collect follows the space after cursor until every scope of b has its
// winning claim's finding and nothing has changed for grace.
func collect(ctx context.Context, c *client.Client, out io.Writer, space, name string, b *board, after string, grace time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, followErr := follow(ctx, c, space, after)
	var quiet <-chan time.Time // set while all is in; fires after grace without news
	for {
		select {
		case m := <-events:
			if !b.add(m) {
				continue
			}
			report(out, name, b, m)
			quiet = nil
			if len(acceptedAll(b)) == len(b.scopes) {
				quiet = time.After(grace)
			}
		case <-quiet:
			return nil
		case err := <-followErr:
			return fmt.Errorf("%d of %d scopes have findings: %w", len(acceptedAll(b)), len(b.scopes), err)
		}
	}
}

// acceptedAll returns the accepted finding of every scope that has one.
func acceptedAll(b *board) map[string]Accepted {
	all := map[string]Accepted{}
	for _, s := range b.scopes {
		if a, ok := b.accepted(s); ok {
			all[s] = a
		}
	}
	return all
}

// report prints what m, just taken in, means for the objective.
func report(out io.Writer, name string, b *board, m api.Message) {
	switch m.Type {
	case typeIntro:
		fmt.Fprintf(out, "%s: intro from %s (%s)\n", name, b.name(m.From), short(m.From))
	case typeClaim:
		var cl Claim
		_ = json.Unmarshal(m.Content, &cl) // add checked it
		if cs := b.claims[cl.Scope]; len(cs) > 1 {
			w, _ := b.winner(cl.Scope)
			fmt.Fprintf(out, "%s: scope %s has %d claims; %s's claim %s wins\n", name, cl.Scope, len(cs), b.name(w.From), short(w.ID))
		}
	case typeFinding:
		f := b.results[m.ID]
		if a, ok := b.accepted(f.Scope); ok && a.Finding == m.ID {
			fmt.Fprintf(out, "%s: finding for %s: %d primes, by %s\n", name, f.Scope, f.Result.Primes, a.Worker)
		} else {
			fmt.Fprintf(out, "%s: finding for %s by %s is not (yet) its winning claim's\n", name, f.Scope, b.name(m.From))
		}
	}
}
