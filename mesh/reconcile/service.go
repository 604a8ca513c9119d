package reconcile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/protocol"
)

// Protocol is the stream protocol of a sync session.
const Protocol = libp2pprotocol.ID(protocol.SyncProtocol)

// ServiceName is the libp2p resource manager service the session streams
// of both sides belong to: its limits (set by the host, see mesh) bound
// the sessions in flight and the frames they hold, per peer and in all.
const ServiceName = "weft.reconcile"

// MaxStreamMemory is the most a session reserves in its stream's scope at
// once: the frame it is processing, at the largest size allowed. Each frame
// reserves its actual size until the next one is read.
const MaxStreamMemory = maxFrame

// Store is what sync reads of this node's messages. Implementations must be
// safe for concurrent use. Ranges are [lo, hi) in SyncKey order.
type Store interface {
	// Heads returns the space's messages that no stored message names in
	// its prev.
	Heads(space protocol.ID) ([]protocol.ID, error)
	// Summary returns the number of stored messages of the space in
	// [lo, hi) and the Sum of their IDs.
	Summary(space protocol.ID, lo, hi protocol.SyncKey) (int, protocol.Sum, error)
	// Keys returns up to limit keys in [lo, hi), ascending.
	Keys(space protocol.ID, lo, hi protocol.SyncKey, limit int) ([]protocol.SyncKey, error)
	// Split returns ascending keys b1…bk (k < parts) splitting [lo, hi)
	// into non-empty ranges [lo,b1), [b1,b2) … [bk,hi) of nearly equal size.
	Split(space protocol.ID, lo, hi protocol.SyncKey, parts int) ([]protocol.SyncKey, error)
	// Wire returns the wire bytes of a message of the space; false (and no
	// error) if it is not stored, has expired, or is of another space.
	Wire(space, id protocol.ID) ([]byte, bool, error)
	// Has reports whether a message is stored (expired or not).
	Has(id protocol.ID) (bool, error)
	// Floor returns the lowest sync key the store keeps for the space
	// (protocol.MinSyncKey when it keeps everything).
	Floor(space protocol.ID) (protocol.SyncKey, error)
}

// WireBatcher is what a Store may also implement to read the messages an
// exchange sends at once (one read transaction rather than one each):
// wires[i] is what Wire(space, ids[i]) returns (nil when not held), and
// reading stops after the message that brings the bytes read to limit or
// more, so wires may be shorter than ids; at least one is read.
type WireBatcher interface {
	Wires(space protocol.ID, ids []protocol.ID, limit int) (wires [][]byte, err error)
}

// Sink receives the valid messages a session fetches. It is called
// concurrently, must be idempotent (a message may also arrive by gossip),
// and should return once the message is stored. An error wrapping
// ErrDeclined says the node will not keep the message (a quota or size of
// its own): it is dropped and the session goes on; any other error ends
// the session.
type Sink interface {
	Deliver(ctx context.Context, m *protocol.Message) error
}

// BatchSink is what a Sink may also implement to take the messages of an
// exchange all at once (a store can then write them in one transaction):
// ms are valid messages of the session's space, parents before children
// as far as created_at tells, and errs[i] is what Deliver(ctx, ms[i])
// would have returned. It is called from one goroutine per session.
type BatchSink interface {
	Sink
	DeliverBatch(ctx context.Context, ms []*protocol.Message) (errs []error)
}

// ErrDeclined is what a Sink's error wraps for a valid message this node
// does not want (over its quota, say): not the peer's fault.
var ErrDeclined = errors.New("declined")

var (
	// errBusy reports a peer that answered statusBusy: try again later.
	errBusy      = errors.New("peer busy")
	errClosed    = errors.New("sync service closed")
	errNotJoined = errors.New("space not joined")
	errNoAccess  = errors.New("peer may not take part in the space")
	// errSlow ends a session that moves too little data for too long (it
	// would hold its space's session slot).
	errSlow = errors.New("session too slow")
	// errSilent ends a session whose peer did not answer its first frame
	// in time (see WithFirstReply); the peer is refused for silentRefuse.
	errSilent = errors.New("peer silent")
)

