package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// TestOfflineCatchUp: a daemon process is stopped, 500 messages are sent
// in its space, and once started again it catches up on all of them by
// itself (it redials the peers it knew and syncs), each exactly once.
func TestOfflineCatchUp(t *testing.T) {
	const missed = 500
	a := newCLI(t)
	b := newCLI(t)
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	_, aAddrs := a.id()
	db := startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddrs[0])
	a.OK("join", "ops")
	b.OK("join", "ops")
	b.waitSpacePeers(1)
	first := a.OK("send", "ops", "--text", "before the outage")
	b.waitFor("the first message on b", func() bool { return len(b.readJSON("ops")) == 1 })

	if err := db.Stop(); err != nil {
		t.Fatalf("b did not stop cleanly: %v", err)
	}
	ca := &client.Client{Home: a.Home}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < missed; i += 4 {
				if _, err := ca.SendText(context.Background(), "ops", fmt.Sprintf("while b was away %d", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	start := time.Now()
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0") // no --bootstrap: it remembers a
	b.waitFor("b to catch up", func() bool { return len(b.readJSON("ops")) >= missed+1 })
	t.Logf("b caught up on %d messages %v after its start", missed, time.Since(start).Round(time.Millisecond))

	onA, onB := ids(a.readJSON("ops")), ids(b.readJSON("ops"))
	if len(onB) != missed+1 || onB[0] != strings.TrimSpace(first) {
		t.Fatalf("b reads %d messages (first %q), want %d starting with the one sent before", len(onB), onB[0], missed+1)
	}
	slices.Sort(onA)
	slices.Sort(onB)
	if !slices.Equal(onA, onB) {
		t.Fatal("b's messages differ from a's")
	}
	if len(slices.Compact(onB)) != missed+1 {
		t.Fatal("b lists a message twice")
	}

	// Retention per space from the CLI.
	b.OK("join", "ops", "--keep-count", "100", "--keep-age", "720h")
	if out := b.OK("spaces"); !strings.Contains(out, "keeps newest 100, younger than 720h0m0s") {
		t.Errorf("spaces does not show the retention: %q", out)
	}
	if _, errs, code := b.Run("join", "ops", "--keep-count", "-1"); code == 0 || !strings.Contains(errs, "negative") {
		t.Errorf("negative --keep-count: exit %d, stderr %q", code, errs)
	}
}

func ids(ms []api.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
