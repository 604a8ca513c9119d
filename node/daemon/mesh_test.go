package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// readAll pages through a space with small pages and returns the IDs in
// read order, checking that paging neither repeats nor skips.
func readAll(t testing.TB, c *client.Client, space string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		page, err := c.Read(context.Background(), space, cursor, 2)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, m := range page.Messages {
			ids = append(ids, m.ID)
		}
		if len(page.Messages) == 0 {
			if page.Next != cursor {
				t.Fatalf("empty page moved the cursor from %q to %q", cursor, page.Next)
			}
			return ids
		}
		cursor = page.Next
	}
}

// TestThreeNodesOneBootstrap: three daemons whose only link is B and C
// bootstrapping from A join a space and each send; every node ends with
// every message, and every node reads them in the same order because each
// was sent only after every node held the one before.
//
// The order `read` returns is this node's arrival order: the order in which
// the node stored the messages. It never changes for messages already read
// (new ones are only appended), so a cursor always means the same position.
func TestThreeNodesOneBootstrap(t *testing.T) {
	a, ca := startNode(t, nil)
	boot := a.Addrs()[0].String()
	b, cb := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	_, cc := startNode(t, func(c *Config) { c.Bootstrap = []string{boot} })
	clients := []*client.Client{ca, cb, cc}
	ctx := context.Background()
	for _, c := range clients {
		if _, err := c.Join(ctx, "research"); err != nil {
			t.Fatal(err)
		}
	}
	// B and C share no link but the bootstrap; DHT rendezvous on the space
	// must bring them together.
	eventually(t, 45*time.Second, "B and C to find each other through the DHT", func() bool {
		for _, p := range b.node.Mesh().Peers() {
			if p.ID.String() != a.ID().String() {
				return true
			}
		}
		return false
	})
	eventually(t, 30*time.Second, "every node to see space peers", func() bool {
		for _, c := range clients {
			sps, err := c.Spaces(ctx)
			if err != nil || len(sps) != 1 || sps[0].Peers < 2 {
				return false
			}
		}
		return true
	})

	var sent []string
	for round := range 2 {
		for i, c := range clients {
			m, err := c.SendText(ctx, "research", fmt.Sprintf("round %d from node %d", round, i))
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, m.ID)
			eventually(t, 30*time.Second, "message "+m.ID+" to reach every node", func() bool {
				for _, c := range clients {
					if _, err := c.Message(ctx, m.ID); err != nil {
						return false
					}
				}
				return true
			})
		}
	}
	for i, c := range clients {
		got := readAll(t, c, "research")
		if !slices.Equal(got, sent) {
			t.Errorf("node %d reads %v, want %v", i, got, sent)
		}
		// The sender is verifiable from the message itself.
		m, err := c.Message(ctx, sent[1])
		if err != nil {
			t.Fatal(err)
		}
		if m.From != b.ID().String() {
			t.Errorf("node %d: message from B says from=%s", i, m.From)
		}
		if len(m.Prev) != 1 || m.Prev[0] != sent[0] {
			t.Errorf("node %d: second message has prev %v, want [%s]", i, m.Prev, sent[0])
		}
	}
}

// rawPeer is a plain libp2p host with gossipsub and no weft validation:
// the network-side attacker.
type rawPeer struct {
	key   crypto.PrivKey
	id    peer.ID
	topic *pubsub.Topic
}

func newRawPeer(t *testing.T, target *Daemon, space protocol.ID) *rawPeer {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ps, err := pubsub.NewGossipSub(t.Context(), h,
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithMaxMessageSize(4<<20), pubsub.WithFloodPublish(true),
		pubsub.WithPeerOutboundQueueSize(1<<14), // queue a flood rather than drop it
		pubsub.WithMessageIdFn(func(m *pb.Message) string { s := sha256.Sum256(m.Data); return string(s[:]) }))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(protocol.Topic(space))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: target.ID(), Addrs: target.node.Mesh().Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the raw peer to join the node's topic mesh", func() bool {
		return slices.Contains(topic.ListPeers(), target.ID())
	})
	return &rawPeer{key: key, id: h.ID(), topic: topic}
}

func (r *rawPeer) sign(t *testing.T, space protocol.ID, content string) *protocol.Message {
	t.Helper()
	lim := protocol.DefaultLimits()
	m, err := protocol.Sign(r.key, protocol.Draft{Space: space, CreatedAt: time.Now(), Type: "text", Content: json.RawMessage(content)}, lim)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestInvalidGossipRejected: a raw gossipsub peer publishes a forged, a
// tampered, an oversized and a wrong-space message; none is stored. A
// valid message another raw peer publishes afterwards is (the first one
// may be graylisted by then: it sent invalid messages).
func TestInvalidGossipRejected(t *testing.T) {
	const maxSize = 8 << 10
	a, ca := startNode(t, func(c *Config) { c.Limits.MaxSize = maxSize })
	ctx := context.Background()
	sp, err := ca.Join(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	space, _ := protocol.ParseID(sp.ID)
	raw := newRawPeer(t, a, space)

	// Forged: a valid message whose signature no longer matches its sender.
	forged := raw.sign(t, space, `{"text":"I am someone else"}`)
	forgedWire := forged.Encode()
	forgedWire[len(forgedWire)-1] ^= 0xff

	// Tampered: one content byte changed after signing (same length).
	tampered := raw.sign(t, space, `{"text":"pay 100"}`)
	tamperedWire := tampered.Encode()
	i := len(tamperedWire) - protocol.SignatureSize - 4
	tamperedWire[i] = '9'
	tamperedID := protocol.MessageID(tamperedWire[len(tamperedWire)-protocol.SignatureSize-len(tampered.Body) : len(tamperedWire)-protocol.SignatureSize])

	// Oversized: validly signed, but over this node's 8 KiB limit.
	big := raw.sign(t, space, fmt.Sprintf(`{"text":%q}`, strings.Repeat("a", 2*maxSize)))

	// Wrong space: valid, but for a space other than the topic's.
	other := raw.sign(t, protocol.SpaceID("elsewhere"), `{"text":"cross-posted"}`)

	bad := []struct {
		name string
		id   protocol.ID
		wire []byte
	}{
		{"forged", forged.ID, forgedWire},
		{"tampered", tamperedID, tamperedWire},
		{"oversized", big.ID, big.Encode()},
		{"wrong space", other.ID, other.Encode()},
		{"garbage", protocol.MessageID([]byte("x")), []byte("not a weft message")},
	}
	for _, b := range bad {
		if err := raw.topic.Publish(ctx, b.wire); err != nil {
			t.Fatalf("publish %s: %v", b.name, err)
		}
	}
	honest := newRawPeer(t, a, space)
	good := honest.sign(t, space, `{"text":"honest"}`)
	if err := honest.topic.Publish(ctx, good.Encode()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the valid message to be stored", func() bool {
		ok, _ := a.node.Store().Has(good.ID)
		return ok
	})
	for _, b := range bad {
		if ok, err := a.node.Store().Has(b.id); err != nil || ok {
			t.Errorf("%s message stored (has=%v, err=%v)", b.name, ok, err)
		}
	}
	page, err := ca.Read(ctx, "guarded", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].ID != good.ID.String() {
		t.Errorf("space holds %v, want only the valid message", ids(page.Messages))
	}
}

func ids(ms []api.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
