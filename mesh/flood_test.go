package mesh

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var discard = slog.New(slog.DiscardHandler)

// TestFloodGuardPenalty: an author over its rate that sends its own
// messages is penalised until its score is below the graylist threshold;
// a relay of the same author's excess is not; the penalty decays away.
func TestFloodGuardPenalty(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	g := newFloodGuard(DefaultRateLimits(), clk.Now, discard)
	space := protocol.SpaceID("s")
	flooder, relay := peer.ID("flooder"), peer.ID("relay")

	accepted := 0
	for range 200 + 5 {
		if g.authored(space, flooder, flooder, true, 100) == within {
			accepted++
		}
	}
	if accepted != 200 {
		t.Fatalf("%d of 205 accepted at once, want the burst of 200", accepted)
	}
	if s := g.score(flooder); s != 0 {
		t.Errorf("score %v after 5 over the rate, want 0 (within the grace)", s)
	}
	// Relayed, the excess is ignored and costs the relay nothing.
	for range 100 {
		if v := g.authored(space, flooder, relay, true, 100); v != overAuthor {
			t.Fatalf("relayed excess: %v, want %v", v, overAuthor)
		}
	}
	if s := g.score(relay); s != 0 {
		t.Errorf("relay's score %v, want 0", s)
	}
	n := 0
	for g.score(flooder) >= graylistThreshold-topicScoreCap {
		g.authored(space, flooder, flooder, true, 100)
		if n++; n > 100 {
			t.Fatalf("still not graylisted after %d more messages over the rate (score %v)", n, g.score(flooder))
		}
	}
	t.Logf("graylisted %d messages past the burst (even with the full positive score)", 5+n)
	// A minute on, a rate's worth of messages would be accepted again,
	// but the flooder stays graylisted (and so unheard) for minutes.
	clk.Add(time.Minute)
	if g.authored(space, flooder, flooder, true, 100) != within {
		t.Error("refilled bucket refuses")
	}
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute} {
		clk.Add(d)
		if s := g.score(flooder); s >= graylistThreshold-topicScoreCap {
			t.Errorf("score %v %v later, want still graylisted", s, d)
		}
	}
	clk.Add(10 * time.Minute)
	if s := g.score(flooder); s != 0 {
		t.Errorf("score %v 17 minutes later, want 0", s)
	}
}

// TestFloodGuardStrangers: authors the gate does not know share one
// rate per space; known ones keep their own.
func TestFloodGuardStrangers(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	g := newFloodGuard(RateLimits{Author: Rate{PerSecond: 10, Burst: 10}, Strangers: Rate{PerSecond: 1, Burst: 20}}, clk.Now, discard)
	a, b := protocol.SpaceID("a"), protocol.SpaceID("b")
	ok := 0
	for i := range 50 {
		author := peer.ID(fmt.Sprint("stranger", i)) // a fresh ID each time
		if g.authored(a, author, author, false, 100) == within {
			ok++
		}
	}
	if ok != 20 {
		t.Errorf("%d messages of 50 fresh strangers accepted, want the shared burst of 20", ok)
	}
	if g.authored(b, "stranger", "stranger", false, 100) != within {
		t.Error("another space's strangers share the bucket")
	}
	if g.authored(a, "member", "member", true, 100) != within {
		t.Error("a known author is refused while strangers are over their rate")
	}
	if st := g.Stats(); st.OverStrangers != 30 {
		t.Errorf("stats %+v, want 30 over strangers", st)
	}
}

// TestFloodGuardPeer: a forwarding peer over its rate is refused before
// validation and penalised.
func TestFloodGuardPeer(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	g := newFloodGuard(RateLimits{Peer: Rate{PerSecond: 100, Burst: 100}}, clk.Now, discard)
	sp := protocol.SpaceID("s")
	for i := range 100 {
		if g.forwarded(sp, "p", 100) != within {
			t.Fatalf("message %d within the burst refused", i)
		}
	}
	for range 50 {
		if g.forwarded(sp, "p", 100) != overPeer {
			t.Fatal("over the burst accepted")
		}
	}
	if g.score("p") >= graylistThreshold {
		t.Errorf("50 over the peer's rate: score %v, want graylisted", g.score("p"))
	}
	if g.forwarded(sp, "q", 100) != within || g.forwarded(protocol.SpaceID("t"), "p", 100) != within {
		t.Error("other peers or spaces share the bucket")
	}
}

