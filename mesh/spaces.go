package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Sink receives every valid message of a joined space that arrives from the
// network; messages this node published itself are not delivered back by
// gossip. Deliver is called from the space's subscription goroutine and,
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
	if err := m.ps.RegisterTopicValidator(name, validator(id, m.lim, m.now, m.log)); err != nil {
		return fmt.Errorf("join space %s: validator: %w", id, err)
	}
	topic, err := m.ps.Join(name)
	if err != nil {
		_ = m.ps.UnregisterTopicValidator(name)
		return fmt.Errorf("join space %s: topic: %w", id, err)
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
	s := &space{id: id, topic: topic, sub: sub, cancel: cancel}
	ns := protocol.Rendezvous(id)
	s.wg.Go(func() { m.receiveLoop(ctx, s, sink) })
	s.wg.Go(func() { m.advertiseLoop(ctx, ns) })
	s.wg.Go(func() { m.findLoop(ctx, ns) })
	s.wg.Go(func() { m.watchMembers(ctx, s) })
	if m.sync != nil {
		m.sync.Join(id, sink)
		s.wg.Go(func() { m.syncEvents(ctx, s) })
		if m.syncEvery > 0 {
			s.wg.Go(func() { m.syncLoop(ctx, s) })
		}
	}

	m.mu.Lock()
	m.spaces[id] = s
	m.mu.Unlock()
	m.log.Info("joined space", "space", id)
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
	m.log.Info("left space", "space", id)
	return nil
}

// stopSpace tears a space down. The caller holds opMu and has removed s
// from m.spaces.
func (m *Mesh) stopSpace(s *space) error {
	if m.sync != nil {
		m.sync.Leave(s.id)
	}
	s.cancel()
	s.sub.Cancel()
	s.wg.Wait()
	m.members.forget(s.id)
	// Cancel has been handled by the pubsub loop when it returns, so the
	// topic has no subscription left and may close.
	return errors.Join(
		s.topic.Close(),
		m.ps.UnregisterTopicValidator(s.topic.String()),
	)
}

// receiveLoop hands the space's validated messages to sink.
func (m *Mesh) receiveLoop(ctx context.Context, s *space, sink Sink) {
	self := m.h.ID()
	for {
		pm, err := s.sub.Next(ctx)
		if err != nil {
			return // left, closed, or cancelled
		}
		if pm.ReceivedFrom == self {
			continue // our own publication: already stored
		}
		msg, ok := pm.ValidatorData.(*protocol.Message)
		if !ok { // cannot happen: the validator accepts only after setting it
			m.log.Error("gossip message without validator data", "space", s.id, "peer", pm.ReceivedFrom)
			continue
		}
		if err := sink.Deliver(ctx, msg); err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("deliver failed", "space", s.id, "id", msg.ID, "peer", pm.ReceivedFrom, "err", err)
			continue
		}
		m.repairGap(s.id, msg, pm.ReceivedFrom)
	}
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
	if err := s.topic.Publish(ctx, msg.Wire()); err != nil {
		return fmt.Errorf("publish %s: %w", msg.ID, err)
	}
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
