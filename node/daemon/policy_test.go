package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// Who may reach a node: call policies and the DM policy, on real nodes.

// serveAllow runs a handler of name on c with the call policy allow until
// the test ends; it counts the calls it is given.
func serveAllow(t *testing.T, c *client.Client, name string, allow []string) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	serveReq(t, c, api.HandlerRequest{Names: []string{name}, Allow: allow},
		func(context.Context, api.IncomingCall, func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
			calls.Add(1)
			return json.RawMessage(`"ok"`), nil, nil
		})
	return &calls
}

// wantForbidden checks that err is the forbidden refusal of a call, 403.
func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != "forbidden" || e.Status != http.StatusForbidden {
		t.Fatalf("%s: %v, want forbidden (403)", what, err)
	}
}

// accessOf returns the access a card gives capability name.
func accessOf(card api.Card, name string) string {
	for _, c := range card.Capabilities {
		if c.Name == name {
			return c.Access
		}
	}
	return "(absent)"
}

// TestCallPolicy: a handler registered without allow takes calls from
// trusted peers only: a stranger's call is refused with forbidden and never
// reaches it, unary or streamed; trusting the caller opens it, untrusting
// closes it again. allow anyone and allow PEER open it without trust, and
// the card says which handlers are open to anyone.
func TestCallPolicy(t *testing.T) {
	ctx := t.Context()
	a, ca, b, cb := pair(t)
	other, _ := startNode(t, nil)
	aID, bID := a.ID().String(), b.ID().String()
	invoke := func(name string) error {
		_, err := ca.Invoke(ctx, api.InvokeRequest{Peer: bID, Name: name, Timeout: "10s"})
		return err
	}

	secret := serveAllow(t, cb, "secret", nil)
	wantForbidden(t, "a stranger's call", invoke("secret"))
	err := ca.InvokeStream(ctx, api.InvokeRequest{Peer: bID, Name: "secret"}, func(api.Frame) error { return nil })
	wantForbidden(t, "a stranger's stream call", err)
	if n := secret.Load(); n != 0 {
		t.Fatalf("the handler was given %d calls from a stranger", n)
	}
	if err := invoke("nobody_serves_this"); !client.IsCode(err, "no_handler") {
		t.Fatalf("a name nobody serves: %v, want no_handler", err)
	}

	trust(t, cb, a)
	if err := invoke("secret"); err != nil {
		t.Fatalf("a trusted peer's call: %v", err)
	}
	if removed, err := cb.Untrust(ctx, aID); err != nil || !removed {
		t.Fatalf("untrust: %v %v", removed, err)
	}
	wantForbidden(t, "after untrust", invoke("secret"))
	if n := secret.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once (the trusted call)", n)
	}

	serveAllow(t, cb, "open", []string{"anyone"})
	serveAllow(t, cb, "listed", []string{aID})
	serveAllow(t, cb, "listed_other", []string{"peer:" + other.ID().String()})
	for _, name := range []string{"open", "listed"} {
		if err := invoke(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	wantForbidden(t, "a handler listing another peer", invoke("listed_other"))

	card, err := ca.PeerCard(ctx, bID)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"secret": "restricted", "open": "anyone", "listed": "restricted"} {
		if got := accessOf(card, name); got != want {
			t.Errorf("card: %s has access %q, want %q", name, got, want)
		}
	}

	// A bad allow is refused at registration.
	err = cb.Serve(ctx, api.HandlerRequest{Names: []string{"x"}, Allow: []string{"everyone"}}, nil, nil)
	if !client.IsCode(err, "bad_request") {
		t.Fatalf("allow everyone: %v, want bad_request", err)
	}
}

