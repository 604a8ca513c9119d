package mesh

import (
	"sync"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// inflightTTL is how long a message accepted by gossip counts as on its
// way to the store. It is reached only when one is dropped between the
// validator and the Sink (a subscriber's full buffer), or the node is far
// behind: then gap repair fetches it.
const inflightTTL = 10 * time.Second

// inflight is the set of messages that gossip accepted (the
// validator) and the Sink has not finished with: a gap whose missing
// parent is among them is no gap, the parent only waits in a queue (under
// load, for longer than gapDelay: each such gap started a sync session
// that fetched what gossip was about to store). An entry counts for
// inflightTTL at most, so one never removed cannot hold a gap open.
type inflight struct {
	mu    sync.Mutex
	now   func() time.Time
	at    map[protocol.ID]time.Time // when accepted
	swept time.Time
}

func newInflight(now func() time.Time) *inflight {
	return &inflight{now: now, at: make(map[protocol.ID]time.Time), swept: now()}
}

// add notes that id was accepted and is on its way to the Sink.
func (f *inflight) add(id protocol.ID) {
	if f == nil {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.swept) >= inflightTTL {
		for k, t := range f.at {
			if now.Sub(t) >= inflightTTL {
				delete(f.at, k)
			}
		}
		f.swept = now
	}
	f.at[id] = now
}

// done notes that the Sink is finished with id (stored or not).
func (f *inflight) done(id protocol.ID) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, id)
}

// has reports whether id is on its way to the Sink.
func (f *inflight) has(id protocol.ID) bool {
	if f == nil {
		return false
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[id]
	return ok && now.Sub(t) < inflightTTL
}

// len is how many entries are held, expired ones included (for tests).
func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at)
}

// recentStored is how many of the messages this node stored last (by
// gossip, sync or its own publishing) gap repair remembers.
const recentStored = 4096

// storedRing remembers the IDs of the messages this node stored last, so
// that gap repair finds most parents without a store lookup (a parent is
// nearly always one of the last messages of its space). It forgets the
// oldest first; what it does not know, the store is asked about. Safe for
// concurrent use; the zero value is ready.
type storedRing struct {
	mu   sync.Mutex
	ids  map[protocol.ID]struct{}
	ring []protocol.ID
	next int
}

// add remembers id as stored.
func (r *storedRing) add(id protocol.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = make(map[protocol.ID]struct{}, recentStored)
		r.ring = make([]protocol.ID, 0, recentStored)
	}
	if _, ok := r.ids[id]; ok {
		return
	}
	if len(r.ring) < recentStored {
		r.ring = append(r.ring, id)
	} else {
		delete(r.ids, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % recentStored
	}
	r.ids[id] = struct{}{}
}

// has reports whether id is remembered as stored.
func (r *storedRing) has(id protocol.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}
