package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

func fastSweep(c *Config) { c.SweepInterval = 50 * time.Millisecond }

// TestTTLExpiry: a message whose TTL ends stops being served (by ID, in
// reads and to peers) and is then removed; others stay.
func TestTTLExpiry(t *testing.T) {
	n, c := startNode(t, fastSweep)
	ctx := context.Background()
	if _, err := c.Join(ctx, "ephemeral"); err != nil {
		t.Fatal(err)
	}
	keep, err := c.SendText(ctx, "ephemeral", "stays")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.Send(ctx, "ephemeral", api.SendRequest{Content: json.RawMessage(`{"text":"one second"}`), TTL: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Message(ctx, gone.ID); err != nil {
		t.Fatalf("fresh message with a TTL not served: %v", err)
	}
	eventually(t, 15*time.Second, "the message to expire", func() bool {
		_, err := c.Message(ctx, gone.ID)
		var e *client.Error
		return errors.As(err, &e) && e.Status == http.StatusNotFound
	})
	if got := readAll(t, c, "ephemeral"); len(got) != 1 || got[0] != keep.ID {
		t.Fatalf("read after expiry lists %v, want only %s", got, keep.ID)
	}
	id, _ := protocol.ParseID(gone.ID)
	if _, ok, _ := n.node.Store().Wire(protocol.SpaceID("ephemeral"), id); ok {
		t.Error("expired message still served to peers")
	}
	eventually(t, 15*time.Second, "the sweep to remove it", func() bool {
		has, err := n.node.Store().Has(id)
		return err == nil && !has
	})
}

// TestRetention: a space keeps its newest max_count messages; a node that
// joins with such a retention fetches history but keeps only that much,
// and later syncs fetch nothing again; bad retentions are refused.
func TestRetention(t *testing.T) {
	a, ca := startNode(t, nil)
	ctx := context.Background()
	if _, err := ca.Join(ctx, "bounded"); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := range 12 {
		m, err := ca.SendText(ctx, "bounded", fmt.Sprintf("m%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m.ID)
	}
	b, cb := startNode(t, func(c *Config) { fastSweep(c); bootstrapTo(a)(c) })
	sp, err := cb.JoinSpace(ctx, api.JoinRequest{Name: "bounded", Retention: &api.Retention{MaxCount: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if sp.Retention == nil || sp.Retention.MaxCount != 5 {
		t.Fatalf("joined space reports retention %+v", sp.Retention)
	}
	space := protocol.SpaceID("bounded")
	eventually(t, 30*time.Second, "b to fetch and trim to 5", func() bool {
		got := readAll(t, cb, "bounded")
		return len(got) == 5 && strings.Join(got, ",") != "" && containsAll(sent[7:], got)
	})
	st, err := b.node.Mesh().Sync(ctx, a.ID(), space)
	if err != nil {
		t.Fatal(err)
	}
	if st.Received != 0 {
		t.Errorf("a sync after trimming fetched %d messages again", st.Received)
	}
	if count(t, a, space) != 12 {
		t.Errorf("a lost messages to b's retention")
	}

	for _, bad := range []string{
		`{"name":"x","retention":{"max_count":-1}}`,
		`{"name":"x","retention":{"max_age":"soon"}}`,
		`{"name":"x","retention":{"max_age":"-5m"}}`,
	} {
		resp, err := rawHTTP(a.cfg.SocketPath()).Post("http://weft/v1/spaces", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, resp.StatusCode)
		}
	}
	if _, err := cb.JoinSpace(ctx, api.JoinRequest{Name: "bounded", Retention: &api.Retention{MaxAge: "720h"}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.node.Store().Space(space)
	if err != nil || got.Retention != (store.Retention{MaxAge: 720 * time.Hour}) {
		t.Errorf("retention after rejoin: %+v, %v", got.Retention, err)
	}
}

func containsAll(want, got []string) bool {
	set := make(map[string]bool, len(got))
	for _, g := range got {
		set[g] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// TestDeliveredOnce: a message that arrives many times at once — by gossip,
// by sync, and repeated — is stored once and reaches a follower once.
func TestDeliveredOnce(t *testing.T) {
	a, ca := startNode(t, nil)
	b, cb := startNode(t, bootstrapTo(a))
	ctx := context.Background()
	for _, c := range []*client.Client{ca, cb} {
		if _, err := c.Join(ctx, "once"); err != nil {
			t.Fatal(err)
		}
	}
	space := protocol.SpaceID("once")
	eventually(t, 30*time.Second, "a and b to be topic peers", func() bool {
		return len(a.node.Mesh().SpacePeers(space)) == 1 && len(b.node.Mesh().SpacePeers(space)) == 1
	})

	got := make(chan api.Message, 10)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- cb.Follow(fctx, "once", "", func(m api.Message) error { got <- m; return nil })
	}()
	defer func() { cancel(); <-done }()

	m, err := a.node.Send(ctx, space, node.Post{Content: json.RawMessage(`{"text":"once"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := b.node.Accept(ctx, m.Message); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Go(func() {
		if _, err := b.node.Mesh().Sync(ctx, a.ID(), space); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	marker, err := a.node.Send(ctx, space, node.Post{Content: json.RawMessage(`{"text":"marker"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != marker.ID.String() {
		select {
		case fm := <-got:
			seen = append(seen, fm.ID)
		case <-time.After(30 * time.Second):
			t.Fatalf("follower saw %v, never the marker", seen)
		}
	}
	if len(seen) != 2 || seen[0] != m.ID.String() {
		t.Fatalf("follower saw %v, want the message once then the marker", seen)
	}
	if n := count(t, b, space); n != 2 {
		t.Fatalf("b stores %d messages, want 2", n)
	}
}
