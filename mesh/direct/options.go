package direct

import (
	"errors"
	"log/slog"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// Defaults.
const (
	// DefaultTimeout bounds one exchange: storing a message and writing its
	// ack, or opening a stream.
	DefaultTimeout = 10 * time.Second
	// DefaultIdle is how long a stream may wait for its next message.
	DefaultIdle = 30 * time.Second
)

// Option configures a Service.
type Option func(*config) error

type config struct {
	limits  protocol.Limits
	now     func() time.Time
	log     *slog.Logger
	timeout time.Duration
	idle    time.Duration
}

func newConfig(opts []Option) (config, error) {
	c := config{
		limits:  protocol.DefaultLimits(),
		now:     time.Now,
		timeout: DefaultTimeout,
		idle:    DefaultIdle,
	}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	c.log = logger(c.log)
	return c, nil
}

// WithLimits sets the limits received messages are validated against.
func WithLimits(l protocol.Limits) Option {
	return func(c *config) error {
		if err := l.Validate(); err != nil {
			return err
		}
		c.limits = l
		return nil
	}
}

// WithClock sets the clock used to validate messages.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("direct: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// WithTimeout sets the per-exchange timeout.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("direct: timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}
