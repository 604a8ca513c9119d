package agent

import (
	"errors"
	"log/slog"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// Option configures New.
type Option func(*config) error

type config struct {
	card     func() protocol.Card   // nil: a card with the ID only
	health   func() protocol.Health // nil: "ok", uptime and time
	log      *slog.Logger
	timeout  time.Duration // one exchange (stream deadline); one candidate of Discover
	cacheTTL time.Duration // 0: cards are not cached
}

func defaults() config {
	return config{
		log:      slog.New(slog.DiscardHandler),
		timeout:  10 * time.Second,
		cacheTTL: time.Minute,
	}
}

// WithCard sets the function that returns this node's card, called for
// every request, so the card served is always the live one. Its ID is
// overwritten with the host's peer ID, and capabilities whose names fail
// protocol.CheckName are left out. f must be safe for concurrent use.
// Default: a card with the ID only.
func WithCard(f func() protocol.Card) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("nil card function")
		}
		c.card = f
		return nil
	}
}

// WithHealth sets the function that returns this node's health, called for
// every request; a zero Time is set to now. f must be safe for concurrent
// use. Default: status "ok" with the service's uptime.
func WithHealth(f func() protocol.Health) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("nil health function")
		}
		c.health = f
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

// WithTimeout bounds one exchange, on either side: the deadline of a
// served stream, and of a Card or Health request (unless its ctx ends
// sooner). Discover gives each candidate this long to be dialled and
// answer. Default 10 s.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithCardCacheTTL sets how long a fetched card is reused before it is
// asked for again (default 1 minute); 0 turns the cache off. A peer's new
// card is seen once its cached one expires or after Forget.
func WithCardCacheTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("negative card cache TTL")
		}
		c.cacheTTL = d
		return nil
	}
}