// silentRefuse is how long a peer that left a session's first frame
// unanswered is refused: long enough that it cannot hold a space's slot
// again and again, short enough for an honest peer that was only stuck.
const silentRefuse = time.Minute

// A session waits at most lockWait for its space's session slot, and is
// ended once it has lasted slowAfter (config) while averaging under
// minRate bytes/s.
const (
	lockWait  = 30 * time.Second
	slowAfter = 30 * time.Second
	minRate   = 16 << 10
)

// Stats describe sync sessions.
type Stats struct {
	Sessions      int   // sessions run (each counts once, on either side)
	Initiated     int   // of them, started by this node
	InSync        int   // of them, ended by matching fingerprints in the hello
	Rounds        int   // exchanges sent
	BytesSent     int64 // on the stream, including framing
	BytesReceived int64
	Sent          int // messages sent to peers
	Received      int // messages fetched and delivered
	Dropped       int // fetched but expired, future-dated, below the window or declined
	Deferred      int // peer's ranges answered a turn later, for lack of room
	Missing       int // asked for, and the peer answered it had none (or no room left)
	Unserved      int // the peer asked for these, and the session's byte budget was spent
	Postponed     int // peer's ranges put off: their IDs found no room among those asked for
	Unsettled     int // 1 if some of them were never offered again before the end (another session follows if this one added messages, whichever side started it, as after Missing; else the next sync asks)
}

func (a *Stats) add(b Stats) {
	a.Sessions += b.Sessions
	a.Initiated += b.Initiated
	a.InSync += b.InSync
	a.Rounds += b.Rounds
	a.BytesSent += b.BytesSent
	a.BytesReceived += b.BytesReceived
	a.Sent += b.Sent
	a.Received += b.Received
	a.Dropped += b.Dropped
	a.Deferred += b.Deferred
	a.Missing += b.Missing
	a.Unserved += b.Unserved
	a.Postponed += b.Postponed
	a.Unsettled += b.Unsettled
}

// Service runs sync sessions for the spaces it has joined: it answers
// peers' sessions and starts its own when asked (Sync, Trigger).
type Service struct {
	h   host.Host
	st  Store
	cfg config

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{} // bounds sessions answered at once

	mu      sync.Mutex
	spaces  map[protocol.ID]*joined
	runs    map[runKey]bool               // triggered sessions in flight → run again when done
	answers map[runKey]int                // sessions being answered
	locks   map[protocol.ID]chan struct{} // one session per space at a time (see lock)
	refused map[peer.ID]time.Time
	totals  Stats
	closed  bool

	peerSessions  *rate.Table[peer.ID]     // sessions answered per peer
	spaceSessions *rate.Table[protocol.ID] // sessions answered per space

	active atomic.Int64 // sessions in flight, both sides
}

// maxRefused is how many refused peers are kept before expired refusals
// are pruned.
const maxRefused = 1024

// maxRateKeys bounds the peers (and spaces) whose session rates are kept.
const maxRateKeys = 1 << 14

// allowed reports whether p may sync space (WithAccess).
func (s *Service) allowed(p peer.ID, space protocol.ID) bool {
	return s.cfg.access == nil || s.cfg.access(space, p)
}

// admit takes a session token of p and, unless space is zero, of space:
// false means the peer is to be told busy.
func (s *Service) admit(p peer.ID, space protocol.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.now()
	if space.IsZero() {
		return s.peerSessions.Take(p, now)
	}
	return s.spaceSessions.Take(space, now)
}

type runKey struct {
	peer  peer.ID
	space protocol.ID
}

// New starts the sync service on h: it registers the stream handler.
// Messages are read from st; fetched ones go to the Sink of their space
// (see Join).
func New(h host.Host, st Store, opts ...Option) (*Service, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("reconcile: %w", err)
		}
	}
	if h == nil || st == nil {
		return nil, errors.New("reconcile: nil host or store")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		h:       h,
		st:      st,
		cfg:     cfg,
		ctx:     ctx,
		cancel:  cancel,
		slots:   make(chan struct{}, cfg.maxInbound),
		spaces:  make(map[protocol.ID]*joined),
		runs:    make(map[runKey]bool),
		answers: make(map[runKey]int),
		locks:   make(map[protocol.ID]chan struct{}),
		refused: make(map[peer.ID]time.Time),

		peerSessions:  rate.NewTable[peer.ID](cfg.peerSessions, maxRateKeys),
		spaceSessions: rate.NewTable[protocol.ID](cfg.spaceSessions, maxRateKeys),
	}
	h.SetStreamHandler(Protocol, s.handle)
	return s, nil
}

