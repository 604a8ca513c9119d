package reconcile

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

var testSpace = protocol.SpaceID("reconcile-test")

// newHost starts a libp2p host on loopback TCP, closed when the test ends.
func newHost(tb testing.TB, opts ...libp2p.Option) host.Host {
	tb.Helper()
	opts = append(opts, libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	h, err := libp2p.New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

// node is a host with a sync service over a memStore that has joined testSpace.
type node struct {
	h   host.Host
	st  *memStore
	svc *Service
}

func newNode(tb testing.TB, opts ...Option) *node {
	tb.Helper()
	return newNodeOn(tb, newHost(tb), opts...)
}

// newNodeOn is newNode on a given host.
func newNodeOn(tb testing.TB, h host.Host, opts ...Option) *node {
	tb.Helper()
	st := newMemStore()
	svc, err := New(h, st, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = svc.Close() })
	svc.Join(testSpace, st)
	return &node{h: h, st: st, svc: svc}
}

// connect dials b from a.
func connect(tb testing.TB, a, b host.Host) {
	tb.Helper()
	if err := a.Connect(tb.Context(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// author signs messages into testSpace with one key.
type author struct {
	key  crypto.PrivKey
	base time.Time
	n    int
}

func newAuthor(tb testing.TB) *author {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &author{key: key, base: time.Now().Add(-time.Hour)}
}

// msg signs one message in space created at a.base + at, with prev.
func (a *author) msg(tb testing.TB, space protocol.ID, at time.Duration, ttl time.Duration, prev ...protocol.ID) *protocol.Message {
	tb.Helper()
	a.n++
	m, err := protocol.Sign(a.key, protocol.Draft{
		Space:     space,
		CreatedAt: a.base.Add(at),
		Prev:      prev,
		TTL:       ttl,
		Type:      "text",
		Content:   fmt.Appendf(nil, `{"text":"message %d"}`, a.n),
	}, protocol.DefaultLimits())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// chain signs n messages in testSpace, each naming the previous in prev,
// a millisecond apart starting at start.
func (a *author) chain(tb testing.TB, n int, start time.Duration) []*protocol.Message {
	tb.Helper()
	out := make([]*protocol.Message, n)
	var prev []protocol.ID
	for i := range out {
		out[i] = a.msg(tb, testSpace, start+time.Duration(i)*time.Millisecond, 0, prev...)
		prev = []protocol.ID{out[i].ID}
	}
	return out
}

// loose signs n messages in testSpace that name no parent, a millisecond
// apart.
func (a *author) loose(tb testing.TB, n int) []*protocol.Message {
	tb.Helper()
	out := make([]*protocol.Message, n)
	for i := range out {
		out[i] = a.msg(tb, testSpace, time.Duration(i)*time.Millisecond, 0)
	}
	return out
}

func addAll(st *memStore, msgs []*protocol.Message) {
	for _, m := range msgs {
		st.add(m)
	}
}

// syncCtx bounds one Sync in tests.
func syncCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// syncSets connects a and b, gives them aMsgs and bMsgs, and runs one
// session started by a.
func syncSets(tb testing.TB, a, b *node, aMsgs, bMsgs []*protocol.Message) Stats {
	tb.Helper()
	connect(tb, a.h, b.h)
	addAll(a.st, aMsgs)
	addAll(b.st, bMsgs)
	stats, err := a.svc.Sync(syncCtx(tb), b.h.ID(), testSpace)
	if err != nil {
		tb.Fatal(err)
	}
	return stats
}
