package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/weftmesh/weft/protocol"
)

// Protocol is the stream protocol of card and health requests.
const Protocol = libp2pprotocol.ID(protocol.AgentProtocol)

// ServiceName is the libp2p resource manager service the agent streams of
// both sides belong to: its limits (set by the host, see mesh) bound the
// requests in flight, per peer and in all.
const ServiceName = "weft.agent"

// MaxStreamMemory is what a served request reserves in its stream's
// resource scope while it is answered: its query, the one read from the
// peer, at the largest size allowed.
const MaxStreamMemory = maxQuery

var (
	// ErrClosed is returned by a closed Service.
	ErrClosed = errors.New("agent service closed")
	// ErrForged is returned for a card whose ID is not the peer that
	// served it.
	ErrForged = errors.New("card of another peer")
)

const (
	// maxInbound bounds the requests answered at once; more are reset.
	maxInbound = 64
	// maxCached bounds the cards kept in the cache.
	maxCached = 4096
)

// Service serves this node's agent card and health, fetches other nodes',
// advertises this node's capabilities and discovers providers of one. Its
// methods are safe for concurrent use.
type Service struct {
	h     host.Host
	disc  discovery.Discovery // nil: no DHT; Discover asks connected peers only
	cfg   config
	start time.Time
	slots chan struct{} // bounds requests answered at once

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // handlers and advertise loops

	mu     sync.Mutex
	closed bool
	ads    map[string]context.CancelFunc // advertised name → stops its loop
	cache  map[peer.ID]cachedCard
}

type cachedCard struct {
	card    protocol.Card
	expires time.Time
}

// New starts the agent service on h: it registers the stream handler of
// Protocol. disc is where capabilities are advertised and looked up (the
// mesh's DHT rendezvous, mesh.Mesh.Discovery); it may be nil, and then
// Advertise refuses names and Discover asks connected peers only.
func New(h host.Host, disc discovery.Discovery, opts ...Option) (*Service, error) {
	if h == nil {
		return nil, errors.New("agent: nil host")
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		h:      h,
		disc:   disc,
		cfg:    cfg,
		start:  time.Now(),
		slots:  make(chan struct{}, maxInbound),
		ctx:    ctx,
		cancel: cancel,
		ads:    make(map[string]context.CancelFunc),
		cache:  make(map[peer.ID]cachedCard),
	}
	h.SetStreamHandler(Protocol, s.handle)
	return s, nil
}

// Close stops answering and advertising, ends the requests in flight (a
// Discover in progress returns what it has) and waits for them. Records
// already in the DHT stay there until they expire; Discover's card check
// is what keeps them from misleading anyone. Close is safe to call more
// than once.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	clear(s.ads) // their contexts are children of s.ctx
	s.mu.Unlock()
	s.h.RemoveStreamHandler(Protocol)
	s.cancel()
	s.wg.Wait()
	return nil
}

// enter registers a goroutine with Close; false once closed.
func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// bind returns ctx, ended also by Close (with cause ErrClosed) and, when
// d > 0, after d.
func (s *Service) bind(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	cancelT := context.CancelFunc(func() {})
	if d > 0 {
		ctx, cancelT = context.WithTimeout(ctx, d)
	}
	return ctx, func() {
		cancelT()
		stop()
		cancel(nil)
	}
}

// LocalCard returns the card this node serves: the WithCard card with its
// ID set and invalid capability names left out.
func (s *Service) LocalCard() protocol.Card {
	var c protocol.Card
	if s.cfg.card != nil {
		c = s.cfg.card()
	}
	c.ID = s.h.ID().String()
	c.Capabilities = checkCaps(c.Capabilities)
	return c
}

// localHealth returns the health this node serves.
func (s *Service) localHealth() protocol.Health {
	var h protocol.Health
	if s.cfg.health != nil {
		h = s.cfg.health()
	} else {
		h = protocol.Health{Status: "ok", UptimeS: int64(time.Since(s.start).Seconds())}
	}
	if h.Time == 0 {
		h.Time = time.Now().UnixMilli()
	}
	return h
}

