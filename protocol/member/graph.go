package member

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Graph is what the auth rule needs of one private space's message graph:
// for each accepted message its depth and the set of control messages in
// its causal past (itself included, for a control message). Sets are
// interned and each set's state is computed once, so checking a message
// costs a union of its parents' sets (usually one and the same set: no
// work) and a map lookup, never a walk of the history. A Graph is not
// safe for concurrent use.
type Graph struct {
	space   protocol.ID
	genesis *protocol.Message
	sealed  bool
	nodes   map[protocol.ID]gnode
	sets    map[string]*ctlSet
	ctl     map[protocol.ID]ctlMsg
	all     *ctlSet // every control message in the graph
	// lastOf is, for all (lastFor), each peer's last membership change
	// the resolution applies (see LastChange), computed once per set.
	lastFor *ctlSet
	lastOf  map[peer.ID]*protocol.Message
}

type gnode struct {
	depth int
	incl  *ctlSet
}

type ctlMsg struct {
	m     *protocol.Message
	depth int
}

// ctlSet is an interned set of control message IDs, sorted.
type ctlSet struct {
	ids   []protocol.ID
	state *State // lazily resolved
}

func setKey(ids []protocol.ID) string {
	var b strings.Builder
	b.Grow(len(ids) * protocol.IDSize)
	for _, id := range ids {
		b.Write(id[:])
	}
	return b.String()
}

// NewGraph starts the graph of the space genesis creates (which must be a
// valid genesis whose signature the caller has checked).
func NewGraph(genesis *protocol.Message) (*Graph, error) {
	gen, err := ParseGenesis(genesis)
	if err != nil {
		return nil, err
	}
	g := &Graph{
		space:   genesis.Space,
		genesis: genesis,
		sealed:  gen.Sealed,
		nodes:   make(map[protocol.ID]gnode),
		sets:    make(map[string]*ctlSet),
		ctl:     make(map[protocol.ID]ctlMsg),
	}
	s := g.intern([]protocol.ID{genesis.ID})
	g.nodes[genesis.ID] = gnode{depth: 0, incl: s}
	g.ctl[genesis.ID] = ctlMsg{m: genesis, depth: 0}
	g.all = s
	return g, nil
}

// Space returns the space's ID.
func (g *Graph) Space() protocol.ID { return g.space }

// Genesis returns the space's genesis.
func (g *Graph) Genesis() *protocol.Message { return g.genesis }

// Has reports whether id is in the graph.
func (g *Graph) Has(id protocol.ID) bool { _, ok := g.nodes[id]; return ok }

// Len returns the number of messages in the graph.
func (g *Graph) Len() int { return len(g.nodes) }

func (g *Graph) intern(ids []protocol.ID) *ctlSet {
	k := setKey(ids)
	if s, ok := g.sets[k]; ok {
		return s
	}
	s := &ctlSet{ids: ids}
	g.sets[k] = s
	return s
}

// union returns the interned union of sets.
func (g *Graph) union(sets []*ctlSet) *ctlSet {
	first := sets[0]
	same := true
	for _, s := range sets[1:] {
		if s != first {
			same = false
			break
		}
	}
	if same {
		return first
	}
	var ids []protocol.ID
	for _, s := range sets {
		ids = append(ids, s.ids...)
	}
	slices.SortFunc(ids, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	return g.intern(ids)
}

func (g *Graph) with(s *ctlSet, id protocol.ID) *ctlSet {
	if _, found := slices.BinarySearchFunc(s.ids, id, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) }); found {
		return s
	}
	ids := append(slices.Clone(s.ids), id)
	slices.SortFunc(ids, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	return g.intern(ids)
}

