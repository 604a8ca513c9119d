package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

func TestMain(m *testing.M) { testbed.Main(m) }

const pkg = "github.com/weftmesh/weft/examples/stream"

// answerLength is serve's default --length, which the tests rely on.
const answerLength = 80

// setup starts two daemons, A (the asker's) and B, and on B two servers
// that A may call: "fast" (no pacing), which allows A by its peer ID, and
// "slow" (10 tokens/s, so a call lasts seconds and can be cancelled
// midway), which allows the peers B trusts, A among them.
func setup(t *testing.T) (bin string, a, b *testbed.Daemon, slow *testbed.Proc) {
	t.Helper()
	bin = testbed.Build(t, pkg)
	ds := testbed.Mesh(t, 2)
	a, b = ds[0], ds[1]
	if _, err := b.Client.Trust(t.Context(), a.ID, "asker"); err != nil {
		t.Fatal(err)
	}
	fast := testbed.Run(t, nil, nil, bin, "serve", "--home", b.Home, "--name", "fast", "--rate", "0", "--allow", a.ID)
	slow = testbed.Run(t, nil, nil, bin, "serve", "--home", b.Home, "--name", "slow", "--rate", "10")
	fast.WaitOutput(30*time.Second, `serving "fast" as `+b.ID)
	slow.WaitOutput(30*time.Second, `serving "slow" as `+b.ID)
	return bin, a, b, slow
}

// exitCode returns a finished process's exit code.
func exitCode(t testing.TB, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("process failed to run: %v", err)
	}
	return ee.ExitCode()
}

