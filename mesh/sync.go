package mesh

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
)

// joinSyncDelay is how long the member with the higher peer ID waits
// before syncing with a member that just joined the topic: the lower one
// starts at once, and one session is enough (it syncs both ways).
const joinSyncDelay = 2 * time.Second

// syncEvents syncs with every member that joins the space's topic: a new
// member, or one that reconnected.
func (m *Mesh) syncEvents(ctx context.Context, s *space) {
	ev, err := s.topic.EventHandler()
	if err != nil {
		m.log.Error("sync: topic events unavailable", "space", s.id, "err", err)
		return
	}
	defer ev.Cancel()
	for _, p := range s.topic.ListPeers() {
		m.sync.Trigger(p, s.id)
	}
	self := m.h.ID()
	for {
		e, err := ev.NextPeerEvent(ctx)
		if err != nil {
			return // left or closed
		}
		if e.Type != pubsub.PeerJoin {
			continue
		}
		if self < e.Peer {
			m.sync.Trigger(e.Peer, s.id)
			continue
		}
		t := time.NewTimer(joinSyncDelay)
		p := e.Peer
		s.wg.Go(func() {
			defer t.Stop()
			select {
			case <-t.C:
				m.sync.TriggerUnlessAnswering(p, s.id)
			case <-ctx.Done():
			}
		})
	}
}

// syncLoop syncs with one random member of the space every interval (with
// ±25% jitter, so members do not all sync at once).
func (m *Mesh) syncLoop(ctx context.Context, s *space) {
	for {
		d := m.syncEvery*3/4 + rand.N(m.syncEvery/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		if peers := s.topic.ListPeers(); len(peers) > 0 {
			m.sync.Trigger(peers[rand.IntN(len(peers))], s.id)
		}
		m.syncCircuits(ctx, s)
	}
}

var errSyncOff = errors.New("sync is off (no history store)")

// spreadFanout is how many other members a session that brought news is
// passed on to.
const spreadFanout = 3

// spread syncs the space with up to spreadFanout random members other than
// from, after a session with from brought new messages: they likely lack
// them too, and those that fetch them pass them on in turn (epidemic
// style: after a partition heals, one bridge is enough). Members that are
// in sync answer in one round trip and fetch nothing, so it stops by itself.
//
// Spreading is also what fetches the last messages of a burst that gossip
// dropped (no child reveals them): bounding it to once a second per space
// left 2,243 arrivals missing 10 s after a loaded 10-daemon broadcast at
// 2,000 msg/s, against none without the bound.
//
// Only messages gossip should have brought by then are news (see
// syncSink): a session that fetched nothing but messages gossip was still
// bringing spreads nothing.
func (m *Mesh) spread(from peer.ID, space protocol.ID, _ int) {
	m.mu.RLock()
	s, ok := m.spaces[space]
	m.mu.RUnlock()
	if !ok || s.stale.Swap(0) == 0 {
		return
	}
	peers := m.SpacePeers(space)
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	n := 0
	for _, p := range peers {
		if p != from && n < spreadFanout {
			m.sync.Trigger(p, space)
			n++
		}
	}
}

// Sync runs one sync session with p for space now (retrying while p is
// busy with another session of the space) and returns its stats. It fails
// if sync is off (no Config.History) or the space is not joined.
func (m *Mesh) Sync(ctx context.Context, p peer.ID, space protocol.ID) (reconcile.Stats, error) {
	if m.sync == nil {
		return reconcile.Stats{}, errSyncOff
	}
	return m.sync.SyncRetrying(ctx, p, space)
}

// SyncIdle reports whether no sync session is in flight (true when sync is
// off).
func (m *Mesh) SyncIdle() bool { return m.sync == nil || m.sync.Idle() }

// SyncStats returns the totals of every sync session so far (zero when
// sync is off).
func (m *Mesh) SyncStats() reconcile.Stats {
	if m.sync == nil {
		return reconcile.Stats{}
	}
	return m.sync.Totals()
}

// SpaceSync returns what sync does for space (see reconcile.SpaceState),
// and false when sync is off or the space is not joined.
func (m *Mesh) SpaceSync(space protocol.ID) (reconcile.SpaceState, bool) {
	if m.sync == nil {
		return reconcile.SpaceState{}, false
	}
	return m.sync.SpaceState(space)
}