// Close stops answering, cancels the sessions in flight and waits for them.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.h.RemoveStreamHandler(Protocol)
	s.cancel()
	s.wg.Wait()
	return nil
}

// joined is a space this service serves.
type joined struct {
	sink   Sink
	ctx    context.Context // ends at Leave (or Close): its sessions stop
	cancel context.CancelFunc

	left    atomic.Int64 // the running session's wanted messages (session.report)
	running bool         // under Service.mu, like last
	last    SpaceState
}

// SpaceState is what sync does for one space (see Service.SpaceState).
type SpaceState struct {
	Running bool // a session of the space runs now (either side)
	// Left is how many messages the running session, or else the last
	// one, knew the space lacked and had not fetched (yet): those it asked
	// for or was about to, and, for a session that fetched some, those the
	// peer then said it could not send (its byte budget was spent, or it
	// lacks them), which the session that follows asks for again; and
	// those it put off for want of room to ask (the peer's count of them).
	// Ranges not settled yet may hide more.
	Left int
	// LastEnd is when the last session of the space ended (zero: none
	// since the space was joined or the node started), LastPeer with whom,
	// LastReceived how many messages it fetched and LastErr why it failed
	// ("" when it succeeded). Sessions that found the peer (or this node)
	// busy with another session are not counted.
	LastEnd      time.Time
	LastPeer     peer.ID
	LastReceived int
	LastErr      string
}

// SpaceState returns what sync does for space, and false if the space is
// not joined.
func (s *Service) SpaceState(space protocol.ID) (SpaceState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.spaces[space]
	if !ok {
		return SpaceState{}, false
	}
	st := j.last
	st.Running = j.running
	if j.running {
		st.Left = int(j.left.Load())
	}
	return st, true
}

// track marks a session of space as running (one at a time, under the
// space's lock) and returns the counter its session reports to and the
// func to call when it ends.
func (s *Service) track(space protocol.ID, p peer.ID) (left *atomic.Int64, end func(st *Stats, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.spaces[space]
	if !ok {
		return new(atomic.Int64), func(*Stats, error) {}
	}
	j.running = true
	j.left.Store(0)
	return &j.left, func(st *Stats, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		j.running = false
		if errors.Is(err, errBusy) {
			return
		}
		left := int(j.left.Load())
		if st.Received > 0 && st.Missing > 0 {
			// The peer ran out of budget (or lacks some parents): a
			// triggered session runs again (see Trigger), so these are
			// still to fetch.
			left += st.Missing
		}
		j.last = SpaceState{Left: left, LastEnd: s.cfg.now(), LastPeer: p, LastReceived: st.Received}
		if err != nil {
			j.last.LastErr = err.Error()
		}
	}
}

// Join serves space and delivers what its sessions fetch to sink (which
// replaces the sink of a space already joined).
func (s *Service) Join(space protocol.ID, sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.spaces[space]; ok {
		j.sink = sink
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.spaces[space] = &joined{sink: sink, ctx: ctx, cancel: cancel}
}

// Leave stops serving space and ends its sessions in flight.
func (s *Service) Leave(space protocol.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.spaces[space]; ok {
		j.cancel()
		delete(s.spaces, space)
	}
}

// Totals returns the statistics of every session so far.
func (s *Service) Totals() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals
}

// Idle reports whether no session is in flight.
func (s *Service) Idle() bool { return s.active.Load() == 0 }

// session admits a session of space: it returns the space's sink and a
// context that ends when ctx does, the space is left, or the service
// closes, and registers the session with Close (call done when finished).
func (s *Service) session(ctx context.Context, space protocol.ID) (sink Sink, sctx context.Context, done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, nil, errClosed
	}
	j, ok := s.spaces[space]
	if !ok {
		return nil, nil, nil, errNotJoined
	}
	s.wg.Add(1)
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(j.ctx, cancel)
	s.active.Add(1)
	return j.sink, sctx, func() {
		stop()
		cancel()
		s.active.Add(-1)
		s.wg.Done()
	}, nil
}

