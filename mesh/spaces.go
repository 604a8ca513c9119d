package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// ErrDeclined is what a Sink's error wraps for a valid message the node
// does not keep (over a quota or size limit of its own): sync drops it
// and goes on, where another error would end the session.
var ErrDeclined = reconcile.ErrDeclined

// Sink receives every valid message of a joined space that arrives from the
// network; messages this node published itself are not delivered back by
// gossip. A Sink that also implements Gate has a say in what gossip
// accepts. Deliver is called from the space's subscription goroutine and,
// with sync on, from sync sessions, concurrently: it must be safe for
// concurrent use and idempotent (the same message can arrive both ways),
// and should store the message and return. ctx ends when the space is left
// or the mesh closes.
type Sink interface {
	Deliver(ctx context.Context, m *protocol.Message) error
}

// subBuffer is how many validated messages may wait for the Sink before
// gossipsub drops new ones for this subscriber (sync repairs such gaps).
const subBuffer = 128

// space is one joined space: its topic, subscription and loops.
type space struct {
	id     protocol.ID
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	cancel context.CancelFunc
	wg     sync.WaitGroup
	gaps   gaps      // waiting for gossip to fill them (see repairGap)
	flight *inflight // the mesh's: accepted by gossip, not yet through the Sink
	// stale counts the messages sync stored that gossip should have
	// brought by then (see syncSink), since spread last looked.
	stale atomic.Int64
	// circuit: the members reached only through a relay (see circuitPeers).
	circuit circuitPeers
}

// JoinSpace subscribes to space's topic, delivering its messages to sink,
// and starts advertising and looking for its members under the space's DHT
// rendezvous. Joining a space already joined does nothing (the first sink
// stays).
func (m *Mesh) JoinSpace(id protocol.ID, sink Sink) error {
	if id.IsZero() {
		return errors.New("join space: zero space ID")
	}
	if sink == nil {
		return errors.New("join space: nil sink")
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.RLock()
	_, joined := m.spaces[id]
	closed := m.closed
	m.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case joined:
		return nil
	}

	name := protocol.Topic(id)
	gate, _ := sink.(Gate)
	var refused func(string)
	if r, ok := sink.(Refusals); ok {
		refused = func(reason string) { r.Refused(id, reason) }
	}
	// Inline: run by gossipsub's validation workers (one per CPU) rather
	// than in a goroutine started for each message; the validator is
	// CPU-bound and never waits (see Gate), so more goroutines than CPUs
	// only added a start and a hand-off to every message received.
	val := validator(id, m.h.ID(), m.lim, m.now, m.verify, m.guard, gate, refused, m.flight, m.log)
	if err := m.ps.RegisterTopicValidator(name, val, pubsub.WithValidatorInline(true)); err != nil {
		return fmt.Errorf("join space %s: validator: %w", id, err)
	}
	topic, err := m.ps.Join(name)
	if err != nil {
		_ = m.ps.UnregisterTopicValidator(name)
		return fmt.Errorf("join space %s: topic: %w", id, err)
	}
	if err := topic.SetScoreParams(topicScoreParams()); err != nil {
		_ = topic.Close()
		_ = m.ps.UnregisterTopicValidator(name)
		return fmt.Errorf("join space %s: score parameters: %w", id, err)
	}
	sub, err := topic.Subscribe(pubsub.WithBufferSize(subBuffer))
	if err != nil {
		_ = topic.Close()
		_ = m.ps.UnregisterTopicValidator(name)
		return fmt.Errorf("join space %s: subscribe: %w", id, err)
	}

	// The space's loops live until LeaveSpace or Close, not for any caller's
	// request, so their context starts afresh.
	ctx, cancel := context.WithCancel(context.Background())
	s := &space{id: id, topic: topic, sub: sub, cancel: cancel, flight: m.flight}
	s.circuit.due = make(chan struct{}, 1)
	ns := protocol.Rendezvous(id)
	if m.rdv != nil {
		ns = m.rdv(id)
	}
	s.wg.Go(func() { m.receiveLoop(ctx, s, sink) })
	if ns != "" {
		s.wg.Go(func() { m.advertiseLoop(ctx, ns) })
		s.wg.Go(func() { m.findLoop(ctx, ns, func(p peer.ID) { m.noteCircuit(id, p) }) })
	}
	s.wg.Go(func() { m.watchMembers(ctx, s) })
	if m.sync != nil {
		m.sync.Join(id, newSyncSink(sink, m.flight, &m.stored, m.fresh, &s.stale))
		s.wg.Go(func() { m.syncEvents(ctx, s) })
		s.wg.Go(func() { m.circuitLoop(ctx, s) })
		if m.syncEvery > 0 {
			s.wg.Go(func() { m.syncLoop(ctx, s) })
		}
	}

	m.mu.Lock()
	m.spaces[id] = s
	m.mu.Unlock()
	m.log.Debug("joined space", "space", id) // the node logs it, with the name
	return nil
}

