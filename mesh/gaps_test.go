package mesh

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

func gapID(i int) protocol.ID { return protocol.SpaceID(fmt.Sprint("msg", i)) }

// TestGapsCoalesce: gaps noted while a check is armed join it (one check,
// so one repair session at most, per space); parents that arrived by the
// check start nothing and disarm it; the records are bounded.
func TestGapsCoalesce(t *testing.T) {
	var g gaps
	if !g.note([]protocol.ID{gapID(1)}, "p1") {
		t.Fatal("first gap did not arm the check")
	}
	for i := 2; i < 10; i++ {
		if g.note([]protocol.ID{gapID(i)}, peer.ID(fmt.Sprint("p", i))) {
			t.Fatalf("gap %d armed a second check", i)
		}
	}
	if len(g.missing) != 9 {
		t.Fatalf("%d parents noted, want 9", len(g.missing))
	}
	arrived := func(protocol.ID) (bool, error) { return true, nil }
	notComing := func(protocol.ID) bool { return false }
	if p, again := g.check(arrived, notComing); p != "" || again {
		t.Errorf("every parent arrived, yet repair from %q (again %v)", p, again)
	}
	if !g.note([]protocol.ID{gapID(1)}, "p1") {
		t.Error("after a check with nothing left, a new gap did not arm the check")
	}
	g.check(arrived, notComing)
	many := make([]protocol.ID, 2*maxGapParents)
	for i := range many {
		many[i] = gapID(i)
	}
	g.note(many, "p")
	if n := len(g.missing); n != maxGapParents {
		t.Errorf("%d parents kept, want at most %d", n, maxGapParents)
	}
}

// TestGapsOnePeerPerCheck: each check repairs from one peer, the relay of
// the first parent neither stored nor on its way; parents it relayed are
// left to its session, those of other relays wait for the next check, so
// every relay of a parent still missing is asked in turn (the relay of a
// child need not hold its parent), each once, and then the check stops.
func TestGapsOnePeerPerCheck(t *testing.T) {
	var g gaps
	lacks := func(x protocol.ID) (bool, error) { return x == gapID(2), nil } // 2 arrived
	notComing := func(protocol.ID) bool { return false }
	g.note([]protocol.ID{gapID(1)}, "p1")
	g.note([]protocol.ID{gapID(2)}, "p2")
	g.note([]protocol.ID{gapID(3)}, "p3")
	g.note([]protocol.ID{gapID(4)}, "p1")
	g.note([]protocol.ID{gapID(5)}, "p5")
	var asked []peer.ID
	for range 10 {
		p, again := g.check(lacks, notComing)
		if p != "" {
			asked = append(asked, p)
		}
		if !again {
			break
		}
	}
	if want := []peer.ID{"p1", "p3", "p5"}; !slices.Equal(asked, want) {
		t.Errorf("repaired from %v, want %v (one per check, each relay of a missing parent once)", asked, want)
	}
	if g.armed || len(g.missing) != 0 {
		t.Errorf("check still armed (%v) with %d parents after asking every relay", g.armed, len(g.missing))
	}
}

// TestGapsWaitForComing: a missing parent that gossip has accepted and the
// store not yet taken starts no repair: it is waited for, check after
// check, and the gap closes without a session once it is stored. One that
// stops coming (dropped on its way) is then repaired.
func TestGapsWaitForComing(t *testing.T) {
	var g gaps
	stored := false
	has := func(protocol.ID) (bool, error) { return stored, nil }
	coming := true
	isComing := func(protocol.ID) bool { return coming }
	g.note([]protocol.ID{gapID(1)}, "p1")
	for i := range 3 {
		if p, again := g.check(has, isComing); p != "" || !again {
			t.Fatalf("check %d: repair from %q, again %v; want none, again (the parent is on its way)", i, p, again)
		}
	}
	coming = false
	if p, _ := g.check(has, isComing); p != "p1" {
		t.Fatalf("parent no longer coming nor stored: repair from %q, want p1", p)
	}
	g.note([]protocol.ID{gapID(1)}, "p1")
	coming, stored = true, false
	g.check(has, isComing)
	stored = true
	if p, again := g.check(has, isComing); p != "" || again {
		t.Errorf("parent stored: repair from %q, again %v; want nothing", p, again)
	}
}

