// Package python_test runs the Python client of weft (weft.py) and its
// example agent (agent.py) against real weft daemons: the Python unit tests
// in test_weft.py, and the agent as a process on one daemon whose handlers
// and request DMs are used from the other through the Go client. The tests
// skip when no python3 ≥ 3.9 is on PATH.
package python_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// pyEnv keeps Python from leaving __pycache__ behind and from buffering
// output the tests wait for.
var pyEnv = []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}

// python3 returns the path of a python3 of version 3.9 or newer, or skips
// the test.
func python3(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH: skipping the Python client's tests")
	}
	out, err := exec.Command(bin, "-c", "import sys; print('%d.%d' % sys.version_info[:2]); sys.exit(sys.version_info < (3, 9))").CombinedOutput()
	if err != nil {
		t.Skipf("python3 is %s, the Python client needs 3.9 or newer: skipping its tests", strings.TrimSpace(string(out)))
	}
	return bin
}

// noPycache fails the test if it leaves a __pycache__ directory here that
// was not here before.
func noPycache(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("__pycache__"); err == nil {
		return // someone ran Python here by hand; not ours to judge
	}
	t.Cleanup(func() {
		if _, err := os.Stat("__pycache__"); err == nil {
			t.Errorf("the test left examples/python/__pycache__ behind")
		}
	})
}

func TestPython(t *testing.T) {
	py := python3(t)
	noPycache(t)
	ds := testbed.Mesh(t, 2)
	t.Run("unittest", func(t *testing.T) { runUnittest(t, py, ds[0], ds[1]) })
	t.Run("agent", func(t *testing.T) { runAgent(t, py, ds[0], ds[1]) })
}

// runUnittest runs test_weft.py against daemons a and b and fails with
// its output if any test fails or is skipped.
func runUnittest(t *testing.T, py string, a, b *testbed.Daemon) {
	env := append([]string{
		"WEFT_TEST_HOME_A=" + a.Home, "WEFT_TEST_ID_A=" + a.ID,
		"WEFT_TEST_HOME_B=" + b.Home, "WEFT_TEST_ID_B=" + b.ID,
	}, pyEnv...)
	p := testbed.Run(t, nil, env, py, "-m", "unittest", "-v", "test_weft")
	err := p.Wait(5 * time.Minute)
	out := p.Stderr.String() // unittest reports on stderr
	if err != nil {
		t.Fatalf("python3 -m unittest -v test_weft: %v\n%s%s", err, p.Stdout, out)
	}
	ran := regexp.MustCompile(`(?m)^Ran (\d+) tests? in .*$`).FindString(out)
	if ran == "" || !regexp.MustCompile(`(?m)^OK$`).MatchString(out) {
		t.Fatalf("unittest did not report OK:\n%s", out)
	}
	if strings.Contains(out, "skipped") {
		t.Fatalf("unittest skipped tests although the daemons are running:\n%s", out)
	}
	t.Logf("%s", out)
}

