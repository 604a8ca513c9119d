package main

import (
	"bytes"
	"context"
	"flag"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runIn runs the weft CLI in this process and returns its outputs.
func runIn(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestEveryCommandHelp: `weft CMD --help` and `weft help CMD` print, on
// stdout, the synopsis with the command's arguments, a description and
// every flag of the command; and every --flag the synopsis names is one the
// command takes. It covers the commands added to the table later too.
func TestEveryCommandHelp(t *testing.T) {
	flagRE := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := runIn(c.name, "--help")
			if code != 0 || errs != "" {
				t.Fatalf("weft %s --help: exit %d, stderr %q", c.name, code, errs)
			}
			synopsis := "usage: weft " + c.name + " " + c.args + "\n"
			if !strings.HasPrefix(out, synopsis) {
				t.Errorf("weft %s --help does not start with %q:\n%s", c.name, synopsis, out)
			}
			if help, _, _ := runIn("help", c.name); help != out {
				t.Errorf("weft help %s differs from weft %s --help:\n%s\n---\n%s", c.name, c.name, help, out)
			}
			fs := flagSetOf(c)
			if fs == nil {
				t.Fatalf("weft %s makes no flag set (use e.flags)", c.name)
			}
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(out, "\n  --"+f.Name) {
					t.Errorf("weft %s --help does not list --%s", c.name, f.Name)
				}
			})
			for _, m := range flagRE.FindAllStringSubmatch(c.args, -1) {
				if fs.Lookup(m[1]) == nil && !subcommandFlag(c, m[1]) {
					t.Errorf("the synopsis of weft %s names --%s, which it does not take", c.name, m[1])
				}
			}
		})
	}
}

// subcommandFlag reports whether a flag the synopsis names belongs to one of
// the command's subcommands (weft trust add --name).
func subcommandFlag(c command, name string) bool {
	for _, sub := range strings.Fields(c.args) {
		if !regexp.MustCompile(`^[a-z]+$`).MatchString(sub) {
			continue
		}
		e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
		_ = c.run(context.Background(), e, []string{sub, "--help"})
		if e.fs != nil && e.fs.Lookup(name) != nil {
			return true
		}
	}
	return false
}

// TestFlagErrorOneLine: a mistake in the flags prints one line and the
// synopsis on stderr (not the whole flag list), and exits 2.
func TestFlagErrorOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"send", "lab", "--bogus"},
		{"read", "lab", "--limit", "many"},
		{"--bogus", "status"},
	} {
		out, errs, code := runIn(args...)
		lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[1], "usage: weft ") {
			t.Errorf("weft %s: exit %d, stdout %q, stderr (%d lines):\n%s", strings.Join(args, " "), code, out, len(lines), errs)
		}
	}
}

// TestCompletion: the completion scripts hold every command and its flags;
// the bash one completes commands and flags when bash runs it.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, errs, code := runIn("completion", sh)
		if code != 0 {
			t.Fatalf("weft completion %s: exit %d: %s", sh, code, errs)
		}
		for _, c := range commands() {
			if !strings.Contains(out, c.name) {
				t.Errorf("the %s completion lacks the command %s", sh, c.name)
			}
		}
		for _, f := range []string{"bootstrap", "follow", "exec"} {
			if !strings.Contains(out, f) {
				t.Errorf("the %s completion lacks the flag --%s", sh, f)
			}
		}
		if path, err := exec.LookPath(sh); err == nil && sh != "bash" {
			if b, err := exec.Command(path, "-n", "-c", out).CombinedOutput(); err != nil && sh == "zsh" {
				t.Errorf("zsh -n: %v\n%s", err, b)
			}
		}
	}
	if _, _, code := runIn("completion", "tcsh"); code != 2 {
		t.Errorf("weft completion tcsh: exit %d, want 2", code)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, _, _ := runIn("completion", "bash")
	complete := func(words ...string) string {
		t.Helper()
		prog := script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _weft; echo \"${COMPREPLY[*]}\"\n"
		b, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, b)
		}
		return strings.TrimSpace(string(b))
	}
	if got := complete("weft", "sta"); got != "status" {
		t.Errorf("weft sta<TAB> = %q, want status", got)
	}
	if got := complete("weft", "--home", "/tmp/h", "rea"); got != "read" {
		t.Errorf("weft --home H rea<TAB> = %q, want read", got)
	}
	if got := complete("weft", "read", "lab", "--fo"); got != "--follow" {
		t.Errorf("weft read lab --fo<TAB> = %q, want --follow", got)
	}
	if got := complete("weft", "completion", "f"); got != "fish" {
		t.Errorf("weft completion f<TAB> = %q, want fish", got)
	}
}