// isRefused reports whether p misbehaved recently.
func (s *Service) isRefused(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.refused[p]
	if ok && s.cfg.now().After(until) {
		delete(s.refused, p)
		return false
	}
	return ok
}

// finish records a session's stats, and refuses the peer if it misbehaved.
func (s *Service) finish(p peer.ID, space protocol.ID, start time.Time, st Stats, err error) {
	s.mu.Lock()
	s.totals.add(st)
	if refuse := s.refusal(err); refuse > 0 {
		now := s.cfg.now()
		if len(s.refused) >= maxRefused {
			for q, until := range s.refused {
				if now.After(until) {
					delete(s.refused, q)
				}
			}
		}
		if until := now.Add(refuse); until.After(s.refused[p]) {
			s.refused[p] = until
		}
	}
	s.mu.Unlock()
	if st.Received > 0 && s.cfg.onReceived != nil {
		s.cfg.onReceived(p, space, st.Received)
	}
	if s.cfg.onSession != nil {
		s.cfg.onSession(Session{Peer: p, Space: space, Initiated: st.Initiated > 0, Start: start, End: s.cfg.now(), Stats: st, Err: err})
	}
	switch {
	case err == nil:
		if st.Received > 0 || st.Sent > 0 {
			s.cfg.log.Debug("sync done", "peer", p, "space", space, "received", st.Received, "sent", st.Sent, "rounds", st.Rounds)
		}
	case s.refusal(err) > 0:
		s.cfg.log.Warn("sync: refusing peer", "peer", p, "space", space, "for", s.refusal(err), "err", err)
	default:
		s.cfg.log.Debug("sync failed", "peer", p, "space", space, "err", err)
	}
}

// refusal is how long a session's error refuses its peer: zero for an
// error that is not the peer's doing.
func (s *Service) refusal(err error) time.Duration {
	switch {
	case errors.Is(err, ErrRefused), errors.Is(err, errMalformed):
		return s.cfg.refuseFor
	case errors.Is(err, errSilent):
		return silentRefuse
	}
	return 0
}

// lock returns the channel that admits one session of space at a time.
//
// A node runs one session per space at a time, as initiator or responder:
// two sessions fetching the same history from two members at once would
// both be sent all of it. Initiators wait their turn; a responder whose
// space is busy answers statusBusy and the initiator retries later (two
// nodes starting sessions with each other at once would otherwise wait on
// each other).
func (s *Service) lock(space protocol.ID) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[space]
	if !ok {
		l = make(chan struct{}, 1)
		s.locks[space] = l
	}
	return l
}

// busyRetries and busyBackoff bound how a triggered session retries a busy peer.
const (
	busyRetries = 12
	busyBackoff = 100 * time.Millisecond
)

// Trigger starts a session with p for space in the background unless one
// is running, in which case that one runs once more when it ends. A busy
// peer is retried with backoff. It does nothing for a space not joined or
// a refused peer.
func (s *Service) Trigger(p peer.ID, space protocol.ID) {
	k := runKey{p, space}
	s.mu.Lock()
	_, joined := s.spaces[space]
	if s.closed || !joined || p == s.h.ID() {
		s.mu.Unlock()
		return
	}
	if _, running := s.runs[k]; running {
		s.runs[k] = true
		s.mu.Unlock()
		return
	}
	s.runs[k] = false
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		for {
			before := s.held(space)
			st, _ := s.SyncRetrying(s.ctx, p, space) // logged by finish
			// Again if asked meanwhile, or if the peer sent some of what
			// we asked for and not the rest (its session budget ran out,
			// or the session ended with ranges put off): only if this
			// node holds more than before, since what a peer says it
			// sent or lacks costs it nothing (a replay of a message we
			// hold counts as received).
			more := (st.Missing > 0 || st.Unsettled > 0) && s.held(space) > before
			s.mu.Lock()
			again := (s.runs[k] || more) && !s.closed
			if !again {
				delete(s.runs, k)
				s.mu.Unlock()
				return
			}
			s.runs[k] = false
			s.mu.Unlock()
		}
	}()
}