// past returns the control set and depth of a message with these parents;
// missing lists the parents not in the graph.
func (g *Graph) past(prev []protocol.ID) (s *ctlSet, depth int, missing []protocol.ID) {
	sets := make([]*ctlSet, 0, len(prev))
	for _, p := range prev {
		n, ok := g.nodes[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		sets = append(sets, n.incl)
		depth = max(depth, n.depth+1)
	}
	if len(missing) > 0 {
		return nil, 0, missing
	}
	return g.union(sets), depth, nil
}

// Check decides m (signature already verified) against the state of its
// causal past. When some of m's parents are not in the graph it returns
// them and no error: m must wait for them (it is neither accepted nor
// refused). The genesis itself checks fine.
func (g *Graph) Check(m *protocol.Message) (missing []protocol.ID, err error) {
	if m.Space != g.space {
		return nil, errorf(ErrMalformed, "message of space %s checked in %s", m.Space, g.space)
	}
	if m.ID == g.genesis.ID {
		return nil, nil
	}
	if len(m.Prev) == 0 {
		return nil, errorf(ErrUnauthorized, "a message of a private space must descend from its genesis (no prev)")
	}
	s, _, missing := g.past(m.Prev)
	if len(missing) > 0 {
		return missing, nil
	}
	if _, err = Authorize(g.resolve(s), m); err != nil {
		return nil, err
	}
	if g.sealed && !IsControl(m) && m.Type != TypeKey {
		if _, ok := ParseEnvelope(m.Content); !ok {
			return nil, errorf(ErrMalformed, "a sealed space's message must be sealed (its content is not an envelope)")
		}
		if len(m.Meta) > 0 {
			return nil, errorf(ErrMalformed, "a sealed space's message carries meta in the clear")
		}
	}
	return nil, nil
}

// Sealed reports whether the space's content is encrypted.
func (g *Graph) Sealed() bool { return g.sealed }

// StateBefore returns the membership state of the causal past of a
// message with parents prev, and the parents missing from the graph.
func (g *Graph) StateBefore(prev []protocol.ID) (State, []protocol.ID) {
	s, _, missing := g.past(prev)
	if len(missing) > 0 {
		return State{}, missing
	}
	return g.resolve(s), nil
}

// Add records m, which the caller accepted (by Check, or as stored
// earlier). Its parents must be in the graph.
func (g *Graph) Add(m *protocol.Message) error {
	if _, ok := g.nodes[m.ID]; ok {
		return nil
	}
	if m.Space != g.space {
		return fmt.Errorf("add %s: space %s, not %s", m.ID, m.Space, g.space)
	}
	s, depth, missing := g.past(m.Prev)
	if len(missing) > 0 || len(m.Prev) == 0 {
		return fmt.Errorf("add %s: %d parents missing", m.ID, len(missing))
	}
	if IsControl(m) {
		s = g.with(s, m.ID)
		g.ctl[m.ID] = ctlMsg{m: m, depth: depth}
		g.all = g.with(g.all, m.ID)
	}
	g.nodes[m.ID] = gnode{depth: depth, incl: s}
	return nil
}

// Forget removes m, an ordinary message (not a control message: those
// shape every state after them) that was added before it was stored, when
// storing it failed. Messages added after it that name it stay: a node's
// record of a message holds no link to its parents. It reports whether m
// was forgotten.
func (g *Graph) Forget(id protocol.ID) bool {
	if _, ctl := g.ctl[id]; ctl {
		return false
	}
	_, ok := g.nodes[id]
	delete(g.nodes, id)
	return ok
}

// LeaveOf returns p's leave if it is the change in force that made p a
// non-member (see LastChange): nil once p was let in again or removed
// after, and for a leave skipped because p was removed concurrently
// before it.
func (g *Graph) LeaveOf(p peer.ID) *protocol.Message {
	last := g.LastChange(p)
	if last == nil || last.Sender() != p {
		return nil
	}
	if ch, _, err := ParseChange(last); err != nil || ch.Op != OpLeave {
		return nil
	}
	return last
}

// LastChange returns the last membership change naming p that the
// resolution applies (replaying the graph's control messages as Current
// does, skipping what Authorize refuses), or nil if none names p. The
// replay is done once per set of control messages, for every peer.
func (g *Graph) LastChange(p peer.ID) *protocol.Message {
	if g.lastFor != g.all {
		st := genesisState(g.genesis)
		last := make(map[peer.ID]*protocol.Message)
		for _, c := range g.ordered(g.all) {
			next, err := Authorize(st, c.m)
			if err != nil {
				continue // skipped, as resolve skips it
			}
			st = next
			if c.m.Type != TypeMember {
				continue
			}
			if _, target, err := ParseChange(c.m); err == nil {
				last[target] = c.m
			}
		}
		g.lastFor, g.lastOf = g.all, last
	}
	return g.lastOf[p]
}

// Current returns the state of every control message in the graph: the
// membership after everything this node holds.
func (g *Graph) Current() State { return g.resolve(g.all) }

// resolve computes (once) the state of a set of control messages: from
// the genesis, each is applied in the order of (depth, removals and
// leaves first, ID) — a topological order, since a message is deeper than
// its parents — if it is authorized in the state so far; one that is not
// (its author lost its role to a concurrent change ordered before it) is
// skipped. Every node that holds the same set computes the same state.
func (g *Graph) resolve(s *ctlSet) State {
	if s.state != nil {
		return *s.state
	}
	st := genesisState(g.genesis)
	for _, c := range g.ordered(s) {
		if next, err := Authorize(st, c.m); err == nil {
			st = next
		}
	}
	s.state = &st
	return st
}

// ordered returns the control messages of s but the genesis in the order
// resolve applies them: (depth, removals and leaves first, ID).
func (g *Graph) ordered(s *ctlSet) []ctlMsg {
	msgs := make([]ctlMsg, 0, len(s.ids))
	for _, id := range s.ids {
		if id != g.genesis.ID {
			msgs = append(msgs, g.ctl[id])
		}
	}
	slices.SortFunc(msgs, func(a, b ctlMsg) int {
		if d := cmp.Compare(a.depth, b.depth); d != 0 {
			return d
		}
		if d := cmp.Compare(opRank(a.m), opRank(b.m)); d != 0 {
			return d
		}
		return bytes.Compare(a.m.ID[:], b.m.ID[:])
	})
	return msgs
}

// opRank orders concurrent changes of one depth: removals and leaves
// first (removes win), then the rest.
func opRank(m *protocol.Message) int {
	c, _, err := ParseChange(m)
	if err == nil && (c.Op == OpRemove || c.Op == OpLeave) {
		return 0
	}
	return 1
}
