package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
	"github.com/weftmesh/weft/store/storetest"
)

// crashChildEnv names the store directory a re-run of the test binary
// writes into until it is killed (see TestKillDuringWrites).
const crashChildEnv = "WEFT_STORE_CRASH_CHILD"

var crashSpace = storetest.ID("crash/space")

// TestMain lets the test binary act as the writer that
// TestKillDuringWrites kills.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild writes into the store at dir until it is killed: local
// messages (durable Puts, each acknowledged on stdout once PutWithin
// returns), network messages one by one (PutRelayed) and in batches
// (PutBatch), all in one graph, from several goroutines at once.
func crashChild(dir string) {
	s, err := store.Open(store.Options{Dir: dir, SyncInterval: time.Hour})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			var last protocol.ID
			for i := 0; ; i++ {
				name := fmt.Sprintf("w%d/%d", w, i)
				var prev []protocol.ID
				if !last.IsZero() {
					prev = append(prev, last)
				}
				m := storetest.Msg(crashSpace, name, prev...)
				m.From = fmt.Sprint("sender", w)
				switch w {
				case 0, 1: // local sends
					if _, _, err := s.PutWithin(ctx, m, store.Quota{}); err != nil {
						fmt.Println("put:", err)
						os.Exit(1)
					}
					out.Lock()
					fmt.Println("ack", name)
					out.Unlock()
				case 2: // gossip
					if _, _, err := s.PutRelayed(ctx, m, store.Quota{}); err != nil {
						fmt.Println("put:", err)
						os.Exit(1)
					}
				default: // sync: a batch of children, parents after
					batch := []store.Message{m}
					for j := range 40 {
						c := storetest.Msg(crashSpace, fmt.Sprintf("%s/%d", name, j), m.ID, storetest.ID(fmt.Sprintf("w0/%d", i)))
						batch = append([]store.Message{c}, batch...)
					}
					if _, err := s.PutBatch(ctx, batch, store.Quota{}); err != nil {
						fmt.Println("batch:", err)
						os.Exit(1)
					}
				}
				last = m.ID
			}
		})
	}
	wg.Wait()
}

// TestKillDuringWrites kills (SIGKILL) a process writing local and
// network messages into a store, then checks on reopening that every
// local message it acknowledged is there and that the store is
// consistent: each stored message once in its space's order, heads
// exactly the messages no stored message names, usage counting exactly
// what is stored.
func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a writer process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		dir := t.TempDir()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[protocol.ID]bool{}
		sc := bufio.NewScanner(stdout)
		for len(acked) < 300+300*round && sc.Scan() {
			line := sc.Text()
			name, ok := strings.CutPrefix(line, "ack ")
			if !ok {
				t.Fatalf("writer: %s", line)
			}
			acked[storetest.ID(name)] = true
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		s := openDisk(t, dir)
		entries := storetest.ReadAll(t, s, crashSpace, 500)
		stored := map[protocol.ID]bool{}
		named := map[protocol.ID]bool{}
		var usage store.Usage
		for _, e := range entries {
			if stored[e.ID] {
				t.Fatalf("round %d: %s twice in the order", round, e.ID)
			}
			stored[e.ID] = true
			for _, p := range e.Prev {
				named[p] = true
			}
			usage.Count++
			usage.Bytes += int64(len(e.Raw))
		}
		for id := range acked {
			if !stored[id] {
				t.Fatalf("round %d: acknowledged local message %s lost", round, id)
			}
		}
		heads, err := s.Heads(crashSpace)
		if err != nil {
			t.Fatal(err)
		}
		isHead := map[protocol.ID]bool{}
		for _, h := range heads {
			isHead[h] = true
			if !stored[h] || named[h] {
				t.Fatalf("round %d: head %s: stored %v, named by a child %v", round, h, stored[h], named[h])
			}
		}
		for id := range stored {
			if !named[id] && !isHead[id] {
				t.Fatalf("round %d: %s is named by no message and not a head", round, id)
			}
		}
		if u, err := s.Usage(crashSpace); err != nil || u != usage {
			t.Fatalf("round %d: usage %+v (%v), counted %+v", round, u, err, usage)
		}
		if n, err := s.Count(crashSpace); err != nil || n != len(stored) {
			t.Fatalf("round %d: Count %d (%v), stored %d", round, n, err, len(stored))
		}
		t.Logf("round %d: %d acknowledged, %d stored", round, len(acked), len(stored))
	}
}
