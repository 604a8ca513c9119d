package node

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Serving is what this node's agents serve and call right now: the
// handlers registered, the calls from peers they are answering, and the
// calls they made to peers that have not ended.
type Serving struct {
	Handlers []HandlerInfo
	Calls    []ServedCall // from peers, to this node's handlers
	Outgoing []ServedCall // from this node's agents, to peers (From: the callee)
}

// HandlerInfo describes one registered handler connection.
type HandlerInfo struct {
	Names    []string
	Allow    []string // who may call, in the words of its policy
	InFlight int      // calls it holds now
	Capacity int      // calls it takes at once
}

// ServedCall is a call from a peer in flight on this node.
type ServedCall struct {
	ID      string
	Name    string
	From    peer.ID
	Stream  bool
	Started time.Time // when it was handed to the handler
}

// Serving returns the handlers registered and the calls in flight, the
// calls oldest first.
func (n *Node) Serving() Serving {
	s := n.handlers.serving()
	s.Outgoing = n.outgoing.list()
	return s
}

func (hs *handlers) serving() Serving {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := Serving{Handlers: []HandlerInfo{}, Calls: []ServedCall{}}
	seen := make(map[*Handler]bool)
	for _, conns := range hs.byName {
		for _, hc := range conns {
			if seen[hc] {
				continue
			}
			seen[hc] = true
			out.Handlers = append(out.Handlers, HandlerInfo{
				Names: slices.Clone(hc.names), Allow: hc.allow.Words(),
				InFlight: len(hc.slots), Capacity: cap(hc.slots),
			})
		}
	}
	slices.SortFunc(out.Handlers, func(a, b HandlerInfo) int {
		return strings.Compare(strings.Join(a.Names, ","), strings.Join(b.Names, ","))
	})
	for _, sc := range hs.calls {
		out.Calls = append(out.Calls, ServedCall{
			ID: sc.id, Name: sc.c.Request.Name, From: sc.c.From,
			Stream: sc.c.Request.Stream, Started: sc.at,
		})
	}
	slices.SortFunc(out.Calls, func(a, b ServedCall) int { return a.Started.Compare(b.Started) })
	return out
}

// outCalls tracks the calls this node's agents have in flight to peers.
// Its zero value is ready to use.
type outCalls struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]ServedCall
}

// track records a call to p until the returned function is called.
func (o *outCalls) track(p peer.ID, name string, stream bool) (done func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[uint64]ServedCall)
	}
	o.next++
	id := o.next
	o.m[id] = ServedCall{Name: name, From: p, Stream: stream, Started: time.Now()}
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			delete(o.m, id)
			o.mu.Unlock()
		})
	}
}

func (o *outCalls) list() []ServedCall {
	o.mu.Lock()
	out := make([]ServedCall, 0, len(o.m))
	for _, c := range o.m {
		out = append(out, c)
	}
	o.mu.Unlock()
	slices.SortFunc(out, func(a, b ServedCall) int { return a.Started.Compare(b.Started) })
	return out
}