// LeaveSpace stops the space's loops, unsubscribes, removes its validator
// and closes its topic. Leaving a space not joined does nothing.
func (m *Mesh) LeaveSpace(id protocol.ID) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	s, ok := m.spaces[id]
	delete(m.spaces, id)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if err := m.stopSpace(s); err != nil {
		return fmt.Errorf("leave space %s: %w", id, err)
	}
	m.log.Debug("left space", "space", id)
	return nil
}

// stopSpace tears a space down. The caller holds opMu and has removed s
// from m.spaces.
func (m *Mesh) stopSpace(s *space) error {
	s.sub.Cancel()
	m.endSpace(s)
	// Cancel has been handled by the pubsub loop when it returns, so the
	// topic has no subscription left and may close.
	return errors.Join(
		s.topic.Close(),
		m.ps.UnregisterTopicValidator(s.topic.String()),
	)
}

// endSpace stops weft's part of a space: its sync, its loops (which end
// with the space's context, the receive loop too) and its member list.
func (m *Mesh) endSpace(s *space) {
	if m.sync != nil {
		m.sync.Leave(s.id)
	}
	s.cancel()
	s.wg.Wait()
	m.members.forget(s.id)
}

// syncSink is a space's Sink as sync sessions see it: a message that
// gossip has accepted and not yet stored (see inflight) is declined, as
// gossip is about to store it. A session between two members of a busy
// space always found such messages (those published in the last few
// hundred milliseconds: on their way to one member, stored at the other),
// counted them as news and spread to three more members, which found the
// same: a chain of sessions that ran as long as messages were sent, each
// fetching and checking what gossip brought anyway (1,179 sessions in 10 s
// in a 10-daemon space at 100 msg/s, 832 messages fetched, every one of
// them delivered by gossip as well). Declined, they are neither news nor
// asked for their parents. If the gossip copy then fails to be stored, the
// child that reveals the gap, or the next sync, repairs it.
//
// Under load, gossip takes long enough that a session always finds
// messages gossip has not even accepted yet, which it counted as news and
// spread, and the chain ran as long as messages were sent (1,928 sessions
// in 10 s in a loaded 10-daemon space at 500 msg/s, 1,165 messages
// fetched). Those are stored (gossip may never bring them: a member just
// removed from a private space, a partition), but only the messages older
// than gossip's recent lateness (see lateness.fresh), which gossip should
// have brought by then, count as news to spread (stale; see spread).
//
// A sink's other interfaces (Gate, Refusals) concern gossip only; sync
// sees Deliver alone, and DeliverBatch of a Sink that stores a session's
// messages in batches (reconcile.BatchSink; see syncBatchSink).
type syncSink struct {
	Sink
	flight *inflight
	stored *storedRing                  // told of what the Sink took (nil: not told)
	fresh  func(*protocol.Message) bool // gossip may still bring it (nil: none)
	stale  *atomic.Int64                // counts what the Sink took that is not fresh (nil: not counted)
}

// took notes that the Sink took m.
func (s syncSink) took(m *protocol.Message) {
	if s.stored != nil {
		s.stored.add(m.ID)
	}
	if s.stale != nil && (s.fresh == nil || !s.fresh(m)) {
		s.stale.Add(1)
	}
}

// newSyncSink returns sink as sync sessions see it: a syncSink, or a
// syncBatchSink if sink takes batches.
func newSyncSink(sink Sink, flight *inflight, stored *storedRing, fresh func(*protocol.Message) bool, stale *atomic.Int64) reconcile.Sink {
	s := syncSink{Sink: sink, flight: flight, stored: stored, fresh: fresh, stale: stale}
	if b, ok := sink.(reconcile.BatchSink); ok {
		return syncBatchSink{s, b}
	}
	return s
}

// syncBatchSink is syncSink for a Sink that takes a session's messages in
// batches: the messages on their way by gossip are declined, the rest go
// to the Sink's DeliverBatch at once.
type syncBatchSink struct {
	syncSink
	batch reconcile.BatchSink
}

func (s syncBatchSink) DeliverBatch(ctx context.Context, msgs []*protocol.Message) []error {
	errs := make([]error, len(msgs))
	pass := make([]*protocol.Message, 0, len(msgs))
	at := make([]int, 0, len(msgs))
	for i, m := range msgs {
		if s.flight.has(m.ID) {
			errs[i] = fmt.Errorf("%w: %s is on its way by gossip", ErrDeclined, m.ID)
			continue
		}
		pass = append(pass, m)
		at = append(at, i)
	}
	if len(pass) == 0 {
		return errs
	}
	berrs := s.batch.DeliverBatch(ctx, pass)
	for k, err := range berrs {
		if k >= len(at) {
			break // the session checks the count of results
		}
		errs[at[k]] = err
		if err == nil {
			s.took(pass[k])
		}
	}
	if len(berrs) != len(pass) {
		return berrs // wrong count: let the session say so
	}
	return errs
}