func TestStream(t *testing.T) {
	bin, a, b, slow := setup(t)

	t.Run("complete text", func(t *testing.T) {
		for _, prompt := range []string{
			"How does a mesh stream an answer?",
			"tell me a story about threads",
			"?",
		} {
			p := testbed.Run(t, nil, nil, bin, "ask", b.ID, prompt, "--home", a.Home, "--name", "fast")
			if code := exitCode(t, p.Wait(60*time.Second)); code != 0 {
				t.Fatalf("ask %q: exit %d\n%s", prompt, code, p.Stderr)
			}
			want := strings.Join(Generate(prompt, answerLength), "") + "\n"
			if got := p.Stdout.String(); got != want {
				t.Errorf("ask %q printed\n%q\nwant\n%q", prompt, got, want)
			}
			stats := p.Stderr.String()
			if !regexp.MustCompile(`^first token after \S+, \d+ tokens in \S+ \(\d+\.\d tokens/s\) \(finish: (stop|length)\)\n$`).MatchString(stats) {
				t.Errorf("ask %q: stats %q", prompt, stats)
			}
		}
	})

	t.Run("frames in order", func(t *testing.T) {
		prompt := "show me the frames"
		p := testbed.Run(t, nil, nil, bin, "ask", "--frames", "--home", a.Home, "--name", "fast", b.ID, prompt)
		if code := exitCode(t, p.Wait(60*time.Second)); code != 0 {
			t.Fatalf("exit %d\n%s", code, p.Stderr)
		}
		want := Generate(prompt, answerLength)
		var frames []api.Frame
		sc := bufio.NewScanner(strings.NewReader(p.Stdout.String()))
		for sc.Scan() {
			var f api.Frame
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatalf("frame line %q: %v", sc.Text(), err)
			}
			frames = append(frames, f)
		}
		if len(frames) != len(want)+2 {
			t.Fatalf("%d frames, want started + %d deltas + final:\n%s", len(frames), len(want), p.Stdout)
		}
		var text strings.Builder
		for i, f := range frames {
			if f.Seq != uint64(i) {
				t.Fatalf("frame %d has seq %d: seqs must go up by exactly 1 from 0", i, f.Seq)
			}
			kind := "delta"
			switch i {
			case 0:
				kind = "started"
			case len(frames) - 1:
				kind = "final"
			}
			if f.Kind != kind {
				t.Fatalf("frame %d is %q, want %q", i, f.Kind, kind)
			}
			if kind == "delta" {
				var d Delta
				if err := json.Unmarshal(f.Data, &d); err != nil {
					t.Fatal(err)
				}
				text.WriteString(d.Token)
			}
		}
		if got := text.String(); got != strings.Join(want, "") {
			t.Errorf("deltas spell\n%q\nwant\n%q", got, strings.Join(want, ""))
		}
		var fin Final
		if err := json.Unmarshal(frames[len(frames)-1].Data, &fin); err != nil || fin.Tokens != len(want) {
			t.Errorf("final frame %s (%v), want %d tokens", frames[len(frames)-1].Data, err, len(want))
		}
	})

	// Stopping ask midway must stop the generator on the far side.
	cancels := []struct {
		name     string
		args     []string
		stop     func(t *testing.T, p *testbed.Proc) // nil: ask stops by itself
		exitCode int
		note     string
	}{
		{name: "max-tokens", args: []string{"--max-tokens", "3"}, exitCode: 0, note: "stopped at --max-tokens 3"},
		{name: "SIGINT", exitCode: 130, note: "interrupted", stop: func(t *testing.T, p *testbed.Proc) {
			// Interrupt once two tokens have been printed.
			testbed.Poll(t, 30*time.Second, "two tokens", func() (bool, string) {
				return len(strings.Fields(p.Stdout.String())) >= 2, p.Stdout.String()
			})
			if err := p.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cancels {
		t.Run("cancel by "+tc.name, func(t *testing.T) {
			prompt := "a long answer, please, for the " + tc.name + " test"
			want := Generate(prompt, answerLength)
			args := append([]string{"ask", b.ID, prompt, "--home", a.Home, "--name", "slow"}, tc.args...)
			p := testbed.Run(t, nil, nil, bin, args...)
			if tc.stop != nil {
				tc.stop(t, p)
			}
			if code := exitCode(t, p.Wait(60*time.Second)); code != tc.exitCode {
				t.Fatalf("exit %d, want %d\n%s", code, tc.exitCode, p.Stderr)
			}
			if !strings.Contains(p.Stderr.String(), tc.note) {
				t.Errorf("stderr %q does not say %q", p.Stderr, tc.note)
			}
			got := strings.TrimSuffix(p.Stdout.String(), "\n")
			n := len(strings.Fields(got))
			if n == 0 || n >= len(want) || got != strings.Join(want[:n], "") {
				t.Errorf("printed %q: want a proper prefix of %q", got, strings.Join(want, ""))
			}

			// The server logged the call with its ID, then its cancellation.
			start := regexp.MustCompile(`call (\S+) from ` + a.ID + `: ` + regexp.QuoteMeta(strconv.Quote(prompt)))
			var id string
			testbed.Poll(t, 10*time.Second, "serve to log the call", func() (bool, string) {
				m := start.FindStringSubmatch(slow.Stdout.String())
				if m != nil {
					id = m[1]
				}
				return m != nil, slow.Stdout.String()
			})
			cancelled := regexp.MustCompile(`call ` + regexp.QuoteMeta(id) + ` cancelled after (\d+) of (\d+) tokens: stopped generating`)
			var m []string
			testbed.Poll(t, 10*time.Second, "serve to report the cancellation", func() (bool, string) {
				m = cancelled.FindStringSubmatch(slow.Stdout.String())
				return m != nil, slow.Stdout.String()
			})
			sent, _ := strconv.Atoi(m[1])
			if total, _ := strconv.Atoi(m[2]); sent < n || sent >= total {
				t.Errorf("serve stopped after %d of %d tokens; ask had read %d", sent, total, n)
			}
			if strings.Contains(slow.Stdout.String(), "call "+id+" done") {
				t.Errorf("serve finished the cancelled call:\n%s", slow.Stdout)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		stranger, err := peer.IDFromPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, peer, handler, want string
		}{
			{"not a peer ID", "bob", "fast", `"bob" is not a peer ID`},
			{"unknown peer", stranger.String(), "fast", "cannot reach " + stranger.String()},
			{"no such handler", b.ID, "nosuch", `no handler for "nosuch"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := testbed.Run(t, nil, nil, bin, "ask", tc.peer, "hello", "--home", a.Home, "--name", tc.handler)
				if code := exitCode(t, p.Wait(60*time.Second)); code != 1 {
					t.Errorf("exit %d, want 1", code)
				}
				if p.Stdout.String() != "" {
					t.Errorf("stdout %q, want nothing", p.Stdout)
				}
				if e := p.Stderr.String(); !strings.HasPrefix(e, "stream: ask ") || !strings.Contains(e, tc.want) || strings.Count(e, "\n") != 1 {
					t.Errorf("stderr %q: want one line saying %q", e, tc.want)
				}
			})
		}
	})

	t.Run("weft invoke", func(t *testing.T) {
		// Any weft client of a peer the handler allows can call it; a unary
		// call gets the whole text.
		weft := a.CLI(t)
		prompt := "one answer at once"
		stdout, stderr, code, _ := weft.RunWithin(60*time.Second, "invoke", b.ID, "fast", "--data", `{"prompt": "`+prompt+`"}`)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var out struct{ Text string }
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || out.Text != strings.Join(Generate(prompt, answerLength), "") {
			t.Errorf("weft invoke printed %q (%v)", stdout, err)
		}

		_, stderr, code, _ = weft.RunWithin(60*time.Second, "invoke", b.ID, "fast", "--stream", "--data", `{"question": "no prompt"}`)
		if code == 0 || !strings.Contains(stderr, "input must be") {
			t.Errorf("a call without a prompt: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{nil, {"ask"}, {"ask", b.ID}, {"fly"}, {"serve", "extra"}} {
			p := testbed.Run(t, nil, nil, bin, args...)
			if code := exitCode(t, p.Wait(30*time.Second)); code != 2 {
				t.Errorf("stream %q: exit %d, want 2", args, code)
			}
		}
	})
}

// TestGenerate checks the generator the example serves: deterministic,
// bounded, and joined tokens form the text.
func TestGenerate(t *testing.T) {
	for _, tc := range []struct {
		prompt string
		max    int
	}{
		{"hello", 80}, {"how does a mesh work?", 10}, {"", 1}, {"streams", 200},
	} {
		a, b := Generate(tc.prompt, tc.max), Generate(tc.prompt, tc.max)
		if strings.Join(a, "|") != strings.Join(b, "|") {
			t.Errorf("Generate(%q) is not deterministic", tc.prompt)
		}
		if len(a) == 0 || len(a) > tc.max {
			t.Errorf("Generate(%q, %d): %d tokens", tc.prompt, tc.max, len(a))
		}
		if len(a) < tc.max && (len(a) < tc.max/2 || !endsSentence(a[len(a)-1])) {
			t.Errorf("Generate(%q, %d) stopped early at %q", tc.prompt, tc.max, a[len(a)-1])
		}
		for i, tok := range a {
			if strings.HasPrefix(tok, " ") != (i > 0) || strings.TrimSpace(tok) == "" {
				t.Errorf("Generate(%q): token %d is %q", tc.prompt, i, tok)
			}
		}
	}
	if x, y := Generate("one question", 80), Generate("another question", 80); strings.Join(x, "") == strings.Join(y, "") {
		t.Error("two prompts gave the same answer")
	}
}
