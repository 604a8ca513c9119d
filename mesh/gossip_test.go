package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// badWires are wire messages for space that no node may accept, each with
// the validation result it must get, and one valid message. Limits of
// smallLimits make the oversized one too large.
type badWire struct {
	name string
	wire []byte
	want pubsub.ValidationResult
}

var smallLimits = func() protocol.Limits {
	l := protocol.DefaultLimits()
	l.MaxSize = 4 << 10
	return l
}()

func badWires(tb testing.TB, key crypto.PrivKey, space protocol.ID) []badWire {
	tb.Helper()
	flipSig := sign(tb, key, space, "bad signature", nil).Encode()
	flipSig[len(flipSig)-1] ^= 0x01

	tampered := sign(tb, key, space, "hello world", nil).Encode()
	i := bytes.Index(tampered, []byte("hello world"))
	tampered[i] = 'j' // "jello world": still valid JSON, no longer what was signed

	other, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	otherID, _ := peer.IDFromPrivateKey(other)
	keyID, _ := peer.IDFromPrivateKey(key)
	// Signed by key, claiming to be from other: same length, so the frame holds.
	forged := sign(tb, key, space, "forged", nil)
	forgedWire := bytes.Replace(forged.Encode(), []byte(keyID.String()), []byte(otherID.String()), 1)

	oversized := sign(tb, key, space, strings.Repeat("x", 8<<10), nil).Encode()
	wrongSpace := sign(tb, key, protocol.SpaceID("elsewhere"), "wrong space", nil).Encode()
	expired := sign(tb, key, space, "expired", func(d *protocol.Draft) {
		d.CreatedAt = time.Now().Add(-2 * time.Hour)
		d.TTL = time.Hour
	}).Encode()
	future := sign(tb, key, space, "future", func(d *protocol.Draft) {
		d.CreatedAt = time.Now().Add(time.Hour)
	}).Encode()

	return []badWire{
		{"bad signature", flipSig, pubsub.ValidationReject},
		{"tampered body", tampered, pubsub.ValidationReject},
		{"forged sender", forgedWire, pubsub.ValidationReject},
		// Over this node's limit, within the protocol's: another node may
		// take it, so its relay is not to be punished.
		{"oversized", oversized, pubsub.ValidationIgnore},
		{"wrong space", wrongSpace, pubsub.ValidationReject},
		{"garbage", []byte("\x01\x05hello"), pubsub.ValidationReject},
		{"empty", nil, pubsub.ValidationReject},
		{"expired", expired, pubsub.ValidationIgnore},
		{"clock skew", future, pubsub.ValidationIgnore},
	}
}

func TestValidator(t *testing.T) {
	space := protocol.SpaceID("test/validator")
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	var reasons []string
	flight := newInflight(time.Now)
	val := validator(space, "self", smallLimits, time.Now, protocol.NewVerifier(), newFloodGuard(DefaultRateLimits(), time.Now, slog.New(slog.DiscardHandler)), nil,
		func(r string) { reasons = append(reasons, r) }, flight, slog.New(slog.DiscardHandler))

	good := sign(t, key, space, "fine", nil)
	pm := &pubsub.Message{Message: &pb.Message{Data: good.Encode()}}
	if got := val(t.Context(), "", pm); got != pubsub.ValidationAccept {
		t.Fatalf("valid message: %v", got)
	}
	if got, ok := pm.ValidatorData.(*accepted); !ok || got.msg.ID != good.ID {
		t.Fatalf("ValidatorData = %#v, want the decoded message", pm.ValidatorData)
	}

	if len(reasons) != 0 {
		t.Fatalf("a valid message reported refused: %v", reasons)
	}
	want := map[string]string{ // the reason each refusal reports
		"bad signature": "bad_signature", "tampered body": "bad_signature", "forged sender": "bad_signature",
		"oversized": "too_large", "wrong space": "wrong_space", "garbage": "malformed", "empty": "malformed",
		"expired": "expired", "clock skew": "clock_skew",
	}
	for _, tc := range badWires(t, key, space) {
		reasons = nil
		pm := &pubsub.Message{Message: &pb.Message{Data: tc.wire}}
		if got := val(t.Context(), "", pm); got != tc.want {
			t.Errorf("%s: result %v, want %v", tc.name, got, tc.want)
		}
		if len(reasons) != 1 || reasons[0] != want[tc.name] {
			t.Errorf("%s: reported %v, want [%s]", tc.name, reasons, want[tc.name])
		}
		if pm.ValidatorData != nil {
			t.Errorf("%s: ValidatorData set on a refused message", tc.name)
		}
	}
	// Only the accepted message is on its way to the Sink (gap repair
	// waits for it rather than fetching it).
	if !flight.has(good.ID) || flight.len() != 1 {
		t.Errorf("in flight: %d messages, the accepted one %v; want it alone", flight.len(), flight.has(good.ID))
	}
}