// handle answers one request: a query frame in, an answer frame out.
func (s *Service) handle(str network.Stream) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		_ = str.Reset()
		return
	}
	if !s.enter() {
		_ = str.Reset()
		return
	}
	defer s.wg.Done()
	defer context.AfterFunc(s.ctx, func() { _ = str.Reset() })()
	p := str.Conn().RemotePeer()
	if err := str.Scope().SetService(ServiceName); err != nil {
		s.cfg.log.Debug("agent: stream refused by the resource manager", "peer", p, "err", err)
		_ = str.Reset()
		return
	}
	if err := str.Scope().ReserveMemory(MaxStreamMemory, network.ReservationPriorityAlways); err != nil {
		s.cfg.log.Debug("agent: no memory for the request", "peer", p, "err", err)
		_ = str.Reset()
		return
	}
	defer str.Scope().ReleaseMemory(MaxStreamMemory)
	_ = str.SetDeadline(time.Now().Add(s.cfg.timeout))
	q, err := readFrame(bufio.NewReaderSize(str, 64), maxQuery)
	if err != nil {
		s.cfg.log.Debug("agent: bad request", "peer", p, "err", err)
		_ = str.Reset()
		return
	}
	if err := writeFrame(str, s.answer(q)); err != nil {
		s.cfg.log.Debug("agent: answer not sent", "peer", p, "err", err)
		_ = str.Reset()
		return
	}
	_ = str.Close()
}

// answer returns the answer to query frame q.
func (s *Service) answer(q []byte) []byte {
	var query protocol.AgentQuery
	if err := json.Unmarshal(q, &query); err != nil {
		return errorAnswer(protocol.CodeBadRequest, "malformed query: %v", err)
	}
	var v any
	switch query.Get {
	case getCard:
		v = s.LocalCard()
	case getHealth:
		v = s.localHealth()
	default:
		return errorAnswer(protocol.CodeBadRequest, "unknown query %q: want %q or %q", truncate(query.Get, 64), getCard, getHealth)
	}
	b, err := json.Marshal(v)
	if err == nil && len(b) > maxAnswer {
		err = fmt.Errorf("%w: %d bytes exceed %d", protocol.ErrTooLarge, len(b), maxAnswer)
	}
	if err != nil { // this node's own card or health: its owner must hear of it
		s.cfg.log.Warn("agent: cannot serve "+query.Get, "err", err)
		return errorAnswer(protocol.CodeInternal, "%s unavailable", query.Get)
	}
	return b
}

// Card returns p's card. The card's ID is p's (ErrForged otherwise), and
// capabilities with names protocol.CheckName refuses are left out. Cards
// are cached for the WithCardCacheTTL; Forget drops one. A peer that
// answers with an error yields a *protocol.CallError. For this node it
// returns LocalCard.
func (s *Service) Card(ctx context.Context, p peer.ID) (protocol.Card, error) {
	if s.isClosed() {
		return protocol.Card{}, ErrClosed
	}
	if p == s.h.ID() {
		return s.LocalCard(), nil
	}
	if c, ok := s.cached(p); ok {
		return c, nil
	}
	return s.fetchCard(ctx, p)
}

// fetchCard asks p for its card, bypassing the cache, and caches it.
func (s *Service) fetchCard(ctx context.Context, p peer.ID) (protocol.Card, error) {
	b, _, err := s.ask(ctx, p, getCard)
	if err != nil {
		return protocol.Card{}, fmt.Errorf("agent: card of %s: %w", p, err)
	}
	c, err := decodeCard(b, p)
	if err != nil {
		return protocol.Card{}, fmt.Errorf("agent: card of %s: %w", p, err)
	}
	s.remember(p, c)
	return c, nil
}

