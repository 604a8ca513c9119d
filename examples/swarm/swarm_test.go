package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

func TestMain(m *testing.M) { testbed.Main(m) }

const pkg = "github.com/weftmesh/weft/examples/swarm"

// TestSwarm runs a coordinator and three workers, each a process on its own
// daemon, and checks the merged count, that every scope has exactly one
// accepted finding (its winning claim's), that the work was shared, and that
// every daemon holds the whole conversation.
func TestSwarm(t *testing.T) {
	bin := testbed.Build(t, pkg)
	ds := testbed.Mesh(t, 4)
	const space = "primes"

	workers := startWorkers(t, bin, ds[1:], space, nil)
	coord := testbed.Run(t, nil, home(ds[0]), bin, "--role", "coordinator", "--space", space, "--name", "boss", "--timeout", "2m")
	if err := coord.Wait(3 * time.Minute); err != nil {
		t.Fatalf("coordinator: %v\nstdout:\n%s\nstderr:\n%s", err, coord.Stdout, coord.Stderr)
	}
	if out := coord.Stdout.String(); !strings.Contains(out, ": 148933 primes below 2000000\n") {
		t.Errorf("coordinator did not print the right total:\n%s", out)
	}
	for _, w := range workers {
		if err := w.Wait(time.Minute); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", w.Name, err, w.Stdout, w.Stderr)
		}
		if out := w.Stdout.String(); !strings.Contains(out, "done: 148933 primes below 2000000;") {
			t.Errorf("%s did not see the result:\n%s", w.Name, out)
		}
	}

	msgs := sameEverywhere(t, ds, space)
	v := check(t, msgs, 2_000_000, 12)
	if v.intros != 3 {
		t.Errorf("%d intros, want 3", v.intros)
	}
	workersUsed := map[string]bool{}
	for _, a := range v.done.Result.Scopes {
		workersUsed[a.Worker] = true
	}
	if len(workersUsed) < 2 {
		t.Errorf("all scopes were counted by %v; want the work spread over more than one worker", slices.Collect(maps.Keys(workersUsed)))
	}
	t.Logf("scopes per worker: %v", perWorker(v.done))
}

// TestSwarmContestedScope starts two workers on the same first scope: both
// claim it, the claim with the smaller ID wins on every member, the loser
// drops it, and the coordinator takes the winner's finding.
func TestSwarmContestedScope(t *testing.T) {
	bin := testbed.Build(t, pkg)
	ds := testbed.Mesh(t, 3)
	const space = "contest"
	const contested = "1750000-2000000" // the last of 8 scopes below 2,000,000

	workers := startWorkers(t, bin, ds[1:], space, []string{"--first", contested})
	coord := testbed.Run(t, nil, home(ds[0]), bin, "--role", "coordinator", "--space", space, "--name", "boss", "--scopes", "8", "--timeout", "2m")
	if err := coord.Wait(3 * time.Minute); err != nil {
		t.Fatalf("coordinator: %v\nstdout:\n%s\nstderr:\n%s", err, coord.Stdout, coord.Stderr)
	}
	for _, w := range workers {
		if err := w.Wait(time.Minute); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", w.Name, err, w.Stdout, w.Stderr)
		}
	}

	v := check(t, sameEverywhere(t, ds, space), 2_000_000, 8)
	cs := v.claims[contested]
	if len(cs) != 2 || cs[0].From == cs[1].From {
		t.Fatalf("claims for %s: %+v; want one from each worker", contested, cs)
	}
	winner := slices.MinFunc(cs, func(a, b api.Message) int { return strings.Compare(a.ID, b.ID) })
	if got := v.done.Result.Scopes[contested].Claim; got != winner.ID {
		t.Errorf("done credits claim %s for %s; the rule picks %s", got, contested, winner.ID)
	}
	for i, d := range ds[1:] {
		out := workers[i].Stdout.String()
		dropped := strings.Contains(out, "dropped "+contested)
		if d.ID == winner.From && dropped {
			t.Errorf("the winner (%s) dropped %s:\n%s", workers[i].Name, contested, out)
		}
		if d.ID != winner.From && !dropped {
			t.Errorf("the loser (%s) did not drop %s:\n%s", workers[i].Name, contested, out)
		}
	}
	if out := coord.Stdout.String(); !strings.Contains(out, "scope "+contested+" has 2 claims") {
		t.Errorf("coordinator did not report the contest:\n%s", out)
	}
}

