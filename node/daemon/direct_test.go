package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// pair starts two connected nodes.
func pair(t testing.TB) (a *Daemon, ca *client.Client, b *Daemon, cb *client.Client) {
	t.Helper()
	a, ca = startNode(t, nil)
	b, cb = startNode(t, bootstrapTo(a))
	eventually(t, 10*time.Second, "b connected to a", func() bool {
		ps, _ := ca.Peers(context.Background())
		return len(ps) > 0
	})
	return a, ca, b, cb
}

func TestDMRequestResponse(t *testing.T) {
	ctx := t.Context()
	a, ca, b, cb := pair(t)
	res, err := ca.DM(ctx, api.DMRequest{
		To: b.ID().String(), Kind: "request", Content: json.RawMessage(`{"q":"ping"}`),
		Meta: map[string]string{"session": "s1", "local.secret": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "delivered" {
		t.Fatalf("status %q, want delivered", res.Status)
	}
	req := res.Message
	corr := req.Meta["correlation"]
	if corr == "" || req.Meta["session"] != "s1" || req.Meta["local.secret"] != "" {
		t.Fatalf("request meta %v: want a correlation, the session, no local key", req.Meta)
	}
	page, err := cb.Inbox(ctx, "", 0)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != req.ID {
		t.Fatalf("b's inbox %+v, %v", page, err)
	}
	// The answer names the request and inherits its correlation and session.
	rep, err := cb.DM(ctx, api.DMRequest{To: a.ID().String(), Kind: "response", ReplyTo: req.ID, Content: json.RawMessage(`{"a":"pong"}`)})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Message
	if m.Meta["correlation"] != corr || m.Meta["session"] != "s1" || m.Refs == nil || m.Refs.Messages[0] != req.ID {
		t.Fatalf("response %+v: want correlation %s, session s1, reply to %s", m, corr, req.ID)
	}
	var got api.Message
	followCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = ca.FollowInbox(followCtx, "", func(m api.Message) error { got = m; return errStop })
	if err != errStop || got.ID != m.ID || got.Type != "response" {
		t.Fatalf("a's inbox follow: %+v, %v", got, err)
	}
	// A DM is not a space message: it is in no space's history.
	if sp, _ := ca.Spaces(ctx); len(sp) != 0 {
		t.Fatalf("spaces %v after DMs", sp)
	}
}

func TestDMBadInput(t *testing.T) {
	ctx := t.Context()
	a, ca := startNode(t, nil)
	_ = a
	other, _ := peer.Decode("12D3KooWBpXqxkYeLNdmMnatHBZBWrbvvpatb2JAqYeF2nEFDoRx")
	cases := []struct {
		name string
		req  api.DMRequest
		code string
	}{
		// The same codes as a send's (bad_peer where a peer ID is bad,
		// invalid where the message is).
		{"bad peer", api.DMRequest{To: "nobody", Content: json.RawMessage(`{}`)}, api.CodeBadPeer},
		{"self", api.DMRequest{To: a.ID().String(), Content: json.RawMessage(`{}`)}, api.CodeBadPeer},
		{"no content", api.DMRequest{To: other.String()}, api.CodeInvalid},
		{"bad kind", api.DMRequest{To: other.String(), Kind: "shout", Content: json.RawMessage(`{}`)}, api.CodeInvalid},
		{"array content", api.DMRequest{To: other.String(), Content: json.RawMessage(`[1]`)}, "malformed"},
		{"negative ttl", api.DMRequest{To: other.String(), TTL: -1, Content: json.RawMessage(`{}`)}, api.CodeInvalid},
		{"bad reply_to", api.DMRequest{To: other.String(), ReplyTo: "x", Content: json.RawMessage(`{}`)}, api.CodeInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ca.DM(ctx, tc.req)
			if !client.IsCode(err, tc.code) {
				t.Fatalf("err %v, want code %s", err, tc.code)
			}
		})
	}
	if out, err := ca.Outbox(ctx, ""); err != nil || len(out) != 0 {
		t.Fatalf("outbox after refused requests: %v, %v", out, err)
	}
}

// rawHost is a bare libp2p host on loopback with its key.
func rawHost(t testing.TB) (host.Host, crypto.PrivKey) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, key
}

func signDM(t testing.TB, key crypto.PrivKey, to peer.ID, mutate func(*protocol.Draft)) []byte {
	t.Helper()
	d := protocol.Draft{
		Space: protocol.InboxSpace(to), CreatedAt: time.Now(),
		Refs: protocol.Refs{Nodes: []string{to.String()}}, Type: protocol.KindEvent,
		Content: json.RawMessage(`{"text":"hi"}`),
	}
	if mutate != nil {
		mutate(&d)
	}
	m, err := protocol.Sign(key, d, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return m.Encode()
}

// TestForgedDMsRefused: a peer that sends forged, tampered, misaddressed or
// malformed direct messages gets an error frame for each, and nothing of
// them reaches the inbox (a real Badger store); a good one after them is
// stored.
//
// It runs over each transport: how a stream ends differs between yamux
// over TCP and QUIC (see the oversized frame at the end).
func TestForgedDMsRefused(t *testing.T) {
	for _, tr := range []struct {
		name string
		code int
	}{{"tcp", ma.P_TCP}, {"quic", ma.P_QUIC_V1}} {
		t.Run(tr.name, func(t *testing.T) { forgedDMsRefused(t, tr.code) })
	}
}

func forgedDMsRefused(t *testing.T, transport int) {
	ctx := t.Context()
	n, c := startNode(t, nil)
	h, key := rawHost(t)
	var addrs []ma.Multiaddr
	for _, a := range n.node.Mesh().Host().Addrs() {
		if _, err := a.ValueForProtocol(transport); err == nil {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		t.Fatalf("the node listens on no address of this transport: %v", n.node.Mesh().Host().Addrs())
	}
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: addrs}); err != nil {
		t.Fatal(err)
	}
	otherKey, _, _ := crypto.GenerateEd25519Key(nil)
	other, _ := peer.IDFromPrivateKey(otherKey)
	tampered := signDM(t, key, n.ID(), nil)
	tampered[bytes.Index(tampered, []byte(`"hi"`))+2] = 'j' // the content, still valid JSON
	badSig := signDM(t, key, n.ID(), nil)
	badSig[len(badSig)-1] ^= 1
	cases := []struct {
		name string
		wire []byte
		want string
	}{
		{"signed by someone else", signDM(t, otherKey, n.ID(), nil), "sent by"},
		{"tampered body", tampered, "bad_signature"},
		{"bad signature", badSig, "bad_signature"},
		{"another inbox", signDM(t, key, n.ID(), func(d *protocol.Draft) { d.Space = protocol.InboxSpace(other) }), "inbox"},
		{"addressed to another", signDM(t, key, n.ID(), func(d *protocol.Draft) { d.Refs.Nodes = []string{other.String()} }), "recipient"},
		{"unknown kind", signDM(t, key, n.ID(), func(d *protocol.Draft) { d.Type = "text" }), "not one of"},
		{"local meta", signDM(t, key, n.ID(), func(d *protocol.Draft) { d.Meta = map[string]string{"local.x": "1"} }), "local"},
		{"space message", signDM(t, key, n.ID(), func(d *protocol.Draft) { d.Space = protocol.SpaceID("general") }), "inbox"},
		{"expired", signDM(t, key, n.ID(), func(d *protocol.Draft) { d.CreatedAt = time.Now().Add(-time.Hour); d.TTL = time.Minute }), "expired"},
		{"garbage", []byte("not a message at all"), "malformed"},
		{"empty", []byte{}, "malformed"},
	}
	st, err := h.NewStream(ctx, n.ID(), protocol.DirectProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, w := bufio.NewReader(st), bufio.NewWriter(st)
	exchange := func(b []byte) protocol.DirectAck {
		t.Helper()
		if err := writeFrame(w, b); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		var a protocol.DirectAck
		if err := readAck(r, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range cases {
		a := exchange(tc.wire)
		if a.OK || a.Error == nil || a.Error.Code != protocol.CodeRefused || !strings.Contains(a.Error.Message, tc.want) {
			t.Errorf("%s: ack %+v, want refused mentioning %q", tc.name, a, tc.want)
		}
	}
	good := signDM(t, key, n.ID(), nil)
	if a := exchange(good); !a.OK {
		t.Fatalf("good message after the bad ones: %+v", a.Error)
	}
	if a := exchange(good); !a.OK { // a duplicate is acknowledged, stored once
		t.Fatalf("duplicate: %+v", a.Error)
	}
	page, err := c.Inbox(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].From != h.ID().String() {
		t.Fatalf("inbox holds %d messages, want only the good one: %+v", len(page.Messages), page.Messages)
	}
	// An oversized frame gets an error frame, and the node stops reading
	// the stream. Over QUIC the sender's write then fails (STOP_SENDING);
	// over yamux nothing tells the sender, whose write blocks once the
	// stream's window is full, so a sender needs a write deadline, as
	// weft's own has (a reset from the node would drop the error frame,
	// see mesh/direct).
	big := make([]byte, protocol.DefaultLimits().MaxSize+4096)
	st.SetWriteDeadline(time.Now().Add(3 * time.Second))
	if err := writeFrame(w, big); err == nil {
		w.Flush()
	}
	var a protocol.DirectAck
	if err := readAck(r, &a); err != nil || a.Error == nil || a.Error.Code != protocol.CodeBadRequest {
		t.Fatalf("oversized frame: ack %+v, err %v; want a bad_request error frame", a, err)
	}
}

// TestDiscoverCapability: 10 nodes, 3 offer code_review; a node linked
// only to one bootstrap peer finds exactly those 3, with their cards.
func TestDiscoverCapability(t *testing.T) {
	ctx := t.Context()
	boot, _ := startNode(t, nil)
	var want []string
	for i := 1; i <= 8; i++ {
		n, _ := startNode(t, func(c *Config) {
			c.Bootstrap = []string{boot.Addrs()[0].String()}
			c.Card.Name = fmt.Sprintf("node%d", i)
			switch i {
			case 2, 5, 7:
				c.Card.Capabilities = []protocol.Capability{{Name: "code_review", Description: "reviews Go"}, {Name: "chat"}}
			case 3:
				c.Card.Capabilities = []protocol.Capability{{Name: "code_review_lite"}}
			default:
				c.Card.Capabilities = []protocol.Capability{{Name: "translate"}}
			}
		})
		if i == 2 || i == 5 || i == 7 {
			want = append(want, n.ID().String())
		}
	}
	slices.Sort(want)
	q, cq := startNode(t, func(c *Config) { c.Bootstrap = []string{boot.Addrs()[0].String()} })
	eventually(t, 10*time.Second, "querier linked to the bootstrap peer", func() bool {
		return len(q.node.Mesh().Peers()) >= 1
	})
	if ps := q.node.Mesh().Peers(); len(ps) != 1 || ps[0].ID != boot.ID() {
		t.Fatalf("querier is linked to %v, want only the bootstrap peer", ps)
	}
	start := time.Now()
	var got []string
	eventually(t, 60*time.Second, "discover code_review returns the 3 providers", func() bool {
		found, err := cq.Discover(ctx, "code_review", 0, 10*time.Second)
		if err != nil {
			t.Logf("discover: %v", err)
			return false
		}
		got = got[:0]
		for _, p := range found {
			if !slices.ContainsFunc(p.Card.Capabilities, func(c api.Capability) bool { return c.Name == "code_review" }) {
				t.Fatalf("provider %s's card lacks code_review: %+v", p.Card.ID, p.Card)
			}
			got = append(got, p.Card.ID)
		}
		slices.Sort(got)
		if len(got) > len(want) {
			t.Fatalf("discover returned %v, more than the 3 providers %v", got, want)
		}
		return slices.Equal(got, want)
	})
	t.Logf("discovered the 3 providers among 10 nodes in %s", time.Since(start).Round(time.Millisecond))
	// And health is readable per peer.
	h, err := cq.Health(ctx, want[0])
	if err != nil || h.Status != "ok" || h.Peer != want[0] {
		t.Fatalf("health of %s: %+v, %v", want[0], h, err)
	}
}

// writeFrame and readAck speak the direct protocol's framing by hand, as a
// foreign implementation would.
func writeFrame(w *bufio.Writer, b []byte) error {
	w.Write(binary.AppendUvarint(nil, uint64(len(b))))
	_, err := w.Write(b)
	return err
}

func readAck(r *bufio.Reader, a *protocol.DirectAck) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	if n > 8<<10 {
		return fmt.Errorf("ack of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, a)
}

// TestDMIACP: an IACP envelope sent through the API reaches the recipient
// as a signed direct message keeping the IACP message ID, and exports back
// to IACP with the same fields.
func TestDMIACP(t *testing.T) {
	ctx := t.Context()
	_, ca, b, cb := pair(t)
	now := time.Now().UTC().Truncate(time.Second)
	env := fmt.Sprintf(`{"version":"1.0","message_id":"019dfc9f-6dc0-7a1b-ac3d-4e5f60718293",
		"correlation_id":"019dfc9f-6dc0-7a1b-ac3d-4e5f60718294",
		"sender":{"agent_id":"builder"},"recipient":{"agent_id":%q,"channel":"query"},
		"timestamp":%q,"ttl_seconds":600,
		"message":{"type":"request","intent":"review","payload":{"pr":42}}}`, b.ID(), now.Format(time.RFC3339))
	res, err := ca.DMIACP(ctx, []byte(env))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "delivered" || res.Message.Meta["iacp.id"] != "019dfc9f-6dc0-7a1b-ac3d-4e5f60718293" || res.Message.Type != "request" || res.Message.TTL != 600 {
		t.Fatalf("result %+v", res)
	}
	page, err := cb.Inbox(ctx, "", 0)
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("inbox %+v, %v", page, err)
	}
	out, err := cb.MessageIACP(ctx, page.Messages[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		MessageID     string `json:"message_id"`
		CorrelationID string `json:"correlation_id"`
		TTL           int64  `json:"ttl_seconds"`
		Recipient     struct {
			AgentID string `json:"agent_id"`
			Channel string `json:"channel"`
		} `json:"recipient"`
		Message struct {
			Type, Intent string
			Payload      json.RawMessage
		} `json:"message"`
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back.MessageID != "019dfc9f-6dc0-7a1b-ac3d-4e5f60718293" || back.CorrelationID != "019dfc9f-6dc0-7a1b-ac3d-4e5f60718294" ||
		back.TTL != 600 || back.Recipient.AgentID != b.ID().String() || back.Recipient.Channel != "query" ||
		back.Message.Type != "request" || back.Message.Intent != "review" || string(back.Message.Payload) != `{"pr":42}` {
		t.Fatalf("export %s", out)
	}
	// A bad envelope is refused with a clear error, nothing queued.
	if _, err := ca.DMIACP(ctx, []byte(`{"version":"1.0"}`)); !client.IsCode(err, "malformed") {
		t.Fatalf("bad envelope: %v", err)
	}
	if _, err := ca.DMIACP(ctx, []byte(`not json`)); !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("not JSON: %v", err)
	}
	if out, _ := ca.Outbox(ctx, ""); len(out) != 0 {
		t.Fatalf("outbox %v", out)
	}
}
