package node

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// Calls by capability ("anycast").
const (
	// anycastCacheTTL is how long a capability's providers, once
	// discovered, are reused before they are discovered again.
	anycastCacheTTL = 5 * time.Second
	// anycastHealthWait bounds the health look-ups that rank providers: a
	// provider that does not answer in time is ranked last, not dropped.
	anycastHealthWait = 2 * time.Second
	// MaxAnycastAttempts bounds the providers one call by capability tries.
	MaxAnycastAttempts = 8
)

// anycastState is what calls by capability remember: the providers found
// per capability, and the calls this node has in flight to each peer (the
// part of a provider's load its last health answer may not show yet).
type anycastState struct {
	mu       sync.Mutex
	cache    map[string]providerSet
	inflight map[peer.ID]int
}

type providerSet struct {
	peers []peer.ID
	at    time.Time
}

// Attempt is one provider a call by capability tried, and why it moved on.
type Attempt struct {
	Peer peer.ID
	Code string // the error code that made the call move on
	Msg  string
}

// AnyResult says which provider answered a call by capability.
type AnyResult struct {
	Peer     peer.ID   // the provider that answered
	Attempts []Attempt // the providers tried before it, in order
}

// failsOver reports whether a call that failed with code should be tried
// on the next provider: the provider could not be reached, was
// overloaded, no longer serves the name, or does not take calls from
// this node. Other failures (the handler ran and failed, the deadline
// passed, the caller cancelled) are the call's answer.
func failsOver(code string) bool {
	switch code {
	case protocol.CodeUnreachable, protocol.CodeOverloaded, protocol.CodeNoHandler, protocol.CodeForbidden:
		return true
	}
	return false
}

// candidate is a provider with what ranks it.
type candidate struct {
	id       peer.ID
	busy     bool    // its health says busy
	healthy  bool    // it answered the health look-up
	load     float64 // its reported load
	inflight int     // calls this node has in flight to it
	tie      uint32
}

// providers returns the providers of capability other than this node,
// ranked best first: those that answered a health look-up before those
// that did not, not busy before busy, then by load, by the calls this node
// has in flight to them, and at random among equals, so calls spread.
func (n *Node) providers(ctx context.Context, capability string) ([]peer.ID, error) {
	ids, err := n.providerIDs(ctx, capability)
	if err != nil {
		return nil, err
	}
	cands := make([]candidate, len(ids))
	var wg sync.WaitGroup
	hctx, cancel := context.WithTimeout(ctx, anycastHealthWait)
	defer cancel()
	n.anycast.mu.Lock()
	for i, id := range ids {
		cands[i] = candidate{id: id, inflight: n.anycast.inflight[id], tie: rand.Uint32()}
	}
	n.anycast.mu.Unlock()
	for i := range cands {
		wg.Go(func() {
			c := &cands[i]
			h, _, err := n.agentHealth(hctx, c.id)
			if err != nil {
				return
			}
			c.healthy, c.busy, c.load = true, h.Status == "busy", h.Load
		})
	}
	wg.Wait()
	slices.SortFunc(cands, compareCandidates)
	out := make([]peer.ID, len(cands))
	for i, c := range cands {
		out[i] = c.id
	}
	return out, nil
}

func compareCandidates(a, b candidate) int {
	if a.healthy != b.healthy {
		if a.healthy {
			return -1
		}
		return 1
	}
	if a.busy != b.busy {
		if b.busy {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.load, b.load), cmp.Compare(a.inflight, b.inflight), cmp.Compare(a.tie, b.tie))
}

// agentHealth asks a connected-or-reachable peer for its heartbeat.
func (n *Node) agentHealth(ctx context.Context, p peer.ID) (protocol.Health, time.Duration, error) {
	if err := n.reach(ctx, p); err != nil {
		return protocol.Health{}, 0, err
	}
	return n.agent.Health(ctx, p)
}

// providerIDs returns the providers of capability (other than this
// node), from the cache when it is fresh.
func (n *Node) providerIDs(ctx context.Context, capability string) ([]peer.ID, error) {
	n.anycast.mu.Lock()
	ps, ok := n.anycast.cache[capability]
	n.anycast.mu.Unlock()
	if ok && time.Since(ps.at) < anycastCacheTTL && len(ps.peers) > 0 {
		return slices.Clone(ps.peers), nil
	}
	found, err := n.Discover(ctx, capability, 0)
	if err != nil {
		return nil, err
	}
	var ids []peer.ID
	for _, p := range found {
		if p.ID != n.mesh.ID() {
			ids = append(ids, p.ID)
		}
	}
	n.anycast.mu.Lock()
	if n.anycast.cache == nil {
		n.anycast.cache = make(map[string]providerSet)
	}
	n.anycast.cache[capability] = providerSet{peers: ids, at: time.Now()}
	n.anycast.mu.Unlock()
	return slices.Clone(ids), nil
}

