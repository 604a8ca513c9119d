package outbox

import (
	"errors"
	"log/slog"
	"math/rand/v2"
)

// Option configures New.
type Option func(*config) error

type config struct {
	obs   Observer
	log   *slog.Logger
	clock Clock
	rand  func() float64
}

// defaults: discard logs, the system clock, math/rand/v2's global source.
func defaults() config {
	return config{
		log:   slog.New(slog.DiscardHandler),
		clock: realClock{},
		rand:  rand.Float64,
	}
}

// Observer is told what the outbox does, for metrics. Its methods must
// not block.
type Observer interface {
	// Attempt: a delivery attempt to a peer (one batch of messages)
	// reached it or not.
	Attempt(reached bool)
	// Delivered: the recipient acknowledged a message.
	Delivered()
	// DeadLettered: a message was given up on: refused by its recipient,
	// or past its deadline.
	DeadLettered(refused bool)
}

// WithObserver sets who is told what the outbox does (nil: nobody).
func WithObserver(o Observer) Option {
	return func(c *config) error {
		c.obs = o
		return nil
	}
}

// nobody is the Observer told nothing.
type nobody struct{}

func (nobody) Attempt(bool)      {}
func (nobody) Delivered()        {}
func (nobody) DeadLettered(bool) {}

// WithLogger sets the logger; nil discards (the default).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.log = l
		return nil
	}
}

// WithClock sets the clock (default: the system's).
func WithClock(clk Clock) Option {
	return func(c *config) error {
		if clk == nil {
			return errors.New("outbox: nil clock")
		}
		c.clock = clk
		return nil
	}
}

// WithRand sets the source of the retry jitter: f returns a number in
// [0, 1) and must be safe for concurrent use (default: math/rand/v2's
// Float64).
func WithRand(f func() float64) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("outbox: nil rand")
		}
		c.rand = f
		return nil
	}
}