// TestCallPolicySeveralHandlers: of two handlers of one name, one open to
// anyone and one to trusted peers only, a stranger is served by the open
// one alone, and the card says anyone may call the name.
func TestCallPolicySeveralHandlers(t *testing.T) {
	ctx := t.Context()
	_, ca, b, cb := pair(t)
	open := serveAllow(t, cb, "mixed", []string{"anyone"})
	closed := serveAllow(t, cb, "mixed", nil)
	for i := range 20 {
		if _, err := ca.Invoke(ctx, api.InvokeRequest{Peer: b.ID().String(), Name: "mixed"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if open.Load() != 20 || closed.Load() != 0 {
		t.Fatalf("open handler served %d, trusted-only one %d; want 20 and 0", open.Load(), closed.Load())
	}
	// A static capability of the same name keeps its description and gets
	// the handlers' access; one no handler serves claims none.
	caps := []api.Capability{{Name: "mixed", Description: "static", Access: "restricted"}, {Name: "static_only", Access: "anyone"}}
	if _, err := cb.SetCard(ctx, api.CardUpdate{Capabilities: &caps}); err != nil {
		t.Fatal(err)
	}
	card, err := ca.PeerCard(ctx, b.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := accessOf(card, "mixed"); got != "anyone" {
		t.Errorf("card: mixed has access %q, want anyone", got)
	}
	if got := accessOf(card, "static_only"); got != "" {
		t.Errorf("card: static_only, which no handler serves, has access %q, want none", got)
	}
}

// TestTrustSurvivesRestart: the trust list is kept in the home.
func TestTrustSurvivesRestart(t *testing.T) {
	ctx := t.Context()
	other, _ := startNode(t, nil)
	n, c, stop := runNode(t, nil)
	home := n.cfg.Home
	if _, err := c.Trust(ctx, other.ID().String(), "other"); err != nil {
		t.Fatal(err)
	}
	stop()
	_, c2 := startNode(t, func(cfg *Config) { cfg.Home = home })
	list, err := c2.Trusted(ctx)
	if err != nil || len(list.Peers) != 1 || list.Peers[0].Peer != other.ID().String() || list.Peers[0].Name != "other" {
		t.Fatalf("after a restart: %+v, %v", list, err)
	}
}

// stranger is a fresh identity with a raw libp2p host connected to a
// node: it writes direct messages on the wire, as an attacker would.
type stranger struct {
	t    *testing.T
	to   *Daemon
	r    *bufio.Reader
	w    *bufio.Writer
	id   peer.ID
	sign func(i int) []byte // message i
}

func newStranger(t *testing.T, to *Daemon) *stranger {
	t.Helper()
	h, key := rawHost(t)
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: to.ID(), Addrs: to.node.Mesh().Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	st, err := h.NewStream(t.Context(), to.ID(), protocol.DirectProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &stranger{t: t, to: to, r: bufio.NewReader(st), w: bufio.NewWriter(st), id: h.ID()}
	s.sign = func(i int) []byte {
		return signDM(t, key, to.ID(), func(d *protocol.Draft) {
			d.Content = json.RawMessage(fmt.Sprintf(`{"from":%q,"i":%d}`, h.ID(), i))
		})
	}
	return s
}

// send writes n messages, one exchange at a time, and returns how many
// were acknowledged and the refusals of the others.
func (s *stranger) send(n int) (ok int, refusals []*protocol.CallError) {
	s.t.Helper()
	for i := range n {
		if err := writeFrame(s.w, s.sign(i)); err != nil {
			s.t.Fatal(err)
		}
		if err := s.w.Flush(); err != nil {
			s.t.Fatal(err)
		}
		var a protocol.DirectAck
		if err := readAck(s.r, &a); err != nil {
			s.t.Fatal(err)
		}
		if a.OK {
			ok++
		} else {
			refusals = append(refusals, a.Error)
		}
	}
	return ok, refusals
}

// inboxAll reads the whole inbox.
func inboxAll(t *testing.T, c *client.Client) []api.Message {
	t.Helper()
	var all []api.Message
	after := ""
	for {
		page, err := c.Inbox(t.Context(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Messages...)
		if len(page.Messages) == 0 {
			return all
		}
		after = page.Next
	}
}

// TestDMFlood: strangers with fresh identities flood the inbox of a node
// that keeps only 10 messages per space (--keep-count 10). Each stranger's
// held messages stop at its quota and all strangers' at theirs (the rest
// refused as overloaded: the sender may retry later), and every message
// from the trusted peers stays in the inbox through the sweeps, before and
// after the flood.
func TestDMFlood(t *testing.T) {
	const (
		quota, allQuota = 20, 50
		strangers, each = 4, 30
	)
	ctx := t.Context()
	n, cn := startNode(t, func(c *Config) {
		c.Retention.MaxCount = 10
		c.SweepInterval = 50 * time.Millisecond
		c.DM = policy.DMConfig{Rate: 1000, Burst: 1000, Quota: quota, AllRate: 1000, AllBurst: 1000, AllQuota: allQuota}
	})
	var trustedIDs []string
	var trusted []*client.Client
	for range 2 {
		d, c := startNode(t, bootstrapTo(n))
		trust(t, cn, d)
		trustedIDs = append(trustedIDs, d.ID().String())
		trusted = append(trusted, c)
	}
	var want []string // the trusted peers' messages
	sendTrusted := func(count int) {
		for i, c := range trusted {
			for j := range count {
				res, err := c.DM(ctx, api.DMRequest{To: n.ID().String(), Content: json.RawMessage(fmt.Sprintf(`{"trusted":%d,"n":%d}`, i, j))})
				if err != nil || res.Status != "delivered" {
					t.Fatalf("trusted DM: %+v %v", res, err)
				}
				want = append(want, res.Message.ID)
			}
		}
	}
	sendTrusted(8) // 16 messages: already more than the count retention

	accepted := 0
	for range strangers {
		s := newStranger(t, n)
		ok, refusals := s.send(each)
		accepted += ok
		if ok > quota {
			t.Errorf("a stranger got %d messages in, more than its quota of %d", ok, quota)
		}
		for _, r := range refusals {
			if r.Code != protocol.CodeOverloaded || r.Reason != "quota" || !strings.HasPrefix(r.Message, "quota:") {
				t.Fatalf("refusal %v, want overloaded (quota:…), which the sender may retry", r)
			}
		}
	}
	if accepted != allQuota {
		t.Errorf("strangers got %d messages in, want all strangers' quota of %d", accepted, allQuota)
	}
	sendTrusted(2) // trusted peers are not held back by the strangers' quotas

	// Let the sweeps run, then read what is held.
	if _, err := n.node.Store().Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	inbox := inboxAll(t, cn)
	held := make(map[string]int)
	have := make(map[string]bool)
	for _, m := range inbox {
		have[m.ID] = true
		if !slices.Contains(trustedIDs, m.From) {
			held[m.From]++
		}
	}
	for _, id := range want {
		if !have[id] {
			t.Fatalf("a trusted peer's message %s is gone from the inbox (%d held, %d from strangers)", id, len(inbox), len(inbox)-len(want))
		}
	}
	total := 0
	for from, k := range held {
		total += k
		if k > quota {
			t.Errorf("stranger %s holds %d messages, quota %d", from, k, quota)
		}
	}
	if total > allQuota {
		t.Errorf("strangers hold %d messages, all strangers' quota %d", total, allQuota)
	}
	t.Logf("inbox: %d trusted messages, %d from %d strangers", len(want), total, len(held))
}

// TestDMRateLimit: a stranger gets its burst in at once and is then
// refused as overloaded (rate_limited) until its bucket refills; a real
// sender's outbox retries those and delivers everything; a trusted peer is
// never limited.
func TestDMRateLimit(t *testing.T) {
	ctx := t.Context()
	n, cn := startNode(t, func(c *Config) {
		c.DM = policy.DMConfig{Rate: 2, Burst: 3}
	})
	s := newStranger(t, n)
	ok, refusals := s.send(10)
	if ok != 3 || len(refusals) != 7 {
		t.Fatalf("a burst of 10: %d in, %d refused; want 3 and 7", ok, len(refusals))
	}
	if r := refusals[0]; r.Code != protocol.CodeOverloaded || r.Reason != "rate_limited" || !strings.HasPrefix(r.Message, "rate_limited:") {
		t.Fatalf("refusal %v, want overloaded (rate_limited:…)", r)
	}

	// A daemon stranger: its outbox retries what was refused.
	a, ca := startNode(t, bootstrapTo(n))
	var ids []string
	for i := range 6 {
		res, err := ca.DM(ctx, api.DMRequest{To: n.ID().String(), Content: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Message.ID)
	}
	eventually(t, 30*time.Second, "the outbox to deliver every rate-limited message", func() bool {
		have := make(map[string]bool)
		for _, m := range inboxAll(t, cn) {
			have[m.ID] = true
		}
		for _, id := range ids {
			if !have[id] {
				return false
			}
		}
		return true
	})
	if dead, err := ca.DeadLetters(ctx, "", 100); err != nil || len(dead.Messages) != 0 {
		t.Fatalf("dead letters %+v, %v; want none", dead, err)
	}

	// Trusted: 20 at once, all delivered on the first attempt.
	trust(t, cn, a)
	for i := range 20 {
		res, err := ca.DM(ctx, api.DMRequest{To: n.ID().String(), Content: json.RawMessage(fmt.Sprintf(`{"t":%d}`, i))})
		if err != nil || res.Status != "delivered" {
			t.Fatalf("trusted DM %d: %+v %v", i, res.Status, err)
		}
	}
}

// TestDMPolicyTrusted: a node that takes direct messages from trusted
// peers only refuses a stranger's for good: the stranger's outbox
// dead-letters it with the reason, and nothing is stored; a trusted peer's
// is delivered.
func TestDMPolicyTrusted(t *testing.T) {
	ctx := t.Context()
	n, cn := startNode(t, func(c *Config) { c.DM.Policy = policy.DMTrusted })
	s := newStranger(t, n)
	if ok, refusals := s.send(1); ok != 0 || len(refusals) != 1 || refusals[0].Code != protocol.CodeRefused ||
		refusals[0].Reason != "forbidden" || !strings.HasPrefix(refusals[0].Message, "forbidden:") {
		t.Fatalf("raw stranger: %d in, refusals %v; want refused (forbidden:…)", ok, refusals)
	}

	a, ca := startNode(t, bootstrapTo(n))
	res, err := ca.DM(ctx, api.DMRequest{To: n.ID().String(), Content: json.RawMessage(`{"hi":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == "delivered" {
		t.Fatal("a stranger's DM was delivered to a node that takes them from trusted peers only")
	}
	eventually(t, 10*time.Second, "the refused DM to be dead-lettered", func() bool {
		dead, err := ca.DeadLetters(ctx, "", 10)
		return err == nil && len(dead.Messages) == 1 && strings.Contains(dead.Messages[0].Reason, "forbidden")
	})
	if inbox := inboxAll(t, cn); len(inbox) != 0 {
		t.Fatalf("inbox holds %d messages, want none", len(inbox))
	}
	trust(t, cn, a)
	res, err = ca.DM(ctx, api.DMRequest{To: n.ID().String(), Content: json.RawMessage(`{"hi":2}`)})
	if err != nil || res.Status != "delivered" {
		t.Fatalf("trusted DM: %+v, %v", res, err)
	}
}