// TestInflight: accepted messages are on their way until done, and for
// inflightTTL at most.
func TestInflight(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newInflight(func() time.Time { return now })
	f.add(gapID(1))
	f.add(gapID(2))
	if !f.has(gapID(1)) || !f.has(gapID(2)) || f.has(gapID(3)) {
		t.Fatal("has does not match what was added")
	}
	f.done(gapID(1))
	if f.has(gapID(1)) {
		t.Error("done, yet still on its way")
	}
	now = now.Add(inflightTTL)
	if f.has(gapID(2)) {
		t.Error("never done, yet on its way after inflightTTL")
	}
	f.add(gapID(3)) // sweeps what expired
	if f.len() != 1 {
		t.Errorf("%d entries after a sweep, want 1", f.len())
	}
	var nilf *inflight
	nilf.add(gapID(1))
	nilf.done(gapID(1))
	if nilf.has(gapID(1)) {
		t.Error("a nil inflight has entries")
	}
}

// TestStoredRing: the last recentStored IDs added are remembered, the
// oldest forgotten first.
func TestStoredRing(t *testing.T) {
	var r storedRing
	if r.has(gapID(0)) {
		t.Fatal("empty ring has an ID")
	}
	for i := range recentStored + 1 {
		r.add(gapID(i))
	}
	r.add(gapID(recentStored)) // again: no change
	if r.has(gapID(0)) {
		t.Error("the oldest ID is still remembered")
	}
	for _, i := range []int{1, recentStored / 2, recentStored} {
		if !r.has(gapID(i)) {
			t.Errorf("ID %d forgotten", i)
		}
	}
	if len(r.ids) != recentStored {
		t.Errorf("%d IDs held, want %d", len(r.ids), recentStored)
	}
}

// TestLateness: a gap waits gapDelay while gossip is prompt, twice the
// largest recent lateness once it is slower, that wait halving every
// latenessHalfLife, never more than maxGapDelay; a message from a clock
// ahead (delivered "before" it was created) changes nothing.
func TestLateness(t *testing.T) {
	now := time.Unix(1000, 0)
	var l lateness
	author := peer.ID("author")
	steps := []struct {
		created, at time.Duration // relative to now
		after       time.Duration // when to ask
		want        time.Duration
	}{
		{-10 * time.Millisecond, 0, 0, gapDelay},                             // prompt
		{-time.Second, 0, 0, 2 * time.Second},                                // a second late
		{-100 * time.Millisecond, 0, latenessHalfLife, time.Second},          // halved; a prompt one does not lower it
		{time.Hour, latenessHalfLife, 2 * latenessHalfLife, time.Second / 2}, // from the future: no change
		{0, 2 * latenessHalfLife, 5 * latenessHalfLife, gapDelay},            // decayed below the floor
		{-time.Hour, 5 * latenessHalfLife, 5 * latenessHalfLife, maxGapDelay},
	}
	for i, s := range steps {
		l.note(author, true, now.Add(s.created+s.at), now.Add(s.at))
		if got := l.delay(now.Add(s.after)); got != s.want {
			t.Errorf("step %d: delay %v, want %v", i, got, s.want)
		}
	}
}

// TestLatenessFresh: a message is fresh while younger than the lateness
// remembered (or as far in the future); nothing is while gossip is prompt.
func TestLatenessFresh(t *testing.T) {
	now := time.Unix(1000, 0)
	var l lateness
	if l.fresh(now, now) {
		t.Error("fresh while gossip has never been late")
	}
	l.note("author", true, now.Add(-time.Second), now)
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {900 * time.Millisecond, true}, {1100 * time.Millisecond, false}, {-900 * time.Millisecond, true}, {-2 * time.Second, false}} {
		if got := l.fresh(now.Add(-c.age), now); got != c.want {
			t.Errorf("age %v: fresh %v, want %v", c.age, got, c.want)
		}
	}
}