// forget drops p from capability's cached providers (it failed over).
func (n *Node) forget(capability string, p peer.ID) {
	n.anycast.mu.Lock()
	defer n.anycast.mu.Unlock()
	if ps, ok := n.anycast.cache[capability]; ok {
		ps.peers = slices.DeleteFunc(slices.Clone(ps.peers), func(id peer.ID) bool { return id == p })
		n.anycast.cache[capability] = ps
	}
}

// track counts a call in flight to p until the returned func is called.
func (n *Node) track(p peer.ID) func() {
	n.anycast.mu.Lock()
	if n.anycast.inflight == nil {
		n.anycast.inflight = make(map[peer.ID]int)
	}
	n.anycast.inflight[p]++
	n.anycast.mu.Unlock()
	return func() {
		n.anycast.mu.Lock()
		if n.anycast.inflight[p]--; n.anycast.inflight[p] <= 0 {
			delete(n.anycast.inflight, p)
		}
		n.anycast.mu.Unlock()
	}
}

// callAny runs try on the providers of inv.Name, best first, until one
// answers or fails with an error that does not fail over. inv.Peer is
// ignored. The error when every provider failed over says so, with each
// provider's reason; when there is none it is no_handler.
func (n *Node) callAny(ctx context.Context, inv Invocation, try func(context.Context, Invocation) error) (AnyResult, error) {
	if err := protocol.CheckName(inv.Name); err != nil {
		return AnyResult{}, errorf(api.CodeBadRequest, "capability: %v", err)
	}
	var res AnyResult
	for round := 0; round < 2; round++ {
		ids, err := n.providers(ctx, inv.Name)
		if err != nil {
			return res, err
		}
		ids = slices.DeleteFunc(ids, func(id peer.ID) bool {
			return slices.ContainsFunc(res.Attempts, func(a Attempt) bool { return a.Peer == id })
		})
		for _, id := range ids {
			if len(res.Attempts) >= MaxAnycastAttempts {
				break
			}
			inv.Peer = id
			done := n.track(id)
			err := try(ctx, inv)
			done()
			if err == nil {
				res.Peer = id
				return res, nil
			}
			ce, ok := err.(*protocol.CallError)
			if !ok || !failsOver(ce.Code) || ctx.Err() != nil {
				return res, err
			}
			res.Attempts = append(res.Attempts, Attempt{Peer: id, Code: ce.Code, Msg: ce.Message})
			n.forget(inv.Name, id)
		}
		if len(res.Attempts) == 0 || len(res.Attempts) >= MaxAnycastAttempts {
			break
		}
		// Every provider known failed over: discover afresh once, in
		// case others have come up since.
		n.anycast.mu.Lock()
		delete(n.anycast.cache, inv.Name)
		n.anycast.mu.Unlock()
	}
	if len(res.Attempts) == 0 {
		return res, protocol.Errorf(protocol.CodeNoHandler, "no peer offers %q: discovery found no provider", inv.Name)
	}
	msg := ""
	for i, a := range res.Attempts {
		if i > 0 {
			msg += "; "
		}
		msg += a.Peer.String() + ": " + a.Code
	}
	last := res.Attempts[len(res.Attempts)-1]
	return res, protocol.Errorf(last.Code, "no provider of %q could take the call (%d tried: %s)", inv.Name, len(res.Attempts), msg)
}

// InvokeAny calls whichever peer offers the capability inv.Name (inv.Peer
// is ignored): the providers are discovered, ranked by health and load,
// and tried in turn while they fail with unreachable, overloaded,
// no_handler or forbidden. It says which provider answered. A provider
// that breaks off mid-call is failed over too, so a call may run on more
// than one provider (at least once, not at most once).
func (n *Node) InvokeAny(ctx context.Context, inv Invocation) (Result, AnyResult, error) {
	var out Result
	ar, err := n.callAny(ctx, inv, func(ctx context.Context, inv Invocation) error {
		r, err := n.Invoke(ctx, inv)
		out = r
		return err
	})
	return out, ar, err
}

// StreamInvokeAny is InvokeAny for a stream call: it fails over only
// before the call's first frame (once a provider has started, its stream
// is the answer).
func (n *Node) StreamInvokeAny(ctx context.Context, inv Invocation) (*CallStream, AnyResult, error) {
	var out *CallStream
	ar, err := n.callAny(ctx, inv, func(ctx context.Context, inv Invocation) error {
		cs, err := n.StreamInvoke(ctx, inv)
		out = cs
		return err
	})
	return out, ar, err
}