// Health asks p for its health and returns it with the round-trip time of
// the request (also recorded in the peerstore, as ping does). A peer that
// answers with an error yields a *protocol.CallError. For this node it
// returns its own health and a zero RTT.
func (s *Service) Health(ctx context.Context, p peer.ID) (protocol.Health, time.Duration, error) {
	if s.isClosed() {
		return protocol.Health{}, 0, ErrClosed
	}
	if p == s.h.ID() {
		return s.localHealth(), 0, nil
	}
	b, rtt, err := s.ask(ctx, p, getHealth)
	if err != nil {
		return protocol.Health{}, 0, fmt.Errorf("agent: health of %s: %w", p, err)
	}
	h, err := decodeHealth(b)
	if err != nil {
		return protocol.Health{}, 0, fmt.Errorf("agent: health of %s: %w", p, err)
	}
	s.h.Peerstore().RecordLatency(p, rtt)
	return h, rtt, nil
}

// ask sends query get to p and returns the answer frame and the time from
// sending the query to reading the answer. The exchange ends when ctx
// does, at Close, or after the WithTimeout.
func (s *Service) ask(ctx context.Context, p peer.ID, get string) (_ []byte, _ time.Duration, err error) {
	ctx, cancel := s.bind(ctx, s.cfg.timeout)
	defer cancel()
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
	}()
	str, err := s.h.NewStream(network.WithAllowLimitedConn(ctx, "weft-agent"), p, Protocol)
	if err != nil {
		return nil, 0, fmt.Errorf("open stream: %w", err)
	}
	// ctx, which always has a deadline, bounds the exchange: resetting the
	// stream unblocks its reads and writes. (A stream deadline as well
	// would race with ctx and report a bare i/o timeout.)
	defer context.AfterFunc(ctx, func() { _ = str.Reset() })()
	if err := str.Scope().SetService(ServiceName); err != nil {
		_ = str.Reset()
		return nil, 0, fmt.Errorf("resource manager: %w", err)
	}
	q, _ := json.Marshal(protocol.AgentQuery{Get: get})
	start := time.Now()
	if err := writeFrame(str, q); err != nil {
		_ = str.Reset()
		return nil, 0, fmt.Errorf("send query: %w", err)
	}
	_ = str.CloseWrite()
	b, err := readFrame(bufio.NewReader(str), maxAnswer)
	rtt := time.Since(start)
	if err != nil {
		_ = str.Reset()
		return nil, 0, fmt.Errorf("read answer: %w", err)
	}
	_ = str.Close()
	return b, rtt, nil
}

// Forget drops p's cached card: the next Card or Discover asks p again.
func (s *Service) Forget(p peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cache, p)
}

func (s *Service) cached(p peer.ID) (protocol.Card, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[p]
	if !ok {
		return protocol.Card{}, false
	}
	if !time.Now().Before(e.expires) {
		delete(s.cache, p)
		return protocol.Card{}, false
	}
	return cloneCard(e.card), true
}

func (s *Service) remember(p peer.ID, c protocol.Card) {
	if s.cfg.cacheTTL == 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= maxCached {
		for q, e := range s.cache {
			if !now.Before(e.expires) {
				delete(s.cache, q)
			}
		}
		for q := range s.cache { // still full: drop any one
			if len(s.cache) < maxCached {
				break
			}
			delete(s.cache, q)
		}
	}
	s.cache[p] = cachedCard{card: cloneCard(c), expires: now.Add(s.cfg.cacheTTL)}
}

// cloneCard returns a deep copy of c, so callers cannot change a cached card.
func cloneCard(c protocol.Card) protocol.Card {
	c.Capabilities = slices.Clone(c.Capabilities)
	for i := range c.Capabilities {
		c.Capabilities[i].InputSchema = bytes.Clone(c.Capabilities[i].InputSchema)
		c.Capabilities[i].OutputSchema = bytes.Clone(c.Capabilities[i].OutputSchema)
	}
	return c
}
