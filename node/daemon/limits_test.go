package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// TestRaisedLimitsReadBack: a message accepted under raised limits reads
// back (page, message, thread, events) after the daemon restarts with the
// default limits again. Stored messages were read under the default limits
// before, so an 80-parent message made the whole page unreadable (503).
func TestRaisedLimitsReadBack(t *testing.T) {
	home := tempHome(t)
	raised := func(c *Config) {
		c.Home = home
		c.Limits.MaxPrev = 100
	}
	d, c, stop := runNode(t, raised)
	ctx := context.Background()
	if _, err := c.Join(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	prev := make([]protocol.ID, 80)
	for i := range prev {
		prev[i] = protocol.ID(sha256.Sum256(fmt.Appendf(nil, "parent %d", i)))
	}
	m, err := protocol.Sign(keyOf(t, d), protocol.Draft{Space: protocol.SpaceID("wide"), CreatedAt: time.Now(), Prev: prev,
		Type: "text", Content: json.RawMessage(`{"text":"eighty parents"}`)}, d.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.node.Accept(ctx, m); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		page, err := c.Read(ctx, "wide", "", 10)
		if err != nil || len(page.Messages) != 1 || len(page.Messages[0].Prev) != 80 {
			t.Fatalf("%s: page %+v, %v", when, page, err)
		}
		if got, err := c.Message(ctx, m.ID.String()); err != nil || got.ID != m.ID.String() {
			t.Fatalf("%s: message %v, %v", when, got.ID, err)
		}
	}
	check("with the raised limits")
	stop()
	_, c, stop = runNode(t, func(c *Config) { c.Home = home })
	defer stop()
	check("after a restart with the default limits")
}

// signAt signs a text message of space created at the given time, as
// another implementation (or an attacker) could; Sign checks only the
// clock at the creation time.
func signAt(t testing.TB, d *Daemon, space protocol.ID, at time.Time, text string) *protocol.Message {
	t.Helper()
	m, err := protocol.Sign(keyOf(t, d), protocol.Draft{Space: space, CreatedAt: at, Type: "text",
		Content: fmt.Appendf(nil, `{"text":%q}`, text)}, protocol.StoredLimits())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMaxAge: a message created longer ago than the max age (a year by
// default) is refused on the wire paths: Accept (as from the network),
// gossip (ignored) and sync (the floor stops at the max age, so the peer
// does not even offer it). A node that holds such messages, accepted
// under --max-age 0, still reads them back after it restarts with the
// default. Messages dated 2001 were accepted before.
func TestMaxAge(t *testing.T) {
	ctx := context.Background()
	home := tempHome(t)
	archive := func(c *Config) {
		c.Home = home
		c.Limits.MaxAge = 0
	}
	a, _, stopA := runNode(t, archive)
	defer func() { stopA() }()
	b, bc := startNode(t, bootstrapTo(a))
	sp, _, err := a.node.Join("annals", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.node.Join("annals", nil); err != nil {
		t.Fatal(err)
	}

	y2001 := time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)
	ancient := signAt(t, a, sp.ID, y2001, "from 2001")
	twoYears := signAt(t, a, sp.ID, time.Now().AddDate(-2, 0, 0), "two years old")
	month := signAt(t, a, sp.ID, time.Now().AddDate(0, -1, 0), "a month old")
	for _, m := range []*protocol.Message{ancient, twoYears, month} {
		if _, _, err := a.node.Accept(ctx, m); err != nil {
			t.Fatalf("A (max age 0) refused %s: %v", m.Content, err)
		}
	}
	if _, _, err := b.node.Accept(ctx, ancient); !errors.Is(err, protocol.ErrExpired) {
		t.Fatalf("B accepted a message from 2001: %v, want %v", err, protocol.ErrExpired)
	}

	// Gossip: A publishes an old message, then a new one; B gets the new
	// one only.
	hello, err := a.node.Send(ctx, sp.ID, node.Post{Content: json.RawMessage(`{"text":"hello"}`)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "B to get A's message", func() bool { return has(t, b, hello.ID) })
	gossipOld := signAt(t, a, sp.ID, y2001.Add(time.Hour), "gossiped from 2001")
	if err := a.node.Mesh().Publish(ctx, gossipOld); err != nil {
		t.Fatal(err)
	}
	after, err := a.node.Send(ctx, sp.ID, node.Post{Content: json.RawMessage(`{"text":"after"}`)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "B to get A's next message", func() bool { return has(t, b, after.ID) })

	// Sync: B holds everything of A within the year, and A does not offer
	// it the rest: once synced, another sync drops nothing. (B may have
	// fetched and dropped the old messages once, as parents named in the
	// prev of A's new ones.)
	syncBA := func() {
		eventually(t, 30*time.Second, "a sync of B with A", func() bool {
			_, err := b.node.Mesh().Sync(ctx, a.ID(), sp.ID)
			return err == nil
		})
	}
	syncBA()
	dropped := b.node.Mesh().SyncStats().Dropped
	syncBA()
	if more := b.node.Mesh().SyncStats().Dropped - dropped; more != 0 {
		t.Errorf("another sync dropped %d messages: A keeps offering messages older than B's max age", more)
	}
	for _, m := range []*protocol.Message{ancient, twoYears, gossipOld} {
		if has(t, b, m.ID) {
			t.Errorf("B holds %s, older than its max age", m.Content)
		}
	}
	if !has(t, b, month.ID) {
		t.Error("B lacks the month-old message")
	}
	if got := len(readAll(t, bc, "annals")); got != 3 {
		t.Errorf("B reads %d messages, want 3 (a month old, hello, after)", got)
	}

	// Read back: A restarts with the default max age and still reads
	// what it holds.
	stopA()
	_, ac, stop := runNode(t, func(c *Config) { c.Home = home })
	stopA = stop // the deferred stop stops this one
	if got := len(readAll(t, ac, "annals")); got != 5 {
		t.Errorf("A reads %d messages after a restart with the default max age, want 5", got)
	}
	if got, err := ac.Message(ctx, ancient.ID.String()); err != nil || got.ID != ancient.ID.String() {
		t.Errorf("A's message from 2001 after a restart: %v, %v", got.ID, err)
	}
}

// has reports whether nd holds message id.
func has(t testing.TB, nd *Daemon, id protocol.ID) bool {
	t.Helper()
	_, err := nd.node.Get(id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestMaxAgeConfig: a sync window beyond the max age is a configuration
// error naming both.
func TestMaxAgeConfig(t *testing.T) {
	cfg := Default()
	cfg.Home = t.TempDir()
	cfg.Limits.MaxAge = 24 * time.Hour
	cfg.SyncWindow = 48 * time.Hour
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "max age") {
		t.Fatalf("window 48h, max age 24h: %v, want an error naming the max age", err)
	}
	cfg.Limits.MaxAge = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("window 48h, no max age: %v", err)
	}
}