// TestLatenessRobust: one author back-dating its messages, known or not,
// or a flock of fresh strangers doing so, does not raise the lateness
// while honest authors are prompt; half the known authors being late
// does. The strangers' and the known authors' places stay bounded.
func TestLatenessRobust(t *testing.T) {
	now := time.Unix(1000, 0)
	prompt := now.Add(-5 * time.Millisecond)
	old := now.Add(-time.Hour)
	check := func(what string, l *lateness, want time.Duration) {
		t.Helper()
		if got := l.delay(now); got != want {
			t.Errorf("%s: delay %v, want %v", what, got, want)
		}
		if want == gapDelay && l.fresh(now.Add(-time.Second), now) {
			t.Errorf("%s: a message a second old counts as fresh", what)
		}
	}

	var one lateness // one known author back-dates, one known is prompt
	one.note("honest", true, prompt, now)
	one.note("attacker", true, old, now)
	check("one known attacker", &one, gapDelay)

	var stranger lateness // one stranger back-dates, one stranger is prompt
	stranger.note("honest", false, prompt, now)
	stranger.note("attacker", false, old, now)
	check("one stranger attacker", &stranger, gapDelay)

	var flock lateness // 1,000 fresh peer IDs back-date; one known author is prompt
	flock.note("honest", true, prompt, now)
	for i := range 1000 {
		flock.note(peer.ID(fmt.Sprint("sybil", i)), false, old, now)
	}
	check("a flock of strangers", &flock, gapDelay)
	if len(flock.strangers) > maxLateStrangers {
		t.Errorf("%d strangers kept, want at most %d", len(flock.strangers), maxLateStrangers)
	}

	var late lateness // two known authors of three really are a second late
	late.note("a", true, prompt, now)
	late.note("b", true, now.Add(-time.Second), now)
	late.note("c", true, now.Add(-time.Second), now)
	check("most authors late", &late, 2*time.Second)

	var quiet lateness // five authors prompt 5 min ago, quiet since; one posting now a second late
	for i := range 5 {
		quiet.note(peer.ID(fmt.Sprint("quiet", i)), true, now.Add(-5*time.Minute), now.Add(-5*time.Minute))
	}
	quiet.note("busy", true, now.Add(-time.Second), now)
	check("quiet authors", &quiet, 2*time.Second)

	var many lateness
	for i := range 2 * maxLateAuthors {
		many.note(peer.ID(fmt.Sprint("author", i)), true, prompt, now)
	}
	if len(many.known) > maxLateAuthors {
		t.Errorf("%d known authors kept, want at most %d", len(many.known), maxLateAuthors)
	}
}

