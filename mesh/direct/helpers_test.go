package direct

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh/internal/meshtest"
	"github.com/weftmesh/weft/protocol"
)

// newKey returns a fresh Ed25519 key.
func newKey(tb testing.TB) crypto.PrivKey {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// Loopback listen addresses, one per transport: no test traffic leaves the
// machine.
const (
	tcp  = "/ip4/127.0.0.1/tcp/0"
	quic = "/ip4/127.0.0.1/udp/0/quic-v1"
)

// transports are the transports some tests run over.
var transports = []struct{ name, addr string }{{"tcp", tcp}, {"quic", quic}}

// newHost starts a libp2p host with identity key listening on addr
// (loopback TCP by default), closed when the test ends.
func newHost(tb testing.TB, key crypto.PrivKey, addr ...string) host.Host {
	tb.Helper()
	if len(addr) == 0 {
		addr = []string{tcp}
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings(addr...), libp2p.DisableRelay())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

// node is a host with its key, a direct service and its inbox.
type node struct {
	key   crypto.PrivKey
	h     host.Host
	svc   *Service
	inbox *memInbox
}

// newNode starts a node on loopback TCP.
func newNode(tb testing.TB, opts ...Option) *node {
	tb.Helper()
	return newNodeOn(tb, tcp, opts...)
}

// newNodeOn starts a node listening on addr.
func newNodeOn(tb testing.TB, addr string, opts ...Option) *node {
	tb.Helper()
	n := &node{key: newKey(tb), inbox: newMemInbox()}
	n.h = newHost(tb, n.key, addr)
	svc, err := New(n.h, n.inbox, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = svc.Close() })
	n.svc = svc
	return n
}

func (n *node) id() peer.ID { return n.h.ID() }

// connect dials b from a.
func connect(tb testing.TB, a, b host.Host) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// memInbox is an Inbox in memory that, like the real one, stores each
// message once by ID.
type memInbox struct {
	mu       sync.Mutex
	msgs     map[protocol.ID]*protocol.Message
	order    []protocol.ID
	receives atomic.Int64
	// hook, when set, runs before a message is stored; an error refuses it.
	hook func(ctx context.Context, m *protocol.Message) error
}

func newMemInbox() *memInbox { return &memInbox{msgs: make(map[protocol.ID]*protocol.Message)} }

func (in *memInbox) Receive(ctx context.Context, m *protocol.Message) error {
	in.receives.Add(1)
	in.mu.Lock()
	hook := in.hook
	in.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, m); err != nil {
			return err
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.msgs[m.ID]; !ok {
		in.msgs[m.ID] = m
		in.order = append(in.order, m.ID)
	}
	return nil
}

func (in *memInbox) setHook(f func(ctx context.Context, m *protocol.Message) error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.hook = f
}

func (in *memInbox) has(id protocol.ID) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, ok := in.msgs[id]
	return ok
}

func (in *memInbox) get(id protocol.ID) *protocol.Message {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.msgs[id]
}

// ids returns the IDs stored, in the order they were first stored.
func (in *memInbox) ids() []protocol.ID {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]protocol.ID(nil), in.order...)
}

func (in *memInbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

// seq numbers message contents so that every message is distinct.
var seq atomic.Int64

// dm signs a direct message from key to to, well formed unless edit
// changes the draft.
func dm(tb testing.TB, key crypto.PrivKey, to peer.ID, edit func(*protocol.Draft)) *protocol.Message {
	tb.Helper()
	d := protocol.Draft{
		Space:     protocol.InboxSpace(to),
		CreatedAt: time.Now(),
		Refs:      protocol.Refs{Nodes: []string{to.String()}},
		Type:      protocol.KindRequest,
		Meta:      map[string]string{protocol.MetaCorrelation: "c-" + strconv.FormatInt(seq.Add(1), 10)},
		Content:   fmt.Appendf(nil, `{"text":"hello %d"}`, seq.Add(1)),
	}
	if edit != nil {
		edit(&d)
	}
	m, err := protocol.Sign(key, d, protocol.DefaultLimits())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// ack is what Send reported for one message.
type ack struct {
	i       int
	refusal *protocol.CallError
}

// send sends wires from a to b with a.svc.Send and returns the acks in the
// order they were reported.
func send(tb testing.TB, ctx context.Context, a *node, to peer.ID, wires ...[]byte) ([]ack, error) {
	tb.Helper()
	var acks []ack
	err := a.svc.Send(ctx, to, wires, func(i int, refusal *protocol.CallError) {
		acks = append(acks, ack{i, refusal})
	})
	return acks, err
}

// testCtx bounds a test's exchanges so that a hang fails.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// rawStream opens a direct stream from a to b without Send.
func rawStream(tb testing.TB, a, b host.Host) (network.Stream, *bufio.Reader, *bufio.Writer) {
	tb.Helper()
	st, err := a.NewStream(testCtx(tb, 10*time.Second), b.ID(), protocol.DirectProtocol)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Reset() })
	if err := st.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	return st, bufio.NewReader(st), bufio.NewWriter(st)
}

// refusingAddr returns a loopback TCP address nothing listens on.
func refusingAddr(tb testing.TB) ma.Multiaddr { return meshtest.RefusingAddr(tb) }

// absentPeer returns the ID of a peer that is not running, known to h at
// addrs.
func absentPeer(tb testing.TB, h host.Host, addrs ...ma.Multiaddr) peer.ID {
	return meshtest.AbsentPeer(tb, h, addrs...)
}

// bufioRW buffers st both ways.
func bufioRW(st network.Stream) (*bufio.Reader, *bufio.Writer) {
	return bufio.NewReader(st), bufio.NewWriter(st)
}