// TestSyncSinkDeclinesInflight: a message sync fetches while gossip has it
// on its way to the Sink is declined (not news: neither spread nor asked
// for its parents); any other goes to the Sink.
func TestSyncSinkDeclinesInflight(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	space := protocol.SpaceID("test/syncsink")
	coming, other := sign(t, key, space, "coming", nil), sign(t, key, space, "other", nil)
	rec := newRecorder()
	flight := newInflight(time.Now)
	flight.add(coming.ID)
	var stored storedRing
	s := syncSink{Sink: rec, flight: flight, stored: &stored}
	if err := s.Deliver(t.Context(), coming); !errors.Is(err, ErrDeclined) {
		t.Errorf("message on its way by gossip: %v, want ErrDeclined", err)
	}
	if err := s.Deliver(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if rec.has(coming.ID) || !rec.has(other.ID) {
		t.Errorf("sink got %v; want only the message not on its way", rec.ids())
	}
	if stored.has(coming.ID) || !stored.has(other.ID) {
		t.Error("gap repair not told of exactly the message the sink took")
	}
	flight.done(coming.ID)
	if err := s.Deliver(t.Context(), coming); err != nil || !rec.has(coming.ID) {
		t.Errorf("once gossip is done with it: %v", err)
	}
}

func TestGossipID(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	space := protocol.SpaceID("test/id")
	wire := sign(t, key, space, "id", nil).Encode()
	other := sign(t, key, space, "other", nil).Encode()

	id := gossipID(&pb.Message{Data: wire})
	if len(id) != 22 {
		t.Errorf("gossip ID %q: %d characters, want 22 (16 bytes in base64)", id, len(id))
	}
	if again := gossipID(&pb.Message{Data: bytes.Clone(wire)}); again != id {
		t.Errorf("the same wire gives gossip IDs %q and %q", id, again)
	}
	if gossipID(&pb.Message{Data: other}) == id {
		t.Error("two messages share a gossip ID")
	}
	// A copy with a corrupted signature must not share the ID, or it could
	// shadow the real message in the seen-cache.
	bad := bytes.Clone(wire)
	bad[len(bad)-1] ^= 1
	if gossipID(&pb.Message{Data: bad}) == id {
		t.Error("corrupted signature gives the same gossip ID")
	}
	// Anything else gets an ID too (the validator rejects it).
	seen := map[string]bool{id: true}
	for _, data := range [][]byte{nil, []byte("junk"), wire[:len(wire)-1], append(bytes.Clone(wire), 0)} {
		got := gossipID(&pb.Message{Data: data})
		if seen[got] {
			t.Errorf("gossipID(%q…) = %q, given before", data[:min(len(data), 8)], got)
		}
		seen[got] = true
	}
}

// A plain gossipsub peer, connected to A only, publishes invalid messages:
// none reaches a Sink on A or B (A must not forward them), and A graylists
// it. Another raw peer publishes a corrupted copy of a valid message and
// then the message itself, which reaches both: the copy did not shadow it.
func TestInvalidMessagesNeverDelivered(t *testing.T) {
	space := protocol.SpaceID("test/invalid")
	start := time.Now()
	phase := func(what string) { t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond)) }
	a, _ := newTestMesh(t, Config{Limits: smallLimits})
	b, _ := newTestMesh(t, Config{Limits: smallLimits}, a)
	sa, sb := newRecorder(), newRecorder()
	if err := a.JoinSpace(space, sa); err != nil {
		t.Fatal(err)
	}
	if err := b.JoinSpace(space, sb); err != nil {
		t.Fatal(err)
	}
	bad := newRawGossip(t, space, a)
	honest := newRawGossip(t, space, a)
	// Wait for the gossip mesh: a message reaching A before A grafts B never
	// reaches B by gossip (that is sync's job).
	waitFor(t, 10*time.Second, "A–B gossip mesh", func() bool {
		return containsPeer(b.SpacePeers(space), a.ID()) && containsPeer(a.meshPeers(space), b.ID())
	})
	phase("gossip mesh formed")

	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	for _, tc := range badWires(t, key, space) {
		if err := bad.topic.Publish(t.Context(), tc.wire); err != nil {
			t.Fatalf("raw publish %s: %v", tc.name, err)
		}
	}
	waitFor(t, 10*time.Second, "A to graylist the peer that sent invalid messages", func() bool {
		s, ok := a.GossipScore(bad.id)
		return ok && s < GraylistThreshold
	})
	phase("invalid sender graylisted")
	// A corrupted copy of the valid message goes first: it must not shadow
	// the real one in the gossip seen-cache.
	good := sign(t, key, space, "valid, after the bad ones", nil)
	// A copy: Encode returns the message's own bytes.
	shadow := bytes.Clone(good.Encode())
	shadow[len(shadow)-1] ^= 1
	if err := honest.topic.Publish(t.Context(), shadow); err != nil {
		t.Fatal(err)
	}
	if err := honest.topic.Publish(t.Context(), good.Encode()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the valid message on A", func() bool { return sa.has(good.ID) })
	waitFor(t, 15*time.Second, "the valid message on B", func() bool { return sb.has(good.ID) })
	phase("valid message delivered")
	// The raw peer sent in order over one stream and A validates as it
	// reads, so anything invalid would have arrived by now. A second valid
	// message flushes the path once more before checking.
	flush := sign(t, key, space, "flush", nil)
	if err := honest.topic.Publish(t.Context(), flush.Encode()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the flush message on A and B", func() bool { return sa.has(flush.ID) && sb.has(flush.ID) })
	phase("flush message delivered")
	for name, s := range map[string]*recorder{"A": sa, "B": sb} {
		if got := s.ids(); len(got) != 2 {
			t.Errorf("%s's sink holds %d messages, want only the 2 valid ones", name, len(got))
		}
		s.mu.Lock()
		if m := s.msgs[good.ID]; m == nil || !bytes.Equal(m.Encode(), good.Encode()) {
			t.Errorf("%s's sink does not hold the valid message exactly as signed", name)
		}
		s.mu.Unlock()
	}
	if s, _ := a.GossipScore(honest.id); s < GraylistThreshold {
		t.Errorf("the peer that sent one corrupted copy is graylisted (score %v)", s)
	}
}

// batchRecorder is a recorder that also takes batches, counting them.
type batchRecorder struct {
	*recorder
	batches int
}

func (b *batchRecorder) DeliverBatch(ctx context.Context, ms []*protocol.Message) []error {
	b.batches++
	errs := make([]error, len(ms))
	for i, m := range ms {
		errs[i] = b.Deliver(ctx, m)
	}
	return errs
}

// TestSyncSinkBatches: a Sink that takes batches gets a session's
// messages as one batch through the sync wrapper, less those on their way
// by gossip, which are declined; gap repair is told of what it took.
func TestSyncSinkBatches(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	space := protocol.SpaceID("test/syncbatch")
	coming, a, b := sign(t, key, space, "coming", nil), sign(t, key, space, "a", nil), sign(t, key, space, "b", nil)
	rec := &batchRecorder{recorder: newRecorder()}
	flight := newInflight(time.Now)
	flight.add(coming.ID)
	var stored storedRing
	s, ok := newSyncSink(rec, flight, &stored, nil, nil).(reconcile.BatchSink)
	if !ok {
		t.Fatal("the sync wrapper of a batch Sink takes no batches")
	}
	errs := s.DeliverBatch(t.Context(), []*protocol.Message{a, coming, b})
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], ErrDeclined) || errs[2] != nil {
		t.Fatalf("results %v, want nil, declined, nil", errs)
	}
	if rec.batches != 1 || !rec.has(a.ID, b.ID) || rec.has(coming.ID) {
		t.Errorf("%d batches, sink holds %v; want one batch of the two not on their way", rec.batches, rec.ids())
	}
	if !stored.has(a.ID) || !stored.has(b.ID) || stored.has(coming.ID) {
		t.Error("gap repair not told of exactly the messages the sink took")
	}
	if _, ok := newSyncSink(newRecorder(), flight, &stored, nil, nil).(reconcile.BatchSink); ok {
		t.Error("the sync wrapper of a Sink without batches claims to take them")
	}
}

