package reconcile

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/rate"
	"github.com/weftmesh/weft/protocol"
)

// Option configures New.
type Option func(*config) error

type config struct {
	access      func(protocol.ID, peer.ID) bool // nil: everyone
	limits      protocol.Limits
	now         func() time.Time
	log         *slog.Logger
	window      time.Duration      // 0: all history
	timeout     time.Duration      // one session, start to end
	maxInbound  int                // sessions answered at once
	maxRounds   int                // exchanges per session
	refuseFor   time.Duration      // how long a misbehaving peer is refused
	validators  int                // goroutines validating one exchange's messages
	verifier    *protocol.Verifier // checks fetched messages' signatures (senders repeat)
	rangeBudget int                // range bytes per exchange (frameRangeBytes; tests lower it)
	msgBudget   int                // message bytes per exchange sent (sendMessageBytes; tests lower it)
	outstanding int                // IDs asked for and not yet received (maxOutstanding; tests lower it)
	slowAfter   time.Duration      // see errSlow (tests lower it)
	onReceived  func(p peer.ID, space protocol.ID, n int)
	onSession   func(Session)

	sessionBytes  int64         // message bytes one session sends at most
	firstReply    time.Duration // how long the peer has to answer our first frame
	answerTimeout time.Duration // a session this node answers, start to end
	peerSessions  rate.Rate     // sessions answered per peer (all spaces)
	spaceSessions rate.Rate     // sessions answered per space (all peers)
}

func defaults() config {
	return config{
		limits:      protocol.DefaultLimits(),
		now:         time.Now,
		log:         slog.New(slog.DiscardHandler),
		timeout:     10 * time.Minute,
		maxInbound:  32,
		maxRounds:   100_000,
		refuseFor:   10 * time.Minute,
		validators:  runtime.GOMAXPROCS(0),
		verifier:    protocol.NewVerifier(),
		rangeBudget: frameRangeBytes,
		msgBudget:   sendMessageBytes,
		outstanding: maxOutstanding,
		slowAfter:   slowAfter,

		sessionBytes:  DefaultSessionBytes,
		firstReply:    DefaultFirstReply,
		answerTimeout: 2 * time.Minute,
		peerSessions:  DefaultPeerSessions,
		spaceSessions: DefaultSpaceSessions,
	}
}

// Defaults of the bounds on what sessions cost a node.
//
// A session answers only what the peer asks for, and at most
// DefaultSessionBytes of messages: a node that lacks more (a late joiner)
// gets the rest in the sessions that follow (the initiator runs another at
// once when one was cut short). 64 MiB is a long history of agent
// messages, and a sixteenth of a full space at the default quota.
//
// DefaultFirstReply is how long a peer has to answer the first frame of a
// session (the responder's reply to a hello, the initiator's answer to the
// responder's opening): both are computed at once from the store, so an
// honest peer answers in milliseconds, a busy one within a second or two.
// A peer that stays silent holds the space's session slot, which would
// stall the space's other sessions: it loses it after DefaultFirstReply
// and is refused for a minute.
//
// Sessions answered: a peer may start 2 a second, with a burst of 32 (a
// node that joins many spaces syncs them all with its peers at once); a
// space answers 10 a second, burst 50, whoever asks. An honest member
// syncs a space with one random member every 30 s, and on joins and
// gaps; the rest is a peer costing this node work for nothing. Beyond
// them the peer is told "busy" and tries again later.
const (
	DefaultSessionBytes = 64 << 20
	DefaultFirstReply   = 5 * time.Second
)

var (
	DefaultPeerSessions  = rate.Rate{PerSecond: 2, Burst: 32}
	DefaultSpaceSessions = rate.Rate{PerSecond: 10, Burst: 50}
)

// WithSessionBytes bounds the message bytes one session sends (default
// DefaultSessionBytes); at least one message is sent whatever its size.
func WithSessionBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return errors.New("session bytes must be positive")
		}
		c.sessionBytes = n
		return nil
	}
}

// WithFirstReply sets how long a peer has to answer a session's first
// frame (default DefaultFirstReply).
func WithFirstReply(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("first reply timeout must be positive")
		}
		c.firstReply = d
		return nil
	}
}

// WithSessionRates bounds the sessions answered per peer and per space
// (defaults DefaultPeerSessions, DefaultSpaceSessions); a zero Rate is no
// bound.
func WithSessionRates(perPeer, perSpace rate.Rate) Option {
	return func(c *config) error {
		if err := perPeer.Validate(); err != nil {
			return fmt.Errorf("per peer: %w", err)
		}
		if err := perSpace.Validate(); err != nil {
			return fmt.Errorf("per space: %w", err)
		}
		c.peerSessions, c.spaceSessions = perPeer, perSpace
		return nil
	}
}

// WithLimits sets the limits fetched messages are validated against
// (default protocol.DefaultLimits()); use the ones gossip uses.
// WithVerifier makes sessions check fetched messages' signatures with v,
// which the node may share with its gossip validator (one set of key
// tables for both).
func WithVerifier(v *protocol.Verifier) Option {
	return func(c *config) error {
		if v == nil {
			return errors.New("reconcile: nil verifier")
		}
		c.verifier = v
		return nil
	}
}

func WithLimits(l protocol.Limits) Option {
	return func(c *config) error {
		if err := l.Validate(); err != nil {
			return err
		}
		c.limits = l
		return nil
	}
}

// WithClock sets the clock used for validation and windows (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("nil clock")
		}
		c.now = now
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("nil logger")
		}
		c.log = l
		return nil
	}
}

// WithWindow limits sync to messages created within d before now (history
// on join then covers only that window). 0, the default, syncs everything
// the stores keep.
func WithWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("negative sync window")
		}
		c.window = d
		return nil
	}
}

// WithTimeout bounds one session from start to end (default 10 minutes).
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("sync timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithOnReceived sets f to be called after every session (either side)
// that fetched n > 0 new messages from p. The mesh uses it to sync the
// space's other members, which likely lack them too. f must not block.
func WithOnReceived(f func(p peer.ID, space protocol.ID, n int)) Option {
	return func(c *config) error {
		c.onReceived = f
		return nil
	}
}

// WithRefuseFor sets how long a peer that served an invalid message or
// broke the protocol is refused (default 10 minutes).
func WithRefuseFor(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("negative refusal time")
		}
		c.refuseFor = d
		return nil
	}
}

// WithAccess sets which peers may sync a space: a session of a space
// with a peer access refuses is neither answered (the peer is told this
// node is not a member) nor started. nil (the default) admits everyone.
func WithAccess(access func(space protocol.ID, p peer.ID) bool) Option {
	return func(c *config) error {
		c.access = access
		return nil
	}
}

// Session describes a sync session that ended, either side.
type Session struct {
	Peer      peer.ID
	Space     protocol.ID // zero when the session ended before naming it
	Initiated bool        // started by this node
	Start     time.Time
	End       time.Time
	Stats     Stats
	Err       error
}

// WithOnSession sets f to be told of every session that ends, either side
// (for metrics and traces). f must not block; nil: nobody is told.
func WithOnSession(f func(Session)) Option {
	return func(c *config) error {
		c.onSession = f
		return nil
	}
}