// TestFloodGuardBytes: large messages take a token per 16 KiB, so a rate
// bounds bytes too.
func TestFloodGuardBytes(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	g := newFloodGuard(DefaultRateLimits(), clk.Now, discard)
	sp := protocol.SpaceID("s")
	n := 0
	for g.authored(sp, "big", "big", true, 64<<10) == within {
		n++
	}
	if n != 50 {
		t.Errorf("%d messages of 64 KiB within the burst of 200, want 50", n)
	}
	if Tokens(1) != 1 || Tokens(16<<10) != 1 || Tokens(16<<10+1) != 2 || Tokens(protocol.MaxWireSize) != 65 {
		t.Errorf("Tokens: %d %d %d %d", Tokens(1), Tokens(16<<10), Tokens(16<<10+1), Tokens(protocol.MaxWireSize))
	}
}

// TestFloodGuardBounded: a flood of fresh author IDs does not grow the
// guard's tables without bound.
func TestFloodGuardBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	g := newFloodGuard(DefaultRateLimits(), clk.Now, discard)
	sp := protocol.SpaceID("s")
	for i := range maxBuckets + 10 {
		author := peer.ID(fmt.Sprint("sybil", i))
		g.forwarded(sp, author, 100)
		g.authored(sp, author, author, true, 100)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.authors.Len() > maxBuckets || g.peers.Len() > maxBuckets {
		t.Errorf("%d author and %d peer buckets, want at most %d", g.authors.Len(), g.peers.Len(), maxBuckets)
	}
}

// gateFunc is a Gate of functions.
type gateFunc struct {
	known func(peer.ID) bool
	admit func(*protocol.Message) error
}

func (g gateFunc) Known(_ protocol.ID, a peer.ID) bool { return g.known(a) }
func (g gateFunc) Admit(m *protocol.Message) error     { return g.admit(m) }

func validate(v pubsub.ValidatorEx, from peer.ID, wire []byte) pubsub.ValidationResult {
	return v(context.Background(), from, &pubsub.Message{Message: &pb.Message{Data: wire}})
}

// TestValidatorGate: the gate's refusals and the rates are ignores, not
// rejects; the node's own messages pass them.
func TestValidatorGate(t *testing.T) {
	space := protocol.SpaceID("test/gate")
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	author, _ := peer.IDFromPrivateKey(key)
	var refuse atomic.Bool
	gate := gateFunc{
		known: func(peer.ID) bool { return false },
		admit: func(*protocol.Message) error {
			if refuse.Load() {
				return errors.New("over quota")
			}
			return nil
		},
	}
	g := newFloodGuard(RateLimits{Author: Rate{PerSecond: 1, Burst: 2}, Strangers: Rate{PerSecond: 1, Burst: 100}, Peer: Rate{PerSecond: 1, Burst: 100}}, time.Now, discard)
	var reasons []string
	val := validator(space, "self", protocol.DefaultLimits(), time.Now, protocol.NewVerifier(), g, gate, func(r string) { reasons = append(reasons, r) }, nil, discard)
	msg := func(i int) []byte { return sign(t, key, space, fmt.Sprint("m", i), nil).Encode() }

	if got := validate(val, author, msg(0)); got != pubsub.ValidationAccept {
		t.Fatalf("first message: %v", got)
	}
	refuse.Store(true)
	if got := validate(val, author, msg(1)); got != pubsub.ValidationIgnore {
		t.Errorf("message the gate refuses: %v, want ignore", got)
	}
	refuse.Store(false)
	if got := validate(val, author, msg(2)); got != pubsub.ValidationIgnore {
		t.Errorf("message over the author's burst of 2: %v, want ignore", got)
	}
	for i := range 5 {
		if got := validate(val, "self", msg(10+i)); got != pubsub.ValidationAccept {
			t.Errorf("own message %d: %v, want accept (no rate, no gate)", i, got)
		}
	}
	if want := []string{"declined", "rate_author"}; !slices.Equal(reasons, want) {
		t.Errorf("refusals reported %v, want %v", reasons, want)
	}
}

