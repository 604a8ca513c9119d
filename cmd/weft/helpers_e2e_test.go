package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// Helpers shared by the direct-message and call end-to-end tests.

// goClient returns a Go client of the home's daemon.
func (c cli) goClient() *client.Client { return &client.Client{Home: c.Home} }

// pair starts daemons a and b on loopback, b bootstrapping to a, and
// waits until they are connected. bListen is b's listen address.
func pair(t *testing.T, bListen string) (a, b cli, da, db *testbed.Daemon) {
	t.Helper()
	a = newCLI(t)
	b = newCLI(t)
	da = startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	_, aAddrs := a.id()
	db = startDaemon(t, b, "--listen", bListen, "--bootstrap", aAddrs[0])
	bID, _ := b.id()
	a.waitConnected(bID)
	return a, b, da, db
}

// waitConnected waits until the node lists peer id among its connections.
func (c cli) waitConnected(id string) {
	c.T.Helper()
	testbed.Poll(c.T, 30*time.Second, "a connection to "+id, func() (bool, string) {
		out, errs, code := c.Run("peers", "--json")
		if code != 0 {
			return false, errs
		}
		return strings.Contains(out, id), out
	})
}

// jsonLines decodes one T per non-empty line of out.
func jsonLines[T any](t testing.TB, out string) []T {
	t.Helper()
	var list []T
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("decode %q: %v", line, err)
		}
		list = append(list, v)
	}
	return list
}

// inbox runs `weft inbox --json`.
func (c cli) inbox() []api.Message {
	c.T.Helper()
	return jsonLines[api.Message](c.T, c.OK("inbox", "--json"))
}

// outbox runs `weft outbox --json` (with --dead: the dead letters).
func (c cli) outbox(dead bool) []api.Outgoing {
	c.T.Helper()
	args := []string{"outbox", "--json"}
	if dead {
		args = append(args, "--dead")
	}
	return jsonLines[api.Outgoing](c.T, c.OK(args...))
}

// startHandler starts `weft handle ARGS…` on the home's daemon and waits
// until it serves (it prints "serving …" once the daemon registered it).
func startHandler(t *testing.T, c cli, args ...string) *testbed.Proc {
	t.Helper()
	p := c.Start(append([]string{"handle"}, args...)...)
	p.WaitStderr(20*time.Second, "serving ")
	return p
}

// script writes an executable shell script into a temp dir removed when the
// test ends, and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// traceID returns the trace-id field of a traceparent ("00-TRACE-SPAN-FL").
func traceID(t *testing.T, tp string) string {
	t.Helper()
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		t.Fatalf("traceparent %q is not 00-<trace id>-<span id>-<flags>", tp)
	}
	return parts[1]
}