// TestSwarmCoordinatorTimeout runs a coordinator with no workers: it gives
// up after --timeout with exit code 4, saying how far it got, and posts no
// swarm.done.
func TestSwarmCoordinatorTimeout(t *testing.T) {
	bin := testbed.Build(t, pkg)
	d := testbed.Start(t)
	coord := testbed.Run(t, nil, home(d), bin, "--role", "coordinator", "--space", "alone", "--timeout", "2s")
	err := coord.Wait(time.Minute)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitTimedOut {
		t.Fatalf("coordinator ended with %v; want exit code %d\nstderr:\n%s", err, exitTimedOut, coord.Stderr)
	}
	if stderr := coord.Stderr.String(); !strings.Contains(stderr, "timed out after 2s: 0 of 12 scopes have findings") {
		t.Errorf("stderr does not explain the timeout:\n%s", stderr)
	}
	msgs, err := readAll(context.Background(), d, "alone")
	if err != nil || len(msgs) != 1 || msgs[0].Type != typeObjective {
		t.Errorf("the space holds %d messages (%v); want only the objective", len(msgs), err)
	}
}

// home is the environment that points a process at daemon d.
func home(d *testbed.Daemon) []string { return []string{"WEFT_HOME=" + d.Home} }

// startWorkers starts a worker on each daemon (named w1, w2, …, with extra
// flags) and waits until each is following the space.
func startWorkers(t testing.TB, bin string, ds []*testbed.Daemon, space string, extra []string) []*testbed.Proc {
	t.Helper()
	var ps []*testbed.Proc
	for i, d := range ds {
		args := append([]string{"--role", "worker", "--space", space, "--name", fmt.Sprintf("w%d", i+1)}, extra...)
		ps = append(ps, testbed.Run(t, nil, home(d), bin, args...))
	}
	for _, p := range ps {
		p.WaitOutput(30*time.Second, "waiting for an objective")
	}
	return ps
}

// readAll reads a daemon's whole space.
func readAll(ctx context.Context, d *testbed.Daemon, space string) ([]api.Message, error) {
	var all []api.Message
	after := ""
	for {
		p, err := d.Client.Read(ctx, space, after, 1000)
		if err != nil {
			return nil, err
		}
		if len(p.Messages) == 0 {
			return all, nil
		}
		all, after = append(all, p.Messages...), p.Next
	}
}

// sameEverywhere waits until every daemon holds the same messages in the
// space, a swarm.done among them, and returns the first daemon's.
func sameEverywhere(t testing.TB, ds []*testbed.Daemon, space string) []api.Message {
	t.Helper()
	var first []api.Message
	testbed.Poll(t, 30*time.Second, "every daemon to hold the whole swarm", func() (bool, string) {
		var want []string
		for i, d := range ds {
			msgs, err := readAll(context.Background(), d, space)
			if err != nil {
				return false, err.Error()
			}
			ids := make([]string, len(msgs))
			for j, m := range msgs {
				ids[j] = m.ID
			}
			slices.Sort(ids)
			if i == 0 {
				first, want = msgs, ids
				if !slices.ContainsFunc(msgs, func(m api.Message) bool { return m.Type == typeDone }) {
					return false, "no swarm.done yet"
				}
			} else if !slices.Equal(ids, want) {
				return false, fmt.Sprintf("daemon %d holds %d messages, daemon 0 %d", i, len(ids), len(want))
			}
		}
		return true, ""
	})
	return first
}

// verdict is what check found in a space.
type verdict struct {
	done   Done
	intros int
	claims map[string][]api.Message // scope → claims
}

