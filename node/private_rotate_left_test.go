package node

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/store"
)

// TestSealedRotationRetryStopsAfterLeave: the retry of a failed rotation
// stops when the owner leaves the space (locally: weft leave): it does not
// rotate the key of a space the node has left, once the failure clears
// (leaving drops the space's limits), storing a key message into it.
func TestSealedRotationRetryStopsAfterLeave(t *testing.T) {
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
	as := a.private.get(space)
	within(t, 20*time.Second, "member", func() bool { return as.current.Load().IsMember(l.ID()) })
	content, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 20_000)})
	if _, err := a.Send(ctx, space, Post{Content: content}); err != nil {
		t.Fatal(err)
	}
	u, _ := a.store.SenderUsage(space, a.ID().String())
	if _, err := a.SetSpaceLimits(space.String(), store.SpaceLimits{MaxSenderBytes: u.Bytes + 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Leave(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "the rotation to fail and be retried", func() bool { return as.retrying.Load() })
	if err := a.Leave(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if sps, _ := a.Spaces(); len(sps) != 0 {
		t.Fatalf("owner still in %v", sps)
	}
	within(t, 30*time.Second, "the retry loop to end", func() bool { return !as.retrying.Load() })
	if e, _, _ := as.keys.current(); e != 0 {
		t.Errorf("the owner left the space, yet its node rotated the key afterwards (epoch %d): a key message was written into a left space", e)
	}
}
