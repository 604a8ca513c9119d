// Package advert keeps a node advertised under a rendezvous namespace
// (a space's members, a capability's providers) in the DHT.
package advert

import (
	"context"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
)

// Timing. Advertising fails until the DHT has a peer: it is retried from
// RetryMin, doubling up to RetryMax. A record is renewed at 7/8 of its
// TTL, and at least every MaxWait.
const (
	RetryMin = 2 * time.Second
	RetryMax = time.Minute
	MaxWait  = time.Hour
)

// Loop advertises this node under ns through d until ctx ends. Failures
// are logged at debug level with attrs and retried quietly.
func Loop(ctx context.Context, d discovery.Advertiser, ns string, log *slog.Logger, attrs ...any) {
	retry := RetryMin
	for {
		var wait time.Duration
		ttl, err := d.Advertise(ctx, ns)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Debug("advertise failed; will retry", append(attrs, "ns", ns, "in", retry, "err", err)...)
			wait = retry
			retry = min(2*retry, RetryMax)
		} else {
			log.Debug("advertised", append(attrs, "ns", ns, "ttl", ttl)...)
			wait = MaxWait // a discovery that states no TTL
			if ttl > 0 {
				wait = max(min(7*ttl/8, MaxWait), RetryMin)
			}
			retry = RetryMin
		}
		if !Sleep(ctx, wait) {
			return
		}
	}
}

// Sleep waits for d or until ctx ends, reporting whether d elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