// check verifies a finished swarm from the messages of its space: one
// objective with n scopes covering [0, below), one done whose total is the
// number of primes below `below`, and for every scope exactly one accepted
// finding, the one of the claim with the smallest ID, from its claimant,
// with the right count (counted here with a sieve).
func check(t testing.TB, msgs []api.Message, below, n int) verdict {
	t.Helper()
	byType := map[string][]api.Message{}
	for _, m := range msgs {
		byType[m.Type] = append(byType[m.Type], m)
	}
	if len(byType[typeObjective]) != 1 || len(byType[typeDone]) != 1 {
		t.Fatalf("%d objectives and %d dones; want one each", len(byType[typeObjective]), len(byType[typeDone]))
	}
	obj := byType[typeObjective][0]
	var o Objective
	if err := json.Unmarshal(obj.Content, &o); err != nil || len(o.Scopes) != n || o.Objective == "" || o.Merge == "" {
		t.Fatalf("objective %s: %v", obj.Content, err)
	}
	refsObj := func(m api.Message) bool {
		return m.Refs != nil && len(m.Refs.Messages) > 0 && m.Refs.Messages[0] == obj.ID
	}

	v := verdict{claims: map[string][]api.Message{}}
	dm := byType[typeDone][0]
	if err := json.Unmarshal(dm.Content, &v.done); err != nil || !refsObj(dm) || dm.From != obj.From {
		t.Fatalf("done %s (refs %+v): %v", dm.Content, dm.Refs, err)
	}
	for _, m := range byType[typeIntro] {
		if !refsObj(m) {
			t.Errorf("intro %s does not reference the objective", m.ID)
		}
		v.intros++
	}
	for _, m := range byType[typeClaim] {
		var c Claim
		if err := json.Unmarshal(m.Content, &c); err != nil || !refsObj(m) {
			t.Fatalf("claim %s %s: %v", m.ID, m.Content, err)
		}
		v.claims[c.Scope] = append(v.claims[c.Scope], m)
	}
	findings := map[string][]api.Message{} // claim → findings from its claimant
	for _, m := range byType[typeFinding] {
		if !refsObj(m) || len(m.Refs.Messages) != 2 {
			t.Fatalf("finding %s refs %+v; want [objective, claim]", m.ID, m.Refs)
		}
		findings[m.Refs.Messages[1]] = append(findings[m.Refs.Messages[1]], m)
	}

	primes := sieve(below)
	total := 0
	for _, s := range o.Scopes {
		lo, hi, err := parseScope(s)
		if err != nil {
			t.Fatal(err)
		}
		want := primes[hi] - primes[lo]
		total += want
		a, ok := v.done.Result.Scopes[s]
		if !ok {
			t.Errorf("scope %s: no accepted finding", s)
			continue
		}
		cs := v.claims[s]
		if len(cs) == 0 {
			t.Errorf("scope %s: no claim", s)
			continue
		}
		win := slices.MinFunc(cs, func(a, b api.Message) int { return strings.Compare(a.ID, b.ID) })
		var mine []api.Message
		for _, f := range findings[win.ID] {
			if f.From == win.From {
				mine = append(mine, f)
			}
		}
		if len(mine) != 1 {
			t.Errorf("scope %s: the winning claim %s has %d findings from its claimant; want 1", s, win.ID, len(mine))
			continue
		}
		var f Finding
		if err := json.Unmarshal(mine[0].Content, &f); err != nil || f.Scope != s || f.Result.Primes != want {
			t.Errorf("scope %s: finding %s (%v); want %d primes", s, mine[0].Content, err, want)
		}
		if a.Claim != win.ID || a.Finding != mine[0].ID || a.Peer != win.From || a.Primes != want {
			t.Errorf("scope %s: done accepted %+v; want claim %s, finding %s by %s, %d primes", s, a, win.ID, mine[0].ID, win.From, want)
		}
	}
	if total != 148933 && below == 2_000_000 {
		t.Fatalf("the test's sieve counts %d primes below 2000000", total)
	}
	if v.done.Result.Primes != total || v.done.Result.Below != below || len(v.done.Result.Scopes) != n {
		t.Errorf("done: %d primes below %d over %d scopes; want %d below %d over %d", v.done.Result.Primes, v.done.Result.Below, len(v.done.Result.Scopes), total, below, n)
	}
	return v
}

// perWorker counts the scopes each worker was credited with.
func perWorker(d Done) map[string]int {
	n := map[string]int{}
	for _, a := range d.Result.Scopes {
		n[a.Worker]++
	}
	return n
}

// sieve returns pi with pi[k] = the number of primes below k, for k ≤ n, by
// the sieve of Eratosthenes (independent of the example's trial division).
func sieve(n int) []int {
	composite := make([]bool, n+1)
	pi := make([]int, n+1)
	for k := 2; k <= n; k++ {
		pi[k] = pi[k-1]
		if !composite[k-1] && k-1 >= 2 {
			pi[k]++
		}
		if !composite[k] {
			for j := k * k; j <= n; j += k {
				composite[j] = true
			}
		}
	}
	return pi
}