// TestSyncSinkStale: what sync stores is counted as news to spread only
// when gossip should have brought it by then (older than gossip's recent
// lateness), one at a time or in a batch; a fresher message is stored all
// the same (gossip may never bring it), and not counted.
func TestSyncSinkStale(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	space := protocol.SpaceID("test/syncstale")
	a, b, c := sign(t, key, space, "a", nil), sign(t, key, space, "b", nil), sign(t, key, space, "c", nil)
	created := a.Created()
	var l lateness
	now := created
	fresh := func(m *protocol.Message) bool { return l.fresh(m.Created(), now) }

	rec := &batchRecorder{recorder: newRecorder()}
	var stored storedRing
	var stale atomic.Int64
	s := newSyncSink(rec, newInflight(time.Now), &stored, fresh, &stale)
	if err := s.Deliver(t.Context(), a); err != nil || stale.Load() != 1 {
		t.Fatalf("gossip prompt: %v, %d stale; want the message taken and counted", err, stale.Load())
	}
	l.note(a.Sender(), true, created.Add(-time.Second), created) // gossip a second late
	bs := s.(reconcile.BatchSink)
	if errs := bs.DeliverBatch(t.Context(), []*protocol.Message{b}); errs[0] != nil {
		t.Errorf("fresh message in a batch: %v", errs[0])
	}
	if err := s.Deliver(t.Context(), c); err != nil {
		t.Errorf("fresh message: %v", err)
	}
	if !rec.has(b.ID, c.ID) || !stored.has(b.ID) || !stored.has(c.ID) {
		t.Error("fresh messages not stored")
	}
	if n := stale.Load(); n != 1 {
		t.Errorf("%d stale after fresh messages, want still 1", n)
	}
	now = created.Add(2 * time.Second)
	if errs := bs.DeliverBatch(t.Context(), []*protocol.Message{b, c}); errs[0] != nil || errs[1] != nil || stale.Load() != 3 {
		t.Errorf("messages older than gossip's lateness: %v, %d stale; want both counted (3)", errs, stale.Load())
	}
}