// counter is what a Store may also implement: how many messages of a
// space it holds, at little cost (Summary over the whole space otherwise).
type counter interface {
	Count(space protocol.ID) (int, error)
}

// held returns how many messages of space this node holds, or -1 if the
// store cannot say.
func (s *Service) held(space protocol.ID) int {
	if c, ok := s.st.(counter); ok {
		n, err := c.Count(space)
		if err != nil {
			return -1
		}
		return n
	}
	floor, err := s.floor(space)
	if err != nil {
		return -1
	}
	n, _, err := s.st.Summary(space, floor, protocol.MaxSyncKey)
	if err != nil {
		return -1
	}
	return n
}

// SyncRetrying is Sync, retried with backoff (up to a dozen times, about
// half a minute) while the peer is busy with another session of the space.
func (s *Service) SyncRetrying(ctx context.Context, p peer.ID, space protocol.ID) (Stats, error) {
	wait := busyBackoff
	for i := 0; ; i++ {
		st, err := s.Sync(ctx, p, space) // logged by finish
		if !errors.Is(err, errBusy) || i == busyRetries {
			return st, err
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return st, err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// TriggerUnlessAnswering is Trigger, except that it does nothing while p
// is running a session for space with this node: that one syncs both ways.
func (s *Service) TriggerUnlessAnswering(p peer.ID, space protocol.ID) {
	s.mu.Lock()
	n := s.answers[runKey{p, space}]
	s.mu.Unlock()
	if n == 0 {
		s.Trigger(p, space)
	}
}

// answering counts a session p runs with us for space until done is called.
func (s *Service) answering(p peer.ID, space protocol.ID) (done func()) {
	k := runKey{p, space}
	s.mu.Lock()
	s.answers[k]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.answers[k]--; s.answers[k] <= 0 {
			delete(s.answers, k)
		}
	}
}

// Sync runs one session with p for space, as initiator, and returns its
// stats. On return this node holds every message p had in the space (within
// both sides' floors) unless an error says otherwise, and p has been sent
// every message it lacked.
func (s *Service) Sync(ctx context.Context, p peer.ID, space protocol.ID) (stats Stats, err error) {
	if s.isRefused(p) {
		return Stats{}, fmt.Errorf("sync %s with %s: %w (recently misbehaved)", space, p, ErrRefused)
	}
	if !s.allowed(p, space) {
		return Stats{}, fmt.Errorf("sync %s with %s: %w", space, p, errNoAccess)
	}
	sink, ctx, done, err := s.session(ctx, space)
	if err != nil {
		return Stats{}, fmt.Errorf("sync %s with %s: %w", space, p, err)
	}
	defer done()
	l := s.lock(space)
	wait := time.NewTimer(lockWait)
	select {
	case l <- struct{}{}:
		wait.Stop()
		defer func() { <-l }()
	case <-wait.C:
		return Stats{}, fmt.Errorf("sync %s with %s: %w (this node's session of the space is still running)", space, p, errBusy)
	case <-ctx.Done():
		wait.Stop()
		return Stats{}, fmt.Errorf("sync %s with %s: waiting for the space's session: %w", space, p, ctx.Err())
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	stats.Sessions, stats.Initiated = 1, 1
	start := s.cfg.now()
	defer func() { s.finish(p, space, start, stats, err) }()
	left, end := s.track(space, p)
	defer func() { end(&stats, err) }()

	str, err := s.h.NewStream(network.WithAllowLimitedConn(ctx, "weft-sync"), p, Protocol)
	if err != nil {
		return stats, fmt.Errorf("sync %s with %s: open stream: %w", space, p, err)
	}
	if err := str.Scope().SetService(ServiceName); err != nil {
		// This node's limit on sessions with p (or in all): later.
		_ = str.Reset()
		return stats, fmt.Errorf("sync %s with %s: %w: %w", space, p, errBusy, err)
	}
	c := newConn(ctx, str, &stats)
	defer func() { c.close(err) }()

	floor, err := s.floor(space)
	if err != nil {
		return stats, err
	}
	sess := newSession(space, floor, s.st, sink, &s.cfg)
	sess.left = left
	n, fp, err := sess.summary(floor, protocol.MaxSyncKey)
	if err != nil {
		return stats, err
	}
	heads, err := s.heads(space)
	if err != nil {
		return stats, err
	}
	if err := c.send((&hello{space: space, floor: floor, count: n, fp: fp, heads: heads}).encode()); err != nil {
		return stats, fmt.Errorf("sync %s with %s: hello: %w", space, p, err)
	}
	b, err := c.recvWithin(s.cfg.firstReply)
	if err != nil {
		return stats, fmt.Errorf("sync %s with %s: reply: %w", space, p, err)
	}
	r, err := decodeReply(b)
	if err != nil {
		return stats, fmt.Errorf("sync %s with %s: %w", space, p, err)
	}
	switch r.status {
	case statusInSync:
		stats.InSync = 1
		return stats, nil
	case statusNotMember:
		return stats, fmt.Errorf("sync %s with %s: peer is not a member", space, p)
	case statusBusy:
		return stats, fmt.Errorf("sync %s with %s: %w", space, p, errBusy)
	}
	if r.floor.Less(floor) {
		return stats, fmt.Errorf("sync %s with %s: %w", space, p, malformed("reply floor below ours"))
	}
	sess.floor = r.floor
	if err := sess.wantHeads(r.heads); err != nil {
		return stats, err
	}
	err = s.converse(ctx, c, sess, false)
	stats.add(sess.stats)
	if err != nil {
		return stats, fmt.Errorf("sync %s with %s: %w", space, p, err)
	}
	return stats, nil
}

// handle answers a peer's session.
func (s *Service) handle(str network.Stream) {
	p := str.Conn().RemotePeer()
	if err := str.Scope().SetService(ServiceName); err != nil {
		s.cfg.log.Debug("sync: stream refused by the resource manager", "peer", p, "err", err)
		s.refuse(str, statusBusy)
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.refuse(str, statusBusy)
		return
	}
	if s.isRefused(p) || !s.admit(p, protocol.ID{}) {
		s.refuse(str, statusBusy)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = str.Reset()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	s.active.Add(1)
	defer s.active.Add(-1)

	ctx, cancel := context.WithTimeout(s.ctx, min(s.cfg.timeout, s.cfg.answerTimeout))
	defer cancel()
	var stats Stats
	stats.Sessions = 1
	start := s.cfg.now()
	space, err := s.answer(ctx, str, &stats)
	s.finish(p, space, start, stats, err)
}

// answer runs the responder's side of a session on str.
func (s *Service) answer(ctx context.Context, str network.Stream, stats *Stats) (space protocol.ID, err error) {
	c := newConn(ctx, str, stats)
	defer func() { c.close(err) }()
	b, err := c.recv()
	if err != nil {
		return protocol.ID{}, fmt.Errorf("hello: %w", err)
	}
	h, err := decodeHello(b)
	if err != nil {
		return protocol.ID{}, err
	}
	sink, sctx, done, err := s.session(ctx, h.space)
	if err == nil && !s.allowed(str.Conn().RemotePeer(), h.space) {
		done()
		err = errNotJoined // to this peer, this node is no member
	}
	switch {
	case errors.Is(err, errNotJoined):
		return h.space, c.send((&reply{status: statusNotMember}).encode())
	case err != nil:
		return h.space, err
	}
	defer done()
	// A session this node answered that brought messages but not all it
	// asked for (the peer's budget ran out), or ended with ranges put off
	// for want of room, is followed by one of its own with the peer
	// (Trigger, which goes on while they bring more), as a session it
	// started is: else the rest waited for the next periodic sync. Run
	// once the space's session is let go (deferred before it), and only
	// if the session received messages and this node holds more than
	// before (gossip may have brought some meanwhile; a replay of what it
	// holds costs the peer nothing).
	before := -1
	defer func() {
		if err == nil && stats.Received > 0 && (stats.Missing > 0 || stats.Unsettled > 0) && before >= 0 && s.held(h.space) > before {
			s.Trigger(str.Conn().RemotePeer(), h.space)
		}
	}()
	// The space's session first, then its token: a session refused
	// because another of the space is running (peers retry those) costs
	// the space none of its rate. One refused for the rate lets go of the
	// lock before it is told so (a peer slow to read that answer must
	// not hold the space's session).
	l := s.lock(h.space)
	select {
	case l <- struct{}{}:
	default:
		return h.space, c.send((&reply{status: statusBusy}).encode())
	}
	if !s.admit(str.Conn().RemotePeer(), h.space) {
		<-l
		return h.space, c.send((&reply{status: statusBusy}).encode())
	}
	defer func() { <-l }()
	before = s.held(h.space)
	defer context.AfterFunc(sctx, func() { _ = str.Reset() })() // left meanwhile
	defer s.answering(str.Conn().RemotePeer(), h.space)()
	left, end := s.track(h.space, str.Conn().RemotePeer())
	defer func() { end(stats, err) }()
	floor, err := s.floor(h.space)
	if err != nil {
		return h.space, err
	}
	if floor.Less(h.floor) {
		floor = h.floor
	}
	sess := newSession(h.space, floor, s.st, sink, &s.cfg)
	sess.left = left
	if floor == h.floor {
		n, fp, err := sess.summary(floor, protocol.MaxSyncKey)
		if err != nil {
			return h.space, err
		}
		if n == h.count && fp == h.fp {
			stats.InSync = 1
			return h.space, c.send((&reply{status: statusInSync}).encode())
		}
	}
	heads, err := s.heads(h.space)
	if err != nil {
		return h.space, err
	}
	if err := c.send((&reply{status: statusReconcile, floor: floor, heads: heads}).encode()); err != nil {
		return h.space, err
	}
	if err := sess.wantHeads(h.heads); err != nil {
		return h.space, err
	}
	x, err := sess.opening()
	if err != nil {
		return h.space, err
	}
	if err := c.sendExchange(x, floor); err != nil {
		return h.space, err
	}
	err = s.converse(ctx, c, sess, x.empty())
	stats.add(sess.stats)
	return h.space, err
}

// converse takes turns with the peer until both have nothing to say: the
// side that receives an empty exchange and has nothing to add sends its
// own empty one and stops, and the other stops on reading it.
func (s *Service) converse(ctx context.Context, c *conn, sess *session, sentEmpty bool) (err error) {
	defer func() {
		// The last messages received are stored before the session ends.
		if serr := sess.settle(); err == nil {
			err = serr
		}
		if sess.postponed.set {
			sess.stats.Unsettled = 1 // a later session asks (see Trigger)
		}
	}()
	for round := 0; ; round++ {
		if round >= s.cfg.maxRounds {
			return fmt.Errorf("%w: more than %d rounds", ErrRefused, s.cfg.maxRounds)
		}
		var b []byte
		var err error
		if round == 0 {
			// The peer's first exchange follows at once from what it has
			// (our opening, or its hello's answer): a peer that stays
			// silent gives up the space's slot.
			b, err = c.recvWithin(s.cfg.firstReply)
		} else {
			b, err = c.recv()
		}
		if err != nil {
			return err
		}
		if el := time.Since(c.start); el > s.cfg.slowAfter && float64(c.stats.BytesSent+c.stats.BytesReceived)/el.Seconds() < minRate {
			return fmt.Errorf("%w: %d bytes in %v", errSlow, c.stats.BytesSent+c.stats.BytesReceived, el.Round(time.Second))
		}
		in, err := decodeExchange(b, sess.floor)
		if err != nil {
			return err
		}
		if in.empty() && sentEmpty {
			return nil
		}
		out, err := sess.process(ctx, in)
		sess.report()
		if err != nil {
			return err
		}
		// Access is checked again before messages go: a peer removed from
		// a private space while the session runs gets none stored after
		// its removal (such a message has the removal in its causal past,
		// so once it is stored the removal has been applied).
		if len(out.msgs) > 0 && !s.allowed(c.str.Conn().RemotePeer(), sess.space) {
			return fmt.Errorf("%w (access withdrawn during the session)", errNoAccess)
		}
		if err := c.sendExchange(out, sess.floor); err != nil {
			return err
		}
		if in.empty() && out.empty() {
			return nil
		}
		sentEmpty = out.empty()
	}
}

func (s *Service) floor(space protocol.ID) (protocol.SyncKey, error) {
	f, err := s.st.Floor(space)
	if err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	if s.cfg.window > 0 {
		if w := (protocol.SyncKey{Time: s.cfg.now().Add(-s.cfg.window).UnixMilli()}); f.Less(w) {
			f = w
		}
	}
	// A floor taken from a clock (a window, an age retention) is rounded
	// up to the minute, so that two members usually compute the same one
	// and the one-frame in-sync answer applies. Up, not down: a floor
	// below what a store keeps would re-fetch what its sweep deletes.
	if f.ID.IsZero() && f.Time != math.MinInt64 {
		if r := f.Time % floorGrain; r != 0 {
			f.Time += floorGrain - r
			if r < 0 {
				f.Time -= floorGrain
			}
		}
	}
	return f, nil
}

// floorGrain is the rounding of clock-derived floors, in milliseconds.
const floorGrain = 60_000

func (s *Service) heads(space protocol.ID) ([]protocol.ID, error) {
	heads, err := s.st.Heads(space)
	if err != nil {
		return nil, fmt.Errorf("heads: %w", err)
	}
	if len(heads) > maxHeads {
		heads = heads[:maxHeads]
	}
	return heads, nil
}

// refuse answers a hello with status and closes the stream.
func (s *Service) refuse(str network.Stream, status byte) {
	_ = str.SetDeadline(time.Now().Add(5 * time.Second))
	w := bufio.NewWriter(str)
	if writeFrame(w, (&reply{status: status}).encode()) == nil && w.Flush() == nil {
		_ = str.Close()
		return
	}
	_ = str.Reset()
}

// conn frames a session's stream, counts its bytes and bounds each turn.
// The frame last received is reserved in the stream's resource scope until
// the next one is read or the stream closes.
type conn struct {
	str   network.Stream
	r     *bufio.Reader
	w     *bufio.Writer
	cr    countingReader
	cw    countingWriter
	stats *Stats
	stop  func() bool
	start time.Time
	held  int // bytes reserved for the frame last received
}

func newConn(ctx context.Context, str network.Stream, stats *Stats) *conn {
	c := &conn{str: str, stats: stats, start: time.Now()}
	c.cr = countingReader{r: str, n: &stats.BytesReceived}
	c.cw = countingWriter{w: str, n: &stats.BytesSent}
	c.r = bufio.NewReaderSize(&c.cr, 64<<10)
	c.w = bufio.NewWriterSize(&c.cw, 64<<10)
	// Cancelling ctx (session timeout, Close) unblocks reads and writes.
	c.stop = context.AfterFunc(ctx, func() { _ = str.Reset() })
	return c
}

// turnTimeout bounds one read or write of a frame.
const turnTimeout = 30 * time.Second

func (c *conn) send(b []byte) error {
	_ = c.str.SetWriteDeadline(time.Now().Add(turnTimeout))
	if err := writeFrame(c.w, b); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *conn) sendExchange(x *exchange, floor protocol.SyncKey) error {
	c.stats.Rounds++
	return c.send(x.encode(floor))
}

// recv reads the next frame; the previous one must be processed.
func (c *conn) recv() ([]byte, error) {
	return c.recvWithin(turnTimeout)
}

// recvWithin is recv with d to wait for the frame to start and end. A
// peer that sends nothing in time is errSilent.
func (c *conn) recvWithin(d time.Duration) ([]byte, error) {
	c.release()
	_ = c.str.SetReadDeadline(time.Now().Add(d))
	b, err := readFrameIn(c.r, maxFrame, c.str.Scope())
	c.held = len(b)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		err = fmt.Errorf("%w: nothing within %v: %w", errSilent, d, err)
	}
	return b, err
}

func (c *conn) release() {
	c.str.Scope().ReleaseMemory(c.held)
	c.held = 0
}

// close ends the stream: gracefully after a session that ran to its end
// (the peer may still be reading our last frame), else with a reset.
func (c *conn) close(err error) {
	c.stop()
	c.release()
	if err != nil {
		_ = c.str.Reset()
		return
	}
	_ = c.str.Close()
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

type countingWriter struct {
	w io.Writer
	n *int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}