func (s syncSink) Deliver(ctx context.Context, msg *protocol.Message) error {
	if s.flight.has(msg.ID) {
		return fmt.Errorf("%w: %s is on its way by gossip", ErrDeclined, msg.ID)
	}
	err := s.Sink.Deliver(ctx, msg)
	if err == nil {
		s.took(msg)
	}
	return err
}

// GossipBatchSink is what a Sink may also implement to take the messages
// gossip brings a batch at a time: those that arrived while the batch
// before was being stored, up to maxGossipBatch, in the order gossip
// accepted them. DeliverGossip returns one error per message, as Deliver
// would, and must not keep ms (it is reused). With it, each of a space's two queues (members' and strangers';
// see receiveLoop) has one goroutine that stores what it holds at once,
// instead of workers that each took one message and waited for a group
// commit to store it with the others': a message no longer wakes a worker,
// and a group is no longer bounded by the number of workers (4 for
// strangers, every author of a space younger than the node's probation).
type GossipBatchSink interface {
	DeliverGossip(ctx context.Context, ms []*protocol.Message) []error
}

// maxGossipBatch bounds the messages of one DeliverGossip.
const maxGossipBatch = 256

// memberWorkers and strangerWorkers are how many of a space's gossiped
// messages, of known authors and of the others, are handed to the Sink at
// once. A durable store fsyncs each message, and concurrent stores share
// fsyncs: handed over one at a time, a burst of a hundred messages (a
// flooder's first, before it is throttled) would hold every message behind
// it, members' included, for seconds. Strangers get workers of their own,
// fewer, so that their bursts never hold up members' messages.
const (
	memberWorkers   = 12
	strangerWorkers = 4
)

// strangerQueue is how many messages of authors the Gate does not know
// may wait for the Sink; beyond it they are shed (sync may fetch them
// later), rather than make members' messages wait.
const strangerQueue = 256

// received is a gossiped message waiting for the Sink.
type received struct {
	msg   *protocol.Message
	from  peer.ID
	known bool // its author is a known member (see Gate.Known)
}

// receiveLoop hands the space's validated messages to sink: members' and
// strangers' from queues of their own, strangers' shed if they pile up;
// a batch at a time if sink takes batches (see GossipBatchSink), else on
// workers (see memberWorkers).
//
// An author that becomes known while messages of its are still in the
// strangers' queue stays in that queue until they are through: its next
// message in the members' queue could otherwise be stored before them,
// and followers would see a reply before what it answers (seen in CI).
func (m *Mesh) receiveLoop(ctx context.Context, s *space, sink Sink) {
	self := m.h.ID()
	members := make(chan received, subBuffer)
	strangers := make(chan received, strangerQueue)
	var queued authorCounts // authors' messages in the strangers' queue
	through := func(r received) { queued.add(r.msg.Sender(), -1) }
	var wg sync.WaitGroup
	defer wg.Wait()
	if bs, ok := sink.(GossipBatchSink); ok {
		wg.Go(func() { m.batches(ctx, s, bs, members, nil) })
		wg.Go(func() { m.batches(ctx, s, bs, strangers, through) })
	} else {
		work := func(q <-chan received, done func(received)) {
			for {
				select {
				case r := <-q:
					m.deliver(ctx, s, sink, r)
					if done != nil {
						done(r)
					}
				case <-ctx.Done():
					return
				}
			}
		}
		for range memberWorkers {
			wg.Go(func() { work(members, nil) })
		}
		for range strangerWorkers {
			wg.Go(func() { work(strangers, through) })
		}
	}
	shed := 0
	for {
		pm, err := s.sub.Next(ctx)
		if err != nil {
			return // left, closed, or cancelled
		}
		if pm.ReceivedFrom == self {
			continue // our own publication: already stored
		}
		a, ok := pm.ValidatorData.(*accepted)
		if !ok { // cannot happen: the validator accepts only after setting it
			m.log.Error("gossip message without validator data", "space", s.id, "peer", pm.ReceivedFrom)
			continue
		}
		r := received{msg: a.msg, from: pm.ReceivedFrom, known: a.known}
		if a.known && !queued.has(r.msg.Sender()) {
			select {
			case members <- r:
			case <-ctx.Done():
				return
			}
			continue
		}
		queued.add(r.msg.Sender(), 1) // before the consumer can take it
		select {
		case strangers <- r:
		default:
			queued.add(r.msg.Sender(), -1)
			s.flight.done(r.msg.ID)
			if shed++; shed%1000 == 1 {
				m.log.Info("gossip: strangers' messages shed: more arrive than the store takes", "space", s.id, "shed", shed)
			}
		}
	}
}