// TestGossipFloodGraylisted: a raw peer that publishes its own valid
// messages as fast as it can is throttled to its rate and graylisted
// within seconds, while a member's messages still arrive.
func TestGossipFloodGraylisted(t *testing.T) {
	space := protocol.SpaceID("test/flood")
	a, _ := newTestMesh(t, Config{})
	b, keyB := newTestMesh(t, Config{}, a)
	sa, sb := newRecorder(), newRecorder()
	if err := a.JoinSpace(space, sa); err != nil {
		t.Fatal(err)
	}
	if err := b.JoinSpace(space, sb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "A–B gossip mesh", func() bool {
		return containsPeer(b.meshPeers(space), a.ID()) && containsPeer(a.meshPeers(space), b.ID())
	})
	raw := newRawGossip(t, space, a)

	// Signed beforehand, so that the flood goes as fast as gossip takes it.
	flood := make([][]byte, 3000)
	for i := range flood {
		flood[i] = sign(t, raw.key, space, fmt.Sprint("flood ", i), nil).Encode()
	}
	start := time.Now()
	var sent atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, w := range flood {
			select {
			case <-stop:
				return
			default:
			}
			if err := raw.topic.Publish(t.Context(), w); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	defer func() { close(stop); <-done }()

	waitFor(t, 10*time.Second, "A to graylist the flooder", func() bool {
		s, ok := a.GossipScore(raw.id)
		return ok && s < GraylistThreshold
	})
	graylisted := time.Since(start)
	fromRaw := func(r *recorder) int {
		n := 0
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range r.msgs {
			if m.Sender() == raw.id {
				n++
			}
		}
		return n
	}
	accepted := fromRaw(sa)
	t.Logf("flooder graylisted after %v: sent %d, A accepted %d, stats %+v", graylisted.Round(time.Millisecond), sent.Load(), accepted, a.FloodStats())
	// The burst, the rate for the time it took, the grace and the
	// penalty's way down: nothing like the thousands sent.
	if limit := 200 + int(50*graylisted.Seconds()) + 50; accepted > limit {
		t.Errorf("A accepted %d of the flooder's messages in %v, want at most %d", accepted, graylisted, limit)
	}
	// Graylisted, it is disconnected; nothing more gets in, and B still
	// hears A's members.
	// Messages already read off the wire when the score crossed the line
	// still finish validation; what counts is that nothing more comes in
	// once the flooder is cut off.
	waitFor(t, 10*time.Second, "A to disconnect the flooder", func() bool {
		return a.h.Network().Connectedness(raw.id) != network.Connected
	})
	// Cut off, the flooder's count must settle (a full second with
	// nothing new) within the deadline, a pipeline's worth above the count
	// at graylisting.
	drained, still := fromRaw(sa), time.Now()
	waitFor(t, 10*time.Second, "nothing more from the flooder for a second", func() bool {
		if n := fromRaw(sa); n != drained {
			drained, still = n, time.Now()
		}
		return time.Since(still) >= time.Second
	})
	if drained > accepted+300 {
		t.Errorf("A accepted %d more flood messages after graylisting", drained-accepted)
	}
	msg := sign(t, keyB, space, "member still heard", nil)
	if err := b.Publish(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a member's message on A during the flood", func() bool { return sa.has(msg.ID) })
	if s, _ := a.GossipScore(b.ID()); s < 0 {
		t.Errorf("member's score %v, want not negative", s)
	}
}