// TestBackdatedMessagesDoNotRaiseLateness: an author publishing messages
// dated an hour back (valid: within MaxAge) while another publishes
// promptly does not make gaps wait longer, or old messages look fresh,
// at the node that receives them.
func TestBackdatedMessagesDoNotRaiseLateness(t *testing.T) {
	space := protocol.SpaceID("test/backdated")
	a, _ := newTestMesh(t, Config{})
	b, _ := newTestMesh(t, Config{}, a)
	sink := newRecorder()
	for _, m := range []*Mesh{a, b} {
		var s Sink = newRecorder()
		if m == a {
			s = sink
		}
		if err := m.JoinSpace(space, s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "gossip mesh", func() bool {
		return containsPeer(a.meshPeers(space), b.ID()) && containsPeer(b.meshPeers(space), a.ID())
	})
	attacker, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	honest, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	var ids []protocol.ID
	for i := range 20 {
		msg := sign(t, honest, space, fmt.Sprint("now ", i), nil)
		back := sign(t, attacker, space, fmt.Sprint("old ", i), func(d *protocol.Draft) { d.CreatedAt = time.Now().Add(-time.Hour) })
		for _, m := range []*protocol.Message{msg, back} {
			if err := b.Publish(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
		}
	}
	waitFor(t, 10*time.Second, "messages delivered", func() bool { return sink.has(ids...) })
	now := time.Now()
	// The honest messages' own lateness (milliseconds, or more on a
	// loaded machine) sets the wait; the back-dated ones would set 5 s.
	if d := a.late.delay(now); d >= maxGapDelay/2 {
		t.Errorf("after back-dated messages a gap waits %v, want the honest author's (under %v)", d, maxGapDelay/2)
	}
	if a.late.fresh(now.Add(-time.Hour), now) {
		t.Error("a message an hour old counts as fresh")
	}
}

// gossipBatcher is a Sink that takes gossip's messages a batch at a time
// (GossipBatchSink), holding the first batch until release is closed,
// and declining one message.
type gossipBatcher struct {
	*recorder
	release chan struct{}
	decline protocol.ID
	mu      sync.Mutex
	sizes   []int
	single  int // calls of Deliver
}

func (g *gossipBatcher) Deliver(ctx context.Context, m *protocol.Message) error {
	g.mu.Lock()
	g.single++
	g.mu.Unlock()
	return g.recorder.Deliver(ctx, m)
}

func (g *gossipBatcher) DeliverGossip(ctx context.Context, ms []*protocol.Message) []error {
	<-g.release
	g.mu.Lock()
	g.sizes = append(g.sizes, len(ms))
	g.mu.Unlock()
	errs := make([]error, len(ms))
	for i, m := range ms {
		if m.ID == g.decline {
			errs[i] = ErrDeclined
			continue
		}
		errs[i] = g.recorder.Deliver(ctx, m)
	}
	return errs
}

// TestGossipBatches: a Sink that takes batches gets what gossip brought
// while it stored the batch before in one call, never one at a time; what
// it stored is noted as stored, what it declined is not, and neither is
// on its way any more.
func TestGossipBatches(t *testing.T) {
	space := protocol.SpaceID("test/batches")
	a, _ := newTestMesh(t, Config{Rates: RateLimits{Off: true}})
	b, _ := newTestMesh(t, Config{Rates: RateLimits{Off: true}}, a)
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	msgs := make([]*protocol.Message, 50)
	ids := make([]protocol.ID, len(msgs))
	for i := range msgs {
		msgs[i] = sign(t, key, space, fmt.Sprint("m", i), nil)
		ids[i] = msgs[i].ID
	}
	sink := &gossipBatcher{recorder: newRecorder(), release: make(chan struct{}), decline: msgs[10].ID}
	if err := a.JoinSpace(space, sink); err != nil {
		t.Fatal(err)
	}
	if err := b.JoinSpace(space, newRecorder()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "gossip mesh", func() bool {
		return containsPeer(a.meshPeers(space), b.ID()) && containsPeer(b.meshPeers(space), a.ID())
	})
	for _, m := range msgs {
		if err := b.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	// The first batch is held; the rest queue up behind it.
	waitFor(t, 10*time.Second, "every message accepted and queued", func() bool { return a.flight.len() == len(msgs) })
	close(sink.release)
	waitFor(t, 10*time.Second, "every message delivered", func() bool {
		return sink.has(ids[:10]...) && sink.has(ids[11:]...) && a.flight.len() == 0
	})
	sink.mu.Lock()
	sizes, single := sink.sizes, sink.single
	sink.mu.Unlock()
	if single != 0 || len(sizes) < 2 || slices.Max(sizes[1:]) < 2 {
		t.Errorf("batches of %v and %d single deliveries, want batches after the first one held", sizes, single)
	}
	if a.stored.has(msgs[10].ID) {
		t.Error("the declined message is noted as stored")
	}
	for _, m := range msgs[11:] {
		if !a.stored.has(m.ID) {
			t.Fatalf("%s delivered but not noted as stored", m.ID)
		}
	}
}
