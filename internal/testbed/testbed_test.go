package testbed

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The process helpers, on /bin/sh rather than weft: output is captured,
// exit codes come back, and a CLI points its commands at its home.
func TestProcAndCLI(t *testing.T) {
	p := Run(t, nil, []string{"GREETING=hello"}, "/bin/sh", "-c", `echo "$GREETING out"; echo err >&2; exit 3`)
	p.WaitOutput(10*time.Second, "hello out")
	p.WaitStderr(10*time.Second, "err")
	err := p.Wait(10 * time.Second)
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 3 {
		t.Fatalf("Wait: %v, want exit status 3", err)
	}
	if !p.Exited() || !errors.Is(p.Stop(), err) {
		t.Fatalf("Stop after the end: want how it ended (%v)", err)
	}

	home := Home(t)
	c := CLI{T: t, Bin: "/bin/sh", Home: home}
	out, errs, code := c.Run("-c", `echo "$WEFT_HOME"; echo oops >&2; exit 2`)
	if strings.TrimSpace(out) != home || strings.TrimSpace(errs) != "oops" || code != 2 {
		t.Fatalf("Run: stdout %q, stderr %q, exit %d; want %q, oops, 2", out, errs, code, home)
	}
	if out := c.OK("-c", "echo fine"); out != "fine\n" {
		t.Fatalf("OK: %q", out)
	}
	if _, _, code, took := c.RunWithin(10*time.Second, "-c", "sleep 0.1"); code != 0 || took < 100*time.Millisecond {
		t.Fatalf("RunWithin: exit %d after %v", code, took)
	}

	bg := c.Start("-c", `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	bg.WaitOutput(10*time.Second, "ready")
	if err := bg.Stop(); err != nil {
		t.Fatalf("Stop of a process that exits on SIGTERM: %v", err)
	}
}