// runAgent runs agent.py on daemon b and uses it from daemon a.
func runAgent(t *testing.T, py string, a, b *testbed.Daemon) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const space = "go-agents"
	if _, err := a.Client.Join(ctx, space); err != nil {
		t.Fatal(err)
	}
	agent := testbed.Run(t, nil, append([]string{"WEFT_HOME=" + b.Home}, pyEnv...), py, "agent.py", "--space", space, "--name", "py-from-go", "--allow", a.ID)
	agent.WaitOutput(30*time.Second, "ready "+b.ID)

	text := "one two three\nfour"
	input := jsonOf(t, map[string]any{"text": text})
	totals := map[string]any{"words": 4.0, "lines": 2.0, "chars": float64(len(text))}

	t.Run("unary", func(t *testing.T) {
		res, err := a.Client.Invoke(ctx, api.InvokeRequest{Peer: b.ID, Name: "word_count", Input: input})
		if err != nil {
			t.Fatal(err)
		}
		if got := decode(t, res.Output); !reflect.DeepEqual(got, totals) {
			t.Errorf("word_count = %v, want %v", got, totals)
		}
	})

	t.Run("stream", func(t *testing.T) {
		var kinds []string
		var data []any
		err := a.Client.InvokeStream(ctx, api.InvokeRequest{Peer: b.ID, Name: "word_count", Input: input}, func(f api.Frame) error {
			kinds = append(kinds, f.Kind)
			if len(f.Data) > 0 {
				data = append(data, decode(t, f.Data))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []any{
			map[string]any{"line": 1.0, "words": 3.0},
			map[string]any{"line": 2.0, "words": 1.0},
			totals,
		}
		if !reflect.DeepEqual(kinds, []string{"started", "delta", "delta", "final"}) || !reflect.DeepEqual(data, want) {
			t.Errorf("frames %v with data %v, want started, 2 deltas, final with %v", kinds, data, want)
		}
	})

	t.Run("error", func(t *testing.T) {
		_, err := a.Client.Invoke(ctx, api.InvokeRequest{Peer: b.ID, Name: "summarize", Input: json.RawMessage(`{"text": 5}`)})
		if !client.IsCode(err, "handler_failed") {
			t.Errorf("summarize with a bad input: %v, want handler_failed", err)
		}
	})

	t.Run("announced", func(t *testing.T) {
		m := firstMessage(t, func(fn func(api.Message) error) error { return a.Client.Follow(ctx, space, "", fn) },
			func(m api.Message) bool { return m.Type == "team.hello" && m.From == b.ID })
		if got := decode(t, m.Content).(map[string]any)["name"]; got != "py-from-go" {
			t.Errorf("team.hello name %v, want py-from-go", got)
		}
	})

	t.Run("request DM", func(t *testing.T) {
		page, err := a.Client.Inbox(ctx, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Client.DM(ctx, api.DMRequest{To: b.ID, Kind: "request", Content: jsonOf(t, map[string]any{"task": "word_count", "text": text})})
		if err != nil {
			t.Fatal(err)
		}
		m := firstMessage(t, func(fn func(api.Message) error) error { return a.Client.FollowInbox(ctx, page.Next, fn) },
			func(m api.Message) bool {
				return m.Refs != nil && len(m.Refs.Messages) == 1 && m.Refs.Messages[0] == res.Message.ID
			})
		if m.Type != "response" || m.From != b.ID || !reflect.DeepEqual(decode(t, m.Content), totals) {
			t.Errorf("answer %s from %s: %s, want a response with %v", m.Type, m.From, m.Content, totals)
		}
		if m.Meta["correlation"] == "" || m.Meta["correlation"] != res.Message.Meta["correlation"] {
			t.Errorf("answer correlation %q, request's %q", m.Meta["correlation"], res.Message.Meta["correlation"])
		}
	})

	agent.Stop() // SIGTERM
	if err := agent.Wait(10 * time.Second); err != nil {
		t.Fatalf("agent.py exited with %v after SIGTERM\nstdout:\n%s\nstderr:\n%s", err, agent.Stdout, agent.Stderr)
	}
	if out := agent.Stdout.String(); !strings.Contains(out, "\nbye\n") {
		t.Errorf("agent.py did not say bye:\n%s", out)
	}
}

// errFound ends a follow once the wanted message is there.
var errFound = errors.New("found")

// firstMessage follows a stream (follow calls fn for each message) until a
// message matches want, and returns it.
func firstMessage(t *testing.T, follow func(fn func(api.Message) error) error, want func(api.Message) bool) api.Message {
	t.Helper()
	var found api.Message
	err := follow(func(m api.Message) error {
		if want(m) {
			found = m
			return errFound
		}
		return nil
	})
	if !errors.Is(err, errFound) {
		t.Fatalf("message not found: %v", err)
	}
	return found
}

func jsonOf(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t testing.TB, b json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}
