package reconcile

import (
	"errors"
	"log/slog"
	"runtime"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Option configures New.
type Option func(*config) error

type config struct {
	limits      protocol.Limits
	now         func() time.Time
	log         *slog.Logger
	window      time.Duration // 0: all history
	timeout     time.Duration // one session, start to end
	maxInbound  int           // sessions answered at once
	maxRounds   int           // exchanges per session
	refuseFor   time.Duration // how long a misbehaving peer is refused
	validators  int           // goroutines validating one exchange's messages
	rangeBudget int           // range bytes per exchange (frameRangeBytes; tests lower it)
	slowAfter   time.Duration // see errSlow (tests lower it)
	onReceived  func(p peer.ID, space protocol.ID, n int)
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
		rangeBudget: frameRangeBytes,
		slowAfter:   slowAfter,
	}
}

// WithLimits sets the limits fetched messages are validated against
// (default protocol.DefaultLimits()); use the ones gossip uses.
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
