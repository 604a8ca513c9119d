package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// logRecorder is a slog.Handler that keeps the messages logged at Warn
// and above, to see what a node reports.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *logRecorder) WithGroup(string) slog.Handler                { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, b.String())
	return nil
}

// count returns how many messages logged contain s.
func (r *logRecorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// privNode starts a node on 127.0.0.1 in home (a new one if ""),
// bootstrapped to boot if not nil, logging to log if not nil, with no
// periodic sync (only on joins and gaps), so that nothing the test does
// not cause fetches what a peer lacks. It is closed when the test ends,
// unless the test closes it first.
func privNode(t *testing.T, home string, boot *Node, log *slog.Logger) *Node {
	t.Helper()
	cfg := Default()
	if home == "" {
		home = t.TempDir()
	}
	cfg.Home, cfg.MDNS, cfg.DHTMode = home, false, "client"
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Logger = log
	cfg.SyncInterval = -1
	if boot != nil {
		for _, a := range boot.mesh.Addrs() {
			cfg.Bootstrap = append(cfg.Bootstrap, a.String()+"/p2p/"+boot.ID().String())
		}
	}
	n, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// within polls cond until it holds or d has passed.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSealedRotationRetried: a lone owner whose rotation of a sealed
// space's key fails, after a member left, tries it again, and the space
// ends rotated with nothing else happening. The failure is real: the
// space's quota per sender, set just above what the owner has sent, makes
// the owner's node refuse its own key message (the leaver's leave still
// fits its own quota). Once the owner lifts the quota (no change of
// membership, no restart), the node rotates on its own; what the owner
// sends after is sealed in the new epoch, which the leaver was not given
// and cannot open.
func TestSealedRotationRetried(t *testing.T) {
	ctx := t.Context()
	logs := &logRecorder{}
	a := privNode(t, "", nil, slog.New(logs))
	l := privNode(t, "", a, nil)
	sp, err := a.CreatePrivate(ctx, "vault", true)
	if err != nil {
		t.Fatal(err)
	}
	space := sp.ID
	_, tok, err := a.Invite("vault", InviteOptions{Peer: l.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.JoinInvite(ctx, tok); err != nil {
		t.Fatal(err)
	}
	as, ls := a.private.get(space), l.private.get(space)
	within(t, 20*time.Second, "the leaver to be a member on both", func() bool {
		return as.current.Load().IsMember(l.ID()) && ls.current.Load().IsMember(l.ID())
	})
	if e, _, ok := ls.keys.current(); !ok || e != 0 {
		t.Fatalf("the leaver holds epoch %d (%v), want 0", e, ok)
	}

	// The owner's quota per sender, just above what it has sent (a large
	// message, so that the leaver's join and leave stay under it).
	big := strings.Repeat("x", 20_000)
	content, _ := json.Marshal(map[string]string{"text": big})
	if _, err := a.Send(ctx, space, Post{Content: content}); err != nil {
		t.Fatal(err)
	}
	u, err := a.store.SenderUsage(space, a.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetSpaceLimits(space.String(), store.SpaceLimits{MaxSenderBytes: u.Bytes + 1}); err != nil {
		t.Fatal(err)
	}

	if err := l.Leave(ctx, "vault"); err != nil {
		t.Fatalf("leave: %v", err)
	}
	within(t, 20*time.Second, "the owner to take in the leave", func() bool { return !as.current.Load().IsMember(l.ID()) })
	within(t, 20*time.Second, "the owner's rotation to fail", func() bool { return logs.count("sealed space: rotate the key") > 0 })
	if e, _, _ := as.keys.current(); e != 0 {
		t.Fatalf("the owner holds epoch %d after its rotation failed, want 0", e)
	}
	if as.exposed(as.current.Load()) != l.ID() {
		t.Fatal("the key is not exposed to the leaver after the failed rotation")
	}

	// Nothing but the quota changes.
	if _, err := a.SetSpaceLimits(space.String(), store.SpaceLimits{}); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "the owner to rotate the key", func() bool {
		e, _, _ := as.keys.current()
		return e == 1
	})
	if p := as.exposed(as.current.Load()); p != "" {
		t.Fatalf("after the rotation the key is still exposed to %s", p)
	}
	if ms := as.current.Load().Members(); len(ms) != 1 || ms[0].Peer != a.ID() {
		t.Fatalf("members after the rotation: %v, want the owner alone", ms)
	}
	for _, p := range as.keys.givenTo(1) {
		if p == l.ID() {
			t.Fatal("epoch 1 was given to the leaver")
		}
	}

	after, err := a.Send(ctx, space, Post{Content: json.RawMessage(`{"text":"after the leave"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(after.Content), "after the leave") {
		t.Fatalf("the owner reads its own message as %s", after.Content)
	}
	stored, err := a.store.Get(after.ID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeStored(stored)
	if err != nil {
		t.Fatal(err)
	}
	env, ok := member.ParseEnvelope(m.Content)
	if !ok || env.Epoch != 1 {
		t.Fatalf("the message sent after the rotation is sealed in epoch %d (%v), want 1", env.Epoch, ok)
	}
	if got := marker(l.openMessage(m)); got != "no key for epoch 1" {
		t.Fatalf("the leaver reads the message sent after the rotation as %q (%s), want no key", got, l.openMessage(m).Content)
	}
	keyMsgs := 0
	page, _, err := a.readStored(space, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page {
		if m.Type == member.TypeKey {
			keyMsgs++
		}
	}
	if keyMsgs != 1 {
		t.Fatalf("the owner holds %d key messages, want 1", keyMsgs)
	}
}
