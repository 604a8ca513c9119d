package call

import (
	"errors"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// Defaults.
const (
	// DefaultMaxCalls bounds the calls served at once; more are refused
	// with overloaded.
	DefaultMaxCalls = 1024
	// DefaultMaxPerPeer bounds the calls one peer has in flight here.
	DefaultMaxPerPeer = 64
	// DefaultTimeout bounds reading a request.
	DefaultTimeout = 10 * time.Second
)

// metaRoom is what a frame may carry beside its data (meta, envelope).
const metaRoom = 512 << 10

// MaxStreamMemory is the most a served call reserves in its stream's
// resource scope: its request, which is held until the call ends, at the
// largest size allowed (protocol.MaxMessageSize of input and metaRoom).
// A call reserves its request's actual size.
const MaxStreamMemory = protocol.MaxMessageSize + metaRoom

// Option configures a Service.
type Option func(*config) error

type config struct {
	limits     protocol.Limits
	maxCalls   int
	maxPerPeer int
	timeout    time.Duration
}

func newConfig(opts []Option) (config, error) {
	c := config{limits: protocol.DefaultLimits(), maxCalls: DefaultMaxCalls, maxPerPeer: DefaultMaxPerPeer, timeout: DefaultTimeout}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func (c config) requestLimit() int { return c.limits.MaxSize + metaRoom }
func (c config) frameLimit() int   { return c.limits.MaxSize + metaRoom }

// WithLimits bounds inputs and frame data by l.MaxSize.
func WithLimits(l protocol.Limits) Option {
	return func(c *config) error {
		if err := l.Validate(); err != nil {
			return err
		}
		c.limits = l
		return nil
	}
}

// WithMaxCalls bounds the calls served at once.
func WithMaxCalls(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return errors.New("call: max calls must be positive")
		}
		c.maxCalls = n
		return nil
	}
}

// WithTimeout bounds reading a request.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("call: timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithMaxPerPeer bounds the calls one peer may have in flight at once.
func WithMaxPerPeer(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return errors.New("call: max calls per peer must be positive")
		}
		c.maxPerPeer = n
		return nil
	}
}
