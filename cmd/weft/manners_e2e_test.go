package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// TestCLIManners: what a person expects of the CLI (issue 17): weft id
// --addr prints one address another node can use; --json is JSON output on
// send, dm and invoke too, their input is --data (the old --json VALUE
// still works, with a note); --ttl takes a duration (or seconds) on send
// and dm; weft outbox --cancel; empty listings say so on a terminal; weft
// read shows the names peers are trusted under.
func TestCLIManners(t *testing.T) {
	a, b := newCLI(t), newCLI(t)
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0")
	aID, aAddrs := a.id()
	bID, _ := b.id()

	addr := strings.TrimSpace(a.OK("id", "--addr"))
	if strings.Contains(addr, "\n") || !strings.HasSuffix(addr, "/p2p/"+aID) || !strings.Contains(strings.Join(aAddrs, " "), addr) {
		t.Fatalf("weft id --addr printed %q (addresses %v)", addr, aAddrs)
	}
	b.OK("connect", addr)

	// Empty listings, on a terminal, say so (a pipe gets nothing).
	for _, args := range [][]string{{"spaces"}, {"outbox"}, {"trust", "list"}} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, home: a.Home, tty: true}
		c, _ := findCommand(args[0])
		if err := c.run(context.Background(), e, args[1:]); err != nil {
			t.Fatal(err)
		}
		if out.Len() == 0 || !strings.HasPrefix(out.String(), "no ") && !strings.Contains(out.String(), "empty") {
			t.Errorf("weft %s on a terminal with nothing to list printed %q", strings.Join(args, " "), out.String())
		}
		if piped := a.OK(args...); piped != "" {
			t.Errorf("weft %s into a pipe with nothing to list printed %q", strings.Join(args, " "), piped)
		}
	}

	a.OK("join", "lab")
	b.OK("join", "lab")
	// --data is the input, --json the output; the old --json VALUE works.
	var sent api.Message
	if err := json.Unmarshal([]byte(a.OK("send", "lab", "--data", `{"n":1}`, "--json", "--ttl", "1h")), &sent); err != nil || string(sent.Content) != `{"n":1}` {
		t.Fatalf("send --data --json: %v %+v", err, sent)
	}
	out, errs, code := a.Run("send", "lab", "--json", `{"n":2}`, "--ttl", "90")
	if code != 0 || strings.HasPrefix(out, "{") || !strings.Contains(errs, "--json VALUE is now --data VALUE") {
		t.Fatalf("the old send --json VALUE: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, errs, code := a.Run("send", "lab", "--text", "x", "--ttl", "soon"); code != 2 || !strings.Contains(errs, "duration") {
		t.Errorf("send --ttl soon: exit %d, %q", code, errs)
	}

	// A DM to a peer that is nowhere waits in the outbox; --cancel gives it up.
	nowhere := testbed.Start(t)
	nowhereID := nowhere.ID
	if err := nowhere.Stop(); err != nil {
		t.Fatal(err)
	}
	var res api.DMResult
	if err := json.Unmarshal([]byte(a.OK("dm", nowhereID, "--text", "hello?", "--ttl", "10m", "--json")), &res); err != nil || res.Message.ID == "" {
		t.Fatalf("dm --json: %v %+v", err, res)
	}
	if list := a.outbox(false); len(list) != 1 || list[0].ID != res.Message.ID {
		t.Fatalf("outbox: %+v", list)
	}
	if got := strings.TrimSpace(a.OK("outbox", "--cancel", res.Message.ID)); got != "cancelled "+res.Message.ID {
		t.Errorf("outbox --cancel printed %q", got)
	}
	if list := a.outbox(false); len(list) != 0 {
		t.Errorf("outbox after --cancel: %+v", list)
	}
	if dead := a.outbox(true); len(dead) != 1 || dead[0].Reason != "cancelled" {
		t.Errorf("dead letters after --cancel: %+v", dead)
	}
	if _, errs, code := a.Run("outbox", "--cancel", res.Message.ID); code != 1 || !strings.Contains(errs, "no direct message") {
		t.Errorf("a second --cancel: exit %d, %q", code, errs)
	}

	// weft read shows the name a peer is trusted under.
	a.OK("trust", "add", bID, "--name", "bob")
	id := strings.TrimSpace(b.OK("send", "lab", "--text", "from bob"))
	testbed.Poll(t, 30*time.Second, "a to receive b's message", func() (bool, string) {
		out := a.OK("read", "lab")
		return strings.Contains(out, id), out
	})
	for _, line := range strings.Split(a.OK("read", "lab"), "\n") {
		if strings.Contains(line, id) && !strings.Contains(line, "bob …"+bID[len(bID)-8:]) {
			t.Errorf("weft read shows b's message without its name: %q", line)
		}
	}
	_ = aID
}

// TestPrintMessageDates: a message of another day shows its date, one of
// today its time only.
func TestPrintMessageDates(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-time.Hour), "11:00:00  "},
		{now.Add(-25 * time.Hour), "2026-03-03 11:00:00  "},
	} {
		var out bytes.Buffer
		m := api.Message{ID: "m1", From: "12D3KooWabcdefghijklmnop", Type: "text", CreatedAt: tc.at, Content: []byte(`{"text":"hi"}`)}
		if err := printMessageAs(&out, m, map[string]string{m.From: "ann"}, now); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), tc.want+"ann …ijklmnop") {
			t.Errorf("printed %q, want it to start with %q", out.String(), tc.want+"ann …ijklmnop")
		}
	}
}
