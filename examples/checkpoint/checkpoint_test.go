package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// bed is the agent's daemon and the human's, in a mesh.
type bed struct {
	agent, human *testbed.Daemon
	bin, weft    string
}

// TestCheckpoint runs the agent against its own daemon while a human
// answers from another daemon with the weft CLI.
func TestCheckpoint(t *testing.T) {
	ds := testbed.Mesh(t, 2)
	b := &bed{agent: ds[0], human: ds[1], bin: testbed.Build(t, "github.com/weftmesh/weft/examples/checkpoint"), weft: testbed.Weft(t)}

	t.Run("approve", func(t *testing.T) {
		// Anyone may answer; the human runs the approve command exactly
		// as the agent printed it.
		out := filepath.Join(t.TempDir(), "approved.json")
		p, id := b.ask(t, "approve", out)
		line := commandLine(t, p, "  approve: ")
		sh := testbed.Run(t, nil, []string{"WEFT_HOME=" + b.human.Home, "PATH=" + filepath.Dir(b.weft) + ":" + os.Getenv("PATH")}, "/bin/sh", "-c", line)
		if err := sh.Wait(30 * time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, sh.Stderr)
		}
		resp := strings.TrimSpace(sh.Stdout.String())
		if code := exitCode(t, p.Wait(30*time.Second)); code != exitApproved {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitApproved, p.Stdout, p.Stderr)
		}
		stdout := p.Stdout.String()
		for _, want := range []string{"approved by " + b.human.ID + " (response " + resp + ")", "acted: wrote " + out} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		var record map[string]string
		raw, err := os.ReadFile(out)
		if err != nil || json.Unmarshal(raw, &record) != nil {
			t.Fatalf("the action's record: %v\n%s", err, raw)
		}
		if record["request"] != id || record["response"] != resp || record["approved_by"] != b.human.ID {
			t.Errorf("record %v; want request %s, response %s, by %s", record, id, resp, b.human.ID)
		}
		// The request as stored names its options; the response refers to it.
		m, err := b.agent.Client.Message(context.Background(), resp)
		if err != nil || m.Type != typeResponse || m.Refs == nil || len(m.Refs.Messages) != 1 || m.Refs.Messages[0] != id {
			t.Errorf("response as the agent's daemon holds it: %+v, %v", m, err)
		}
	})

	t.Run("reject", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "approved.json")
		p, id := b.ask(t, "reject", out, "--approver", b.human.ID)
		b.answer(t, b.human, "reject", "--ref", id, "--data", `{"decision":"reject","comment":"not on a Friday"}`)
		if code := exitCode(t, p.Wait(30*time.Second)); code != exitRejected {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitRejected, p.Stdout, p.Stderr)
		}
		if stdout := p.Stdout.String(); !strings.Contains(stdout, "rejected by "+b.human.ID) || !strings.Contains(stdout, ": not on a Friday\n") {
			t.Errorf("stdout does not give the rejecter and comment:\n%s", stdout)
		}
		noAction(t, out)
	})

	t.Run("only approvers count", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "approved.json")
		p, id := b.ask(t, "approvers", out, "--approver", b.human.ID)
		// Not valid: from a node that is not an approver (the agent's
		// own), not referencing the request, and not a decision.
		ignored := []struct {
			from *testbed.Daemon
			args []string
			why  string
		}{
			{b.agent, []string{"--ref", id, "--data", `{"decision":"approve"}`}, "not an approver"},
			{b.human, []string{"--data", `{"decision":"approve"}`}, "it does not reference this request"},
			{b.human, []string{"--ref", id, "--data", `{"decision":"maybe"}`}, `its decision is neither "approve" nor "reject"`},
		}
		for _, ig := range ignored {
			rid := b.answer(t, ig.from, "approvers", ig.args...)
			p.WaitOutput(30*time.Second, "ignored response "+rid+" from "+ig.from.ID+": "+ig.why)
		}
		if p.Exited() {
			t.Fatalf("the agent ended on an invalid response\nstdout:\n%s\nstderr:\n%s", p.Stdout, p.Stderr)
		}
		noAction(t, out)
		resp := b.answer(t, b.human, "approvers", "--ref", id, "--data", `{"decision":"approve","comment":"go"}`)
		if code := exitCode(t, p.Wait(30*time.Second)); code != exitApproved {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitApproved, p.Stdout, p.Stderr)
		}
		if stdout := p.Stdout.String(); !strings.Contains(stdout, "approved by "+b.human.ID+" (response "+resp+"): go\n") {
			t.Errorf("the approver's response did not decide:\n%s", stdout)
		}
		if _, err := os.Stat(out); err != nil {
			t.Errorf("no action after approval: %v", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "approved.json")
		start := time.Now()
		p, _ := b.ask(t, "timeout", out, "--approver", b.human.ID, "--timeout", "2s")
		if code := exitCode(t, p.Wait(30*time.Second)); code != exitTimedOut {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitTimedOut, p.Stdout, p.Stderr)
		}
		if d := time.Since(start); d < 2*time.Second {
			t.Errorf("gave up after %v, before its 2s timeout", d)
		}
		if stderr := p.Stderr.String(); !strings.Contains(stderr, "within 2s; not acting") {
			t.Errorf("stderr does not say it timed out:\n%s", stderr)
		}
		noAction(t, out)
	})
}

// ask starts the agent in space (joined on the human's daemon too) and
// waits until it has printed its request and the human's daemon holds it.
func (b *bed) ask(t *testing.T, space, out string, args ...string) (*testbed.Proc, string) {
	t.Helper()
	if _, err := b.human.Client.Join(context.Background(), space); err != nil {
		t.Fatal(err)
	}
	p := testbed.Run(t, nil, []string{"WEFT_HOME=" + b.agent.Home}, b.bin, append([]string{"--space", space, "--out", out}, args...)...)
	stdout := p.WaitOutput(30*time.Second, "  reject:  ")
	first, _, _ := strings.Cut(stdout, "\n")
	fields := strings.Fields(first) // checkpoint request ID in SPACE: TITLE
	if len(fields) < 5 || fields[0] != "checkpoint" || fields[3] != "in" {
		t.Fatalf("first line %q", first)
	}
	id := fields[2]
	testbed.Poll(t, 30*time.Second, "the human's daemon to hold the request", func() (bool, string) {
		m, err := b.human.Client.Message(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		var r Request
		if err := json.Unmarshal(m.Content, &r); err != nil || m.Type != typeRequest || len(r.Options) != 2 || r.Title != "write "+out {
			t.Fatalf("request %s %s: %v", m.Type, m.Content, err)
		}
		return true, ""
	})
	return p, id
}

// answer sends a checkpoint.response with the weft CLI on daemon d and
// returns its ID.
func (b *bed) answer(t *testing.T, d *testbed.Daemon, space string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(d.CLI(t).OK(append([]string{"send", space, "--type", "checkpoint.response"}, args...)...))
}

// commandLine returns the rest of the line of p's stdout that starts with
// prefix.
func commandLine(t *testing.T, p *testbed.Proc, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(p.Stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
	t.Fatalf("no line %q in\n%s", prefix, p.Stdout)
	return ""
}

// exitCode is the exit code of a process that ended with err.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// noAction fails the test if the action's file exists.
func noAction(t *testing.T, out string) {
	t.Helper()
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent acted (%s: %v)", out, err)
	}
}