// deliver notes how late gossip brought a message (see lateness), hands
// it to sink, then repairs the gap it reveals, if any.
func (m *Mesh) deliver(ctx context.Context, s *space, sink Sink, r received) {
	m.late.note(r.msg.Sender(), r.known, r.msg.Created(), m.now())
	m.delivered(ctx, s, r, sink.Deliver(ctx, r.msg))
}

// batches hands the messages of queue q to sink a batch at a time (see
// GossipBatchSink) until ctx ends.
func (m *Mesh) batches(ctx context.Context, s *space, sink GossipBatchSink, q <-chan received, done func(received)) {
	batch := make([]received, 0, maxGossipBatch)
	msgs := make([]*protocol.Message, 0, maxGossipBatch)
	for {
		batch, msgs = batch[:0], msgs[:0]
		select {
		case r := <-q:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < maxGossipBatch {
			select {
			case r := <-q:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		now := m.now()
		for _, r := range batch {
			m.late.note(r.msg.Sender(), r.known, r.msg.Created(), now)
			msgs = append(msgs, r.msg)
		}
		errs := sink.DeliverGossip(ctx, msgs)
		for i, r := range batch {
			err := errNoResult
			if len(errs) == len(batch) {
				err = errs[i]
			}
			m.delivered(ctx, s, r, err)
			if done != nil {
				done(r)
			}
		}
	}
}

// authorCounts counts messages per author; safe for concurrent use.
type authorCounts struct {
	mu sync.Mutex
	n  map[peer.ID]int
}

func (c *authorCounts) add(p peer.ID, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[peer.ID]int)
	}
	if c.n[p] += d; c.n[p] <= 0 {
		delete(c.n, p)
	}
}

func (c *authorCounts) has(p peer.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p] > 0
}

// errNoResult is a message's error when DeliverGossip did not return one
// error per message.
var errNoResult = errors.New("gossip batch: no result for the message")

// delivered notes that the Sink is finished with r's message (err: how),
// and repairs the gap it reveals, if any.
func (m *Mesh) delivered(ctx context.Context, s *space, r received, err error) {
	msg, from := r.msg, r.from
	if err == nil {
		m.stored.add(msg.ID)
	}
	s.flight.done(msg.ID)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrDeclined):
			m.log.Debug("message declined", "space", s.id, "id", msg.ID, "peer", from, "err", err)
		default:
			m.log.Warn("deliver failed", "space", s.id, "id", msg.ID, "peer", from, "err", err)
		}
		return
	}
	m.repairGap(ctx, s, msg, from)
}

// fresh reports whether gossip may still bring msg (see lateness.fresh).
func (m *Mesh) fresh(msg *protocol.Message) bool {
	return m.late.fresh(msg.Created(), m.now())
}

// Publish broadcasts msg to its space, which must be joined. The message is
// validated on the way out exactly as receivers will validate it.
func (m *Mesh) Publish(ctx context.Context, msg *protocol.Message) error {
	m.mu.RLock()
	s, ok := m.spaces[msg.Space]
	closed := m.closed
	m.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case !ok:
		return fmt.Errorf("publish %s: %w: %s", msg.ID, ErrNotJoined, msg.Space)
	}
	// The validator takes this node's own publications as they are (a
	// fifth of a send's CPU was checking them again): so only what was
	// signed here, or checked already, is published unchecked.
	if !msg.SignatureChecked() {
		if err := msg.Verify(m.now(), m.lim); err != nil {
			return fmt.Errorf("publish %s: %w", msg.ID, err)
		}
	}
	if err := s.topic.Publish(ctx, msg.Wire()); err != nil {
		return fmt.Errorf("publish %s: %w", msg.ID, err)
	}
	m.stored.add(msg.ID) // stored by the node before it publishes
	s.circuit.wake()
	return nil
}

// SpacePeers returns the peers known to be subscribed to the space's topic.
// It is empty for a space not joined.
func (m *Mesh) SpacePeers(id protocol.ID) []peer.ID {
	m.mu.RLock()
	s, ok := m.spaces[id]
	m.mu.RUnlock()
	if !ok {
		return nil
	}
	return s.topic.ListPeers()
}

// meshPeers returns the peers this node exchanges full messages of the space
// with: the gossipsub mesh, a subset of SpacePeers.
func (m *Mesh) meshPeers(id protocol.ID) []peer.ID {
	return m.tracer.peers(protocol.Topic(id))
}
