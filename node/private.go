package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/admit"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// Private spaces (protocol/member): every message of one goes through
// ingestPrivate, which checks it against the membership state of its
// causal past before it is stored, on every path (this node's agents,
// gossip, sync, a presented join). A message whose parents this node lacks
// is held in memory until they arrive (sync fetches them), never refused
// for it. The mesh is told who may take part in each space (spaceAccess):
// the current members.

// maxHeld bounds the messages held per private space for want of their
// parents; beyond it new ones are dropped (sync fetches them again).
const maxHeld = 100_000

// leaverGrace is how long a member that took in a leave waits before it
// drops the leaver's connections: long enough to answer a presented one.
const leaverGrace = 2 * time.Second

// DefaultInviteTTL is how long an invite lasts when no expiry is given.
const DefaultInviteTTL = 24 * time.Hour

// maxInviteAddrs bounds the addresses an invite carries.
const maxInviteAddrs = 12

// privSpaces are the private spaces this node has joined.
type privSpaces struct {
	mu     sync.RWMutex
	spaces map[protocol.ID]*privSpace
}

func (ps *privSpaces) get(id protocol.ID) *privSpace {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.spaces[id]
}

// all returns the private spaces joined.
func (ps *privSpaces) all() []*privSpace {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	out := make([]*privSpace, 0, len(ps.spaces))
	for _, s := range ps.spaces {
		out = append(out, s)
	}
	return out
}

func (ps *privSpaces) set(s *privSpace) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.spaces == nil {
		ps.spaces = make(map[protocol.ID]*privSpace)
	}
	ps.spaces[s.graph.Space()] = s
}

// privSpace is one private space: its graph (under mu) and the messages
// held for their parents.
type privSpace struct {
	name    string
	genesis member.Genesis
	current atomic.Pointer[member.State] // membership after every message held
	removed atomic.Bool                  // this node was told of its removal (see presentedJoin)
	gone    atomic.Bool                  // this node was a member and its graph says it is not now
	// leave is this node's signed leave while no member has confirmed it
	// (see leavePrivate); nil otherwise.
	leave atomic.Pointer[[]byte]
	// rotating serialises this node's key rotations of a sealed space, so
	// that changes taken in together make one new epoch (sealed.go).
	rotating sync.Mutex
	// retrying: a loop tries a failed rotation again (retryRotation).
	retrying atomic.Bool
	// finishing: a loop presents an unconfirmed leave again
	// (finishLeaveLater).
	finishing atomic.Bool
	// leaveSyncs bounds the syncs presented leaves make this node start
	// (see presentedJoin).
	leaveSyncs leaveSyncs
	// contacts are the members a joiner met through its invite: taken
	// part with before this node has the history that makes them members.
	contacts sync.Map // peer.ID → true
	keys     keyring  // a sealed space's epoch keys (sealed.go)

	mu      sync.Mutex
	graph   *member.Graph
	pending map[protocol.ID][]*protocol.Message // by a missing parent
	held    map[protocol.ID]bool
	// storing: the messages accepted and being stored, with their
	// parents, until they are in the graph (see ingestPrivate); the
	// store's heads name them before the graph has them.
	storing map[protocol.ID][]protocol.ID
}

func newPrivSpace(name string, g *protocol.Message) (*privSpace, error) {
	gen, err := member.ParseGenesis(g)
	if err != nil {
		return nil, err
	}
	gr, err := member.NewGraph(g)
	if err != nil {
		return nil, err
	}
	s := &privSpace{name: name, genesis: gen, graph: gr, pending: make(map[protocol.ID][]*protocol.Message), held: make(map[protocol.ID]bool), storing: make(map[protocol.ID][]protocol.ID)}
	st := gr.Current()
	s.current.Store(&st)
	return s, nil
}

// out reports whether this node has been removed from s, or has left it
// (and a member has its leave: until then it stays, so that sync can
// bring the leave to them, see leavePrivate).
func (s *privSpace) out() bool {
	return s.removed.Load() || (s.gone.Load() && s.leave.Load() == nil)
}

// rendezvous is a private space's DHT namespace: from its genesis's secret
// nonce, so that only members (who hold the genesis) can find it, not
// whoever knows the space's name or ID.
func (s *privSpace) rendezvous() string {
	h := sha256.Sum256(append([]byte("weft/private-rendezvous/v1\x00"), s.genesis.Nonce...))
	return "weft/private/" + hex.EncodeToString(h[:])
}

// spaceAccess is mesh.Config.SpaceAccess: a private space admits its
// current members, an open space everyone.
func (n *Node) spaceAccess(space protocol.ID, p peer.ID) bool {
	s := n.private.get(space)
	if s == nil {
		return true
	}
	if s.out() {
		// Removed, or left: its copy of the space is not the members' any
		// more, so it serves no one (a joiner would take its stale history
		// for the space's).
		return false
	}
	if s.current.Load().IsMember(p) {
		return true
	}
	_, ok := s.contacts.Load(p)
	return ok
}

// spaceRendezvous is mesh.Config.SpaceRendezvous.
func (n *Node) spaceRendezvous(space protocol.ID) string {
	if s := n.private.get(space); s != nil {
		return s.rendezvous()
	}
	return protocol.Rendezvous(space)
}

// configurePrivate loads the private spaces (before the mesh starts, so
// that its first connections are filtered) and sets the mesh's hooks.
func (n *Node) configurePrivate(mc *mesh.Config) error {
	spaces, err := n.store.Spaces()
	if err != nil {
		return err
	}
	for _, sp := range spaces {
		if sp.Private == nil {
			continue
		}
		if err := n.loadPrivate(sp); err != nil {
			// Without its genesis no message of it can be checked: the
			// space is not rejoined (see startMesh), the node still starts.
			n.log.Error("private space cannot be rebuilt; not rejoined", "space", sp.ID, "name", sp.Name, "err", err)
		}
	}
	mc.SpaceAccess = n.spaceAccess
	mc.SpaceRendezvous = n.spaceRendezvous
	return nil
}

// startPrivate serves presented joins; the mesh has started.
func (n *Node) startPrivate() {
	n.admitSvc = admit.New(n.mesh.Host(), n.presentedJoin)
}

// loadPrivate rebuilds a private space's graph from the store. Messages
// were stored only once their parents were, so the space's order is a
// topological one.
func (n *Node) loadPrivate(sp store.Space) error {
	e, err := n.store.Get(sp.Private.Genesis)
	if err != nil {
		return fmt.Errorf("genesis: %w", err)
	}
	g, err := decodeStored(e)
	if err != nil {
		return err
	}
	s, err := newPrivSpace(sp.Name, g.Message)
	if err != nil {
		return err
	}
	n.learnKeys(s, g.Message)
	var after store.Cursor
	var later []*protocol.Message // stored before a parent (not by this code)
	for {
		page, next, err := n.readStored(sp.ID, after, 1000)
		if err != nil {
			return err
		}
		for _, m := range page {
			if s.graph.Has(m.ID) {
				continue
			}
			if s.graph.Add(m.Message) != nil {
				later = append(later, m.Message)
			} else {
				n.learnKeys(s, m.Message)
			}
		}
		if len(page) == 0 || next == after {
			break
		}
		after = next
	}
	for progress := true; progress && len(later) > 0; {
		progress = false
		rest := later[:0]
		for _, m := range later {
			if s.graph.Add(m) == nil {
				n.learnKeys(s, m)
				progress = true
			} else {
				rest = append(rest, m)
			}
		}
		later = rest
	}
	if len(later) > 0 {
		n.log.Warn("private space: stored messages without their parents", "space", sp.ID, "count", len(later))
	}
	st := s.graph.Current()
	s.current.Store(&st)
	n.restoreLeave(s, &st)
	n.private.set(s)
	return nil
}

// restoreLeave finds, at start, this node's leave of s that no member had
// confirmed when it stopped: the space is still joined (a confirmed leave
// leaves it), and this node's own graph says it left. It is kept as
// leavePrivate keeps it, so that the node stays in the space, serving the
// leave to the members' sync, and the next leave presents that same one;
// held in memory only, it was lost at a restart, after which a leave
// left locally, unannounced, and the members kept counting this node.
func (n *Node) restoreLeave(s *privSpace, st *member.State) {
	self, err := peer.IDFromPrivateKey(n.key) // before the mesh starts
	if err != nil || st.IsMember(self) {
		return
	}
	m := s.graph.LeaveOf(self)
	if m == nil {
		return // removed, or never a member
	}
	w := m.Wire()
	s.leave.Store(&w)
	s.gone.Store(true)
	n.log.Info("private space: this node's leave is not confirmed yet; it stays until a member takes it", "space", s.graph.Space(), "leave", m.ID)
}

// resumePrivate starts, once the node has started, what its private
// spaces left undone when it stopped: a sealed space's rotation (a member
// may have left while this node, an admin, was down), a leave no member
// had confirmed (restoreLeave).
func (n *Node) resumePrivate() {
	for _, s := range n.private.all() {
		if s.sealed() {
			n.rotateLater(s.graph.Space(), s)
		}
		if s.leave.Load() != nil {
			n.finishLeaveLater(s)
		}
	}
}

// unusable reports whether sp is a private space whose membership could
// not be rebuilt: it must not be rejoined, or its messages would go
// unchecked.
func (n *Node) unusable(sp store.Space) bool {
	return sp.Private != nil && n.private.get(sp.ID) == nil
}

// privateError turns an auth refusal into the error this node's agents
// get.
func privateError(m *protocol.Message, err error) error {
	code := api.CodeNotMember
	if errors.Is(err, member.ErrBadInvite) {
		code = api.CodeBadInvite
	}
	return &Error{Code: code, Msg: fmt.Sprintf("private space %s: %v", m.Space, err), Err: err}
}

// admitPrivate is the private-space part of admit (gossip's Gate and
// Send): an error for a message refused in the state of its causal past;
// nil for one allowed, one already held, or one that must wait for its
// parents.
func (n *Node) admitPrivate(m *protocol.Message) error {
	s := n.private.get(m.Space)
	if s == nil {
		return nil
	}
	if s.removed.Load() && m.Sender() == n.mesh.ID() {
		return privateError(m, fmt.Errorf("%w: this node was removed from the space", member.ErrUnauthorized))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.graph.Has(m.ID) {
		return nil
	}
	missing, err := s.check(m)
	if err != nil {
		return privateError(m, err)
	}
	_ = missing
	return nil
}

func (s *privSpace) check(m *protocol.Message) ([]protocol.ID, error) {
	return s.graph.Check(m)
}

// ingestPrivate is ingest for a message of private space s.
//
// The decision and the graph are under s.mu, the store write is not, so
// that messages of one space are stored concurrently: a message is added
// to the graph once stored, and one whose parent is still being stored
// waits for it as for any missing parent.
func (n *Node) ingestPrivate(ctx context.Context, s *privSpace, m *protocol.Message, via string) (store.Entry, bool, error) {
	ok, err := n.decidePrivate(s, m, via)
	if errors.Is(err, errHas) {
		if relayed(via) {
			return n.stored(m.ID)
		}
		// In the graph, but maybe not stored yet: an agent's send of the
		// very same message (same content, parents and millisecond: the
		// same ID) is in the graph before it is stored (early). Answered
		// from the store, this send would be answered before the message
		// is on disk, and for nothing if that store then fails. put
		// stores it (or finds it stored) and waits for the disk; the
		// graph then has it, whatever became of the other send.
		e, added, err := n.put(ctx, m, via)
		if err != nil {
			return e, added, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.graph.Has(m.ID) {
			n.storedLocked(ctx, s, m)
		}
		return e, added, nil
	}
	if err != nil || !ok {
		return store.Entry{}, false, err
	}
	e, added, err := n.put(ctx, m, via)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.storing, m.ID)
	if err != nil {
		if has, herr := n.store.Has(m.ID); herr == nil && has {
			// Stored all the same (its sync failed after the commit, or
			// another path stored it): a head of the store, which the
			// graph must have, or every send after would name its
			// parents (parentsFor) and be refused. The send still fails:
			// it is not known to be on disk.
			n.storedLocked(ctx, s, m)
			return e, added, err
		}
		if early(m, via) {
			s.graph.Forget(m.ID)
		}
		return e, added, err
	}
	n.storedLocked(ctx, s, m)
	return e, added, nil
}

// storedLocked adds m, stored, to s's graph (see accepted) and decides
// the messages held for it, as a sync exchange's (logged, not returned,
// if refused). s.mu is held.
func (n *Node) storedLocked(ctx context.Context, s *privSpace, m *protocol.Message) {
	n.ingestLocked(ctx, s, n.accepted(ctx, s, m), nil)
}

// ingestPrivateBatch is ingest, via "mesh", for ms, messages of private
// space s from the network in the order they came (a sync exchange's,
// parents first), setting errs[i] for ms[i]. Each is decided in order
// against the graph, as ingestPrivate decides it; the ordinary messages
// accepted are added to the graph as they are decided, so that the next
// one may name them, and stored together (store.PutBatch, a transaction
// per batch rather than per message: a private catch-up took 2–3 times
// an open one's). One the store does not take is forgotten by the graph
// again. A control or key message is stored on its own, after those
// before it (see ingestLocked). s.mu is held
// throughout, so no other path sees a message in the graph before it is
// stored; relayed messages do not wait for the disk.
func (n *Node) ingestPrivateBatch(ctx context.Context, s *privSpace, ms []*protocol.Message, errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n.ingestLocked(ctx, s, ms, errs)
}

// ingestLocked is ingestPrivateBatch under s.mu. The messages held for
// one it takes in are decided after the others, in the same batches: sync
// brings a space's ranges in no causal order, and a private catch-up held
// thousands, each stored on its own when its parent came. With errs nil,
// what it refuses is logged.
func (n *Node) ingestLocked(ctx context.Context, s *privSpace, ms []*protocol.Message, errs []error) {
	var (
		items []*protocol.Message // ms parents first, then what they free
		at    []int               // items[k] is ms[at[k]], or freed if -1
		run   []int               // items in the graph, to store together
	)
	for _, i := range parentsFirst(ms) {
		items, at = append(items, ms[i]), append(at, i)
	}
	free := func(ready []*protocol.Message) {
		for _, c := range ready {
			items, at = append(items, c), append(at, -1)
		}
	}
	fail := func(k int, err error) {
		if i := at[k]; i >= 0 && errs != nil {
			errs[i] = err
		} else {
			n.log.Warn("private space: held message", "id", items[k].ID, "err", err)
		}
	}
	flush := func() {
		if len(run) == 0 {
			return
		}
		batch := make([]store.Message, len(run))
		for j, k := range run {
			batch[j] = storeMessage(items[k])
		}
		lim := n.limitsOf(s.graph.Space())
		res, err := n.store.PutBatch(ctx, batch, store.Quota{SpaceBytes: lim.MaxBytes, SenderBytes: lim.MaxSenderBytes})
		if err != nil {
			n.log.Warn("store messages", "via", "mesh", "space", s.graph.Space(), "count", len(run), "err", err)
		}
		for j, k := range run {
			m := items[k]
			var bad error
			switch {
			case err != nil:
				bad = fmt.Errorf("store: %w", err)
			case errors.Is(res[j].Err, store.ErrQuota):
				bad = n.refusal(m, "mesh", res[j].Err)
			case res[j].Err != nil:
				bad = fmt.Errorf("store: %w", res[j].Err)
			}
			if bad != nil {
				s.graph.Forget(m.ID)
				fail(k, bad)
				continue
			}
			if res[j].Added {
				n.cfg.Metrics.MessageReceived(m.Space.String())
			}
			free(n.accepted(ctx, s, m))
		}
		run = run[:0]
	}
	// Until nothing is left to decide: a flush frees what waited for the
	// messages it stores.
	for k := 0; k < len(items) || len(run) > 0; k++ {
		if k == len(items) {
			flush()
			k--
			continue
		}
		m := items[k]
		if s.graph.Has(m.ID) {
			continue // stored, or taken in here
		}
		missing, err := s.check(m)
		switch {
		case err != nil:
			n.log.Info("private space: message refused", "via", "mesh", "space", m.Space, "id", m.ID, "from", m.From, "err", err)
			fail(k, fmt.Errorf("%v: %w", err, mesh.ErrDeclined))
			continue
		case len(missing) > 0:
			s.hold(m, missing)
			continue
		}
		if err := n.admitLimits(m); err != nil {
			if has, _ := n.store.Has(m.ID); !has {
				fail(k, n.refusal(m, "mesh", err))
			}
			continue
		}
		if member.IsControl(m) || m.Type == member.TypeKey {
			// On its own, after what came before it, and taken in before
			// what comes after: a change decides what the graph accepts
			// next, a key message opens the sealed messages after it (stored
			// in one batch with them, they could wake a follower before
			// the node had the key: found by review).
			flush()
			_, added, err := n.put(ctx, m, "mesh")
			if err != nil {
				fail(k, err)
				continue
			}
			if added {
				n.cfg.Metrics.MessageReceived(m.Space.String())
			}
			free(n.accepted(ctx, s, m))
			continue
		}
		if err := s.graph.Add(m); err != nil {
			fail(k, err)
			continue
		}
		run = append(run, k)
		free(s.release(m.ID)) // what waits for m is decided after it, in this batch
		if len(run) == maxPrivateRun {
			flush()
		}
	}
}

// maxPrivateRun bounds the messages ingestLocked stores in one batch.
const maxPrivateRun = 1024

// parentsFirst returns the indexes of ms in an order where each message
// comes after those of ms it names in its Prev, and otherwise in the order
// of ms. A sync exchange comes in sync order (time, then ID), where a child
// sent in the same millisecond as its parent may come first: decided in
// that order it would be held for its parent and stored on its own after.
func parentsFirst(ms []*protocol.Message) []int {
	at := make(map[protocol.ID]int, len(ms))
	for i, m := range ms {
		if _, dup := at[m.ID]; !dup {
			at[m.ID] = i
		}
	}
	const (
		unseen = iota
		open   // its parents are being placed
		placed
	)
	state := make([]uint8, len(ms))
	out := make([]int, 0, len(ms))
	var stack []int
	for i := range ms {
		if state[i] != unseen {
			continue
		}
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			j := stack[len(stack)-1]
			if state[j] == unseen {
				state[j] = open
				// Pushed in reverse, so that parents are placed in
				// the order they are named.
				for k := len(ms[j].Prev) - 1; k >= 0; k-- {
					if p, ok := at[ms[j].Prev[k]]; ok && state[p] == unseen {
						stack = append(stack, p)
					}
				}
				continue
			}
			stack = stack[:len(stack)-1]
			if state[j] == open {
				state[j] = placed
				out = append(out, j)
			}
		}
	}
	return out
}

// parentsFor returns the parents a message this node sends now names,
// given the store's heads: those the graph has, and for each one still
// being stored (ingestPrivate: stored, not yet in the graph) its own
// parents instead, which the graph had when it was accepted. A message
// naming a parent the graph lacks would be held until the graph has it,
// and a send must be stored before it is answered.
func (s *privSpace) parentsFor(heads []protocol.ID) []protocol.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := heads[:0:0]
	for _, h := range heads {
		prev, ok := s.storing[h]
		if !ok || s.graph.Has(h) {
			prev = []protocol.ID{h}
		}
		for _, p := range prev {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// errHas is decidePrivate's answer for a message already in the graph.
var errHas = errors.New("already held")

// errUnknownParents is the cause of decidePrivate's refusal of a
// presented message whose parents this node lacks.
var errUnknownParents = errors.New("parents unknown")

// decidePrivate checks m under s.mu: true accepts it (to be stored), an
// error refuses it (errHas: it is in the graph already), false and no
// error holds it for its parents.
func (n *Node) decidePrivate(s *privSpace, m *protocol.Message, via string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.graph.Has(m.ID) {
		return false, errHas
	}
	missing, err := s.check(m)
	if err != nil {
		if via == "api" || via == "accept" || via == "admit" {
			return false, privateError(m, err)
		}
		n.log.Info("private space: message refused", "via", via, "space", m.Space, "id", m.ID, "from", m.From, "err", err)
		return false, fmt.Errorf("%v: %w", err, mesh.ErrDeclined)
	}
	if len(missing) > 0 {
		switch via {
		case "admit":
			return false, &Error{Code: api.CodeNotMember, Msg: fmt.Sprintf("private space %s: the presented message's parents are unknown here", m.Space), Err: errUnknownParents}
		case "api":
			// Held, it would be answered before it is stored. Its parents
			// come from the store's heads (see parentsFor), so this is a
			// message whose parent the graph refused or lost.
			return false, errorf(api.CodeUnavailable, "private space %s: parents of the message are not taken in here (%s): send it again", m.Space, missing[0])
		}
		s.hold(m, missing)
		return false, nil
	}
	if early(m, via) {
		// In the graph before it is stored (forgotten if the store fails),
		// so that it is never a head of the store the graph lacks: a
		// send drafted meanwhile would name that head's parents instead
		// (parentsFor), leaving it a head, and with several agents sending
		// at once a private space's messages named 25 parents each where an
		// open space's name 4: three times the bytes to store, send, sync,
		// check and read.
		if err := s.graph.Add(m); err != nil {
			return false, err
		}
		return true, nil
	}
	s.storing[m.ID] = m.Prev
	return true, nil
}

// early reports whether ingestPrivate adds m to the graph when it accepts
// it, before it is stored: an ordinary message this node's agents send.
// No other message of the space can name it before it is stored (it is
// published after), and the graph can forget it again. A control or key
// message changes what is decided after it (and cannot be forgotten): it
// is added once stored (see storing).
func early(m *protocol.Message, via string) bool {
	return via == "api" && !member.IsControl(m) && m.Type != member.TypeKey
}

// release returns the messages held for id, which are no longer held (to
// be decided again: they may wait for another parent still). The caller
// holds s.mu.
func (s *privSpace) release(id protocol.ID) []*protocol.Message {
	children := s.pending[id]
	delete(s.pending, id)
	var out []*protocol.Message
	for _, c := range children {
		delete(s.held, c.ID)
		if !s.graph.Has(c.ID) {
			out = append(out, c)
		}
	}
	return out
}

// hold keeps m until missing (one of its parents) arrives. The caller
// holds s.mu.
func (s *privSpace) hold(m *protocol.Message, missing []protocol.ID) {
	if s.held[m.ID] || len(s.held) >= maxHeld {
		return
	}
	s.held[m.ID] = true
	s.pending[missing[0]] = append(s.pending[missing[0]], m)
}

// accepted records m, stored, in the graph, and acts on what it changes;
// it returns the messages held for m, to be decided again (they may wait
// for another parent still; see release). The caller holds s.mu.
func (n *Node) accepted(ctx context.Context, s *privSpace, m *protocol.Message) (ready []*protocol.Message) {
	if err := s.graph.Add(m); err != nil {
		n.log.Warn("private space: add", "id", m.ID, "err", err)
		return nil
	}
	n.learnKeys(s, m)
	ready = s.release(m.ID)
	if !member.IsControl(m) {
		return ready
	}
	var joiners []peer.ID
	// goes maps a peer to the leave or removal of it that m is.
	var goes map[peer.ID]*protocol.Message
	if m.Type == member.TypeMember {
		if c, p, err := member.ParseChange(m); err == nil {
			switch c.Op {
			case member.OpJoin:
				if s.sealed() {
					joiners = append(joiners, p)
				}
			case member.OpLeave, member.OpRemove:
				goes = map[peer.ID]*protocol.Message{p: m}
			}
		}
	}
	before := s.current.Load()
	st := s.graph.Current()
	s.current.Store(&st)
	if self := n.mesh.ID(); before.IsMember(self) && !st.IsMember(self) {
		s.gone.Store(true)
	}
	for _, p := range joiners {
		space := m.Space
		n.spawn(func() {
			ctx, cancel := context.WithTimeout(n.bg, admit.Timeout)
			defer cancel()
			n.shareWithJoiner(ctx, space, s, p)
		})
	}
	dropped := false
	for _, e := range before.Members() {
		if st.IsMember(e.Peer) || e.Peer == n.mesh.ID() {
			continue
		}
		dropped = true
		// It announced its subscription while a member: make it announce
		// again, to be filtered. If this node removed it, tell it so
		// (gossip no longer reaches it), so that its daemon stops posting.
		// (The change is looked up by its target.)
		change := goes[e.Peer]
		if change != nil && change.Sender() == e.Peer {
			// It left, and may be waiting for this node's answer to the
			// leave it presented (mesh/admit): cut it off once the answer
			// is out (it stops taking part itself).
			p := e.Peer
			n.spawn(func() {
				if n.pause(leaverGrace) {
					_ = n.mesh.DropPeer(p)
				}
			})
			continue
		}
		_ = n.mesh.DropPeer(e.Peer)
		if change != nil && change.Sender() == n.mesh.ID() {
			p, wire := e.Peer, change.Wire()
			n.spawn(func() { n.tellRemoved(p, wire) })
		}
	}
	if dropped && s.sealed() {
		// One who left (a leave carries no rekey) holds the current key.
		n.rotateLater(m.Space, s)
	}
	return ready
}

// CreatePrivate makes a members-only space called name, owned by this
// node, and joins it. A sealed one also encrypts its content end to end
// (sealed.go): its genesis says so and carries epoch 0's key, wrapped to
// this node.
func (n *Node) CreatePrivate(ctx context.Context, name string, sealed bool) (Space, error) {
	if err := CheckSpaceName(name); err != nil {
		return Space{}, err
	}
	nonce := make([]byte, member.MinNonce)
	if _, err := rand.Read(nonce); err != nil {
		return Space{}, err
	}
	id := member.SpaceID(n.mesh.ID(), nonce)
	gen := member.Genesis{Name: name, Nonce: nonce, Sealed: sealed}
	var err error
	if sealed {
		if gen.Keys, err = n.genesisKeys(id); err != nil {
			return Space{}, err
		}
	}
	content, err := json.Marshal(gen)
	if err != nil {
		return Space{}, err
	}
	g, err := protocol.Sign(n.key, protocol.Draft{Space: id, CreatedAt: time.Now(), Type: member.TypeGenesis, Content: content}, n.cfg.Limits)
	if err != nil {
		return Space{}, err
	}
	return n.joinPrivate(ctx, name, g)
}

// joinPrivate stores a private space's genesis and joins the space.
func (n *Node) joinPrivate(ctx context.Context, name string, g *protocol.Message) (Space, error) {
	s, err := newPrivSpace(name, g)
	if err != nil {
		return Space{}, wrap(api.CodeBadInvite, err)
	}
	if _, _, err := n.put(ctx, g, "api"); err != nil {
		return Space{}, err
	}
	sp, _, err := n.store.JoinSpace(store.Space{ID: g.Space, Name: name, JoinedAt: time.Now().UTC(), Private: &store.Private{Genesis: g.ID}})
	if err != nil {
		return Space{}, err
	}
	if n.private.get(sp.ID) == nil {
		n.learnKeys(s, g)
		n.private.set(s)
	}
	n.limits.set(sp.ID, sp.Limits)
	if err := n.mesh.JoinSpace(sp.ID, spaceSink{n}); err != nil {
		return Space{}, err
	}
	return n.describe(sp), nil
}

// privateSpace resolves ref to a joined private space.
func (n *Node) privateSpace(ref string) (Space, *privSpace, error) {
	sp, err := n.Space(ref)
	if err != nil {
		return Space{}, nil, err
	}
	s := n.private.get(sp.ID)
	if s == nil {
		return Space{}, nil, errorf(api.CodeBadRequest, "space %q is open, not private: it has no members or invites", ref)
	}
	return sp, s, nil
}

// InviteOptions are what an invite grants.
type InviteOptions struct {
	Peer    peer.ID       // bind to this peer; empty: any holder
	Role    member.Role   // default member
	Expires time.Duration // default DefaultInviteTTL
}

// Invite issues an invite token to a private space this node may invite
// to (as its owner or an admin).
func (n *Node) Invite(ref string, o InviteOptions) (member.Invite, string, error) {
	sp, s, err := n.privateSpace(ref)
	if err != nil {
		return member.Invite{}, "", err
	}
	if o.Role == "" {
		o.Role = member.Member
	}
	if _, err := member.ParseRole(string(o.Role)); err != nil {
		return member.Invite{}, "", wrap(api.CodeBadRequest, err)
	}
	if o.Expires == 0 {
		o.Expires = DefaultInviteTTL
	}
	if o.Expires < 0 {
		return member.Invite{}, "", errorf(api.CodeBadRequest, "expiry must be positive")
	}
	mine := s.current.Load().Role(n.mesh.ID())
	if mine.Power() < member.Admin.Power() || mine.Power() < o.Role.Power() {
		return member.Invite{}, "", errorf(api.CodeNotMember, "this node (role %q) may not invite to %s as %s", mine, sp.Name, o.Role)
	}
	heads, err := n.store.Heads(sp.ID)
	if err != nil {
		return member.Invite{}, "", err
	}
	if len(heads) > member.MaxInviteHeads {
		heads = heads[:member.MaxInviteHeads]
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return member.Invite{}, "", err
	}
	inv := member.Invite{Space: sp.ID, Role: o.Role, Expires: time.Now().Add(o.Expires).UnixMilli(), Nonce: nonce, Heads: heads, Genesis: s.graph.Genesis().Encode()}
	if o.Peer != "" {
		inv.Peer = o.Peer.String()
	}
	inv.Addrs = n.memberAddrs(sp.ID)
	if inv.Key, err = n.inviteKey(sp.ID, s, o.Peer); err != nil {
		return member.Invite{}, "", err
	}
	tok, err := member.Issue(n.key, inv)
	if err != nil {
		return member.Invite{}, "", err
	}
	inv, err = member.ParseInvite(tok)
	return inv, tok, err
}

// memberAddrs lists this node's addresses, then those of the space's
// members it is connected to: where a joiner can present its join while
// this node is offline.
func (n *Node) memberAddrs(space protocol.ID) []string {
	var out []string
	for _, a := range n.mesh.Addrs() {
		out = append(out, a.String())
	}
	for _, p := range n.mesh.Peers() {
		if !n.spaceAccess(space, p.ID) {
			continue
		}
		for _, a := range p.Addrs {
			if full, err := ma.NewMultiaddr(a.String() + "/p2p/" + p.ID.String()); err == nil {
				out = append(out, full.String())
			}
		}
	}
	if len(out) > maxInviteAddrs {
		out = out[:maxInviteAddrs]
	}
	return out
}

// JoinInvite joins a private space by an invite token: it checks the
// invite, presents a signed join to a member reachable at the invite's
// addresses (the issuer first), and only once one has accepted it stores
// the space and joins its topic, where sync brings the history. Nothing
// is stored for an invite that is refused.
func (n *Node) JoinInvite(ctx context.Context, token string) (Space, error) {
	inv, err := member.ParseInvite(token)
	if err != nil {
		return Space{}, wrap(api.CodeBadInvite, err)
	}
	self := n.mesh.ID()
	if err := inv.Admits(self, time.Now()); err != nil {
		return Space{}, wrap(api.CodeBadInvite, err)
	}
	g, err := inv.GenesisMessage()
	if err != nil {
		return Space{}, wrap(api.CodeBadInvite, err)
	}
	var gen member.Genesis
	_ = json.Unmarshal(g.Content, &gen)
	if s := n.private.get(inv.Space); s != nil && s.current.Load().IsMember(self) {
		sp, err := n.Space(inv.Space.String())
		return sp, err
	}
	content, err := json.Marshal(member.Change{Op: member.OpJoin, Peer: self.String(), Invite: token})
	if err != nil {
		return Space{}, err
	}
	join, err := protocol.Sign(n.key, protocol.Draft{Space: inv.Space, CreatedAt: time.Now(), Prev: inv.Heads, Type: member.TypeMember, Content: content}, n.cfg.Limits)
	if err != nil {
		return Space{}, err
	}
	// Present the join to the members the invite names, the issuer first.
	// A refusal may be the presentee's own (a member removed since the
	// invite was issued serves no one), so the next is tried; with none
	// taking it, the first refusal is the answer.
	var (
		tried   []string
		refusal error
	)
	presented, presenter := false, peer.ID("")
	for _, p := range n.inviteContacts(ctx, inv) {
		err := admit.Present(ctx, n.mesh.Host(), p, join.Wire())
		var ref *admit.Refused
		if errors.As(err, &ref) {
			code := ref.Code
			if code != api.CodeBadInvite && code != api.CodeNotMember {
				code = api.CodeNotMember
			}
			if refusal == nil {
				refusal = errorf(code, "join refused by %s: %s", p, ref.Msg)
			}
			continue
		}
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		presented, presenter = true, p
		break
	}
	if !presented && refusal != nil {
		return Space{}, refusal
	}
	if !presented {
		return Space{}, errorf(api.CodeConnectFailed, "no member of the space could be reached to present the join: %v", tried)
	}
	sp, err := n.joinPrivate(ctx, gen.Name, g)
	if err != nil {
		return Space{}, err
	}
	s := n.private.get(sp.ID)
	s.contacts.Store(inv.IssuerID(), true)
	s.contacts.Store(presenter, true)
	if _, _, err := n.ingestPrivate(ctx, s, join, "api"); err != nil {
		n.log.Warn("private space: own join", "space", sp.ID, "err", err)
	}
	// The join waits for the history it names: fetch it from the member
	// that took the join, so that this node is a member when it returns.
	wait, cancel := context.WithTimeout(ctx, joinSyncWait)
	defer cancel()
	for !s.has(join.ID) {
		if _, err := n.mesh.Sync(wait, presenter, sp.ID); err != nil {
			n.log.Debug("private space: sync after join", "space", sp.ID, "peer", presenter, "err", err)
		}
		if s.has(join.ID) {
			break
		}
		select {
		case <-wait.Done():
			return n.describe(sp.Space), nil // sync goes on in the background
		case <-time.After(200 * time.Millisecond):
		}
	}
	sp, err = n.Space(sp.ID.String())
	return sp, err
}

// joinSyncWait bounds how long JoinInvite waits for the space's history.
const joinSyncWait = 30 * time.Second

func (s *privSpace) has(id protocol.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.graph.Has(id)
}

// inviteContacts connects to the peers at an invite's addresses and
// returns those reached, the issuer first.
func (n *Node) inviteContacts(ctx context.Context, inv member.Invite) []peer.ID {
	seen := map[peer.ID]bool{}
	var out []peer.ID
	for _, a := range inv.Addrs {
		addr, err := ma.NewMultiaddr(a)
		if err != nil {
			continue
		}
		ai, err := peer.AddrInfoFromP2pAddr(addr)
		if err != nil || ai.ID == n.mesh.ID() || seen[ai.ID] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, connectWait)
		_, err = n.mesh.Connect(cctx, addr)
		cancel()
		if err != nil {
			continue
		}
		seen[ai.ID] = true
		out = append(out, ai.ID)
	}
	if iss := inv.IssuerID(); !seen[iss] && len(n.mesh.Host().Network().ConnsToPeer(iss)) > 0 {
		out = append(out, iss)
	}
	slices.SortStableFunc(out, func(a, b peer.ID) int {
		switch {
		case a == inv.IssuerID():
			return -1
		case b == inv.IssuerID():
			return 1
		}
		return 0
	})
	return out
}

// presentedJoin decides a join a peer presents (mesh/admit): a valid join
// of that peer, by a valid invite, in a private space this node is in.
// It is stored and published to the members. A leave of its sender, and
// the removal of this node by the member that made it, may be presented
// too.
func (n *Node) presentedJoin(ctx context.Context, from peer.ID, wire []byte) error {
	m, err := protocol.Validate(wire, time.Now(), n.cfg.Limits)
	if err != nil {
		return err
	}
	if m.Type != member.TypeMember {
		return errorf(api.CodeNotMember, "only a join of its sender may be presented")
	}
	c, target, err := member.ParseChange(m)
	if err != nil {
		return wrap(api.CodeNotMember, err)
	}
	s := n.private.get(m.Space)
	if s == nil {
		return errorf(api.CodeNotMember, "this node is not in space %s", m.Space)
	}
	if c.Op == member.OpRemove && target == n.mesh.ID() {
		// This node's own removal, from the member that removed it. If it
		// must wait for parents this node can no longer sync (no member
		// syncs with it now), this node still stops posting when the
		// remover outranks it in what it knows: a local view only, every
		// other node decides by the rules.
		if _, _, err := n.ingestPrivate(ctx, s, m, "mesh"); err != nil {
			return err
		}
		st := s.current.Load()
		if !s.has(m.ID) && st.Role(m.Sender()).Power() > st.Role(target).Power() && st.Role(m.Sender()).Power() >= member.Admin.Power() {
			s.removed.Store(true)
		}
		return nil
	}
	if c.Op == member.OpLeave {
		// A member leaving, who stops taking part once it has told one
		// member; the rules decide it as any change.
		if m.Sender() != from {
			return errorf(api.CodeNotMember, "only a leave of its sender may be presented")
		}
		_, added, err := n.ingestPrivate(ctx, s, m, "admit")
		if err != nil && n.removedHere(s, from) {
			// Removed here already: the leave changes nothing, and this
			// node syncs no parents from a non-member. Answered as taken,
			// so that the leaver stops presenting it and leaves.
			n.log.Debug("private space: a presented leave of a peer removed here", "peer", from, "id", m.ID, "err", err)
			return nil
		}
		if errors.Is(err, errUnknownParents) && s.current.Load().IsMember(from) && s.leaveSyncs.begin(from, time.Now()) {
			// The leaver holds what its leave names (it sent or took in
			// messages this node has not: gossip lost them, or this node
			// refused them then): fetch them from it, then decide again.
			// Otherwise the leave waits for a sync that may not come, and
			// the leaver stays in the space.
			_, serr := n.mesh.Sync(ctx, from, m.Space)
			s.leaveSyncs.end(from, time.Now())
			if serr != nil {
				n.log.Debug("private space: sync the parents of a presented leave", "peer", from, "err", serr)
			}
			_, added, err = n.ingestPrivate(ctx, s, m, "admit")
			added = added || (err == nil && s.has(m.ID)) // sync took it in: spread it
		}
		if err != nil || !added {
			return err // a leave held already is not spread again
		}
		if err := n.mesh.Publish(ctx, m); err != nil {
			n.log.Debug("publish presented leave", "id", m.ID, "err", err)
		}
		return nil
	}
	if c.Op != member.OpJoin {
		return errorf(api.CodeNotMember, "only a join or a leave of its sender, or the removal of this node, may be presented")
	}
	if s.out() || !s.current.Load().IsMember(n.mesh.ID()) {
		// Removed, or left (also while no member has its leave yet): its
		// copy of the space is not the members' any more.
		return errorf(api.CodeNotMember, "this node is no longer a member of space %s: present the join to another member", m.Space)
	}
	// The invite must also be live by this node's clock, not only by the
	// join's created_at, which its sender chose.
	inv, err := member.ParseInvite(c.Invite)
	if err != nil {
		return wrap(api.CodeBadInvite, err)
	}
	if m.Sender() != from {
		return errorf(api.CodeNotMember, "only a join of its sender may be presented")
	}
	if err := inv.Admits(from, time.Now()); err != nil {
		return wrap(api.CodeBadInvite, err)
	}
	if _, _, err := n.ingestPrivate(ctx, s, m, "admit"); err != nil {
		return err
	}
	if s.has(m.ID) && !s.current.Load().IsMember(from) {
		// Valid in its causal past, and stored as such, but it changes
		// nothing: the issuer lost its role to a change ordered before
		// the join (a removal of the same depth goes first). Tell the
		// joiner, which would otherwise take itself for a member.
		return errorf(api.CodeNotMember, "the join leaves %s a non-member in this node's state (the invite's issuer %s lost its role to a change ordered before the join, or %s was removed since)", from, inv.IssuerID(), from)
	}
	if err := n.mesh.Publish(ctx, m); err != nil {
		n.log.Debug("publish presented join", "id", m.ID, "err", err)
	}
	return nil
}

// leaveSyncEvery is the least time between two syncs a member's presented
// leaves make this node start with that member.
const leaveSyncEvery = 10 * time.Second

// leaveSyncs bounds the syncs of a leave's parents (presentedJoin) that
// this node starts, the initiator, which the answering side's limit per
// peer (mesh/reconcile) does not cover: a member presenting leaves that
// name parents that do not exist would otherwise make it sync on demand.
// One at a time per peer, and one per leaveSyncEvery; beyond, the leave is
// refused (parents unknown) and its sender presents it again later.
type leaveSyncs struct {
	mu  sync.Mutex
	per map[peer.ID]leaveSync
}

type leaveSync struct {
	busy bool
	last time.Time // when the last one started or ended
}

// maxLeaveSyncPeers bounds the peers leaveSyncs remembers.
const maxLeaveSyncPeers = 1024

// begin reports whether a leave of p may make this node sync with p now,
// and if so records it as running.
func (l *leaveSyncs) begin(p peer.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.per[p]; ok && (e.busy || now.Sub(e.last) < leaveSyncEvery) {
		return false
	}
	if l.per == nil {
		l.per = make(map[peer.ID]leaveSync)
	}
	if len(l.per) >= maxLeaveSyncPeers {
		for q, e := range l.per {
			if !e.busy && now.Sub(e.last) >= leaveSyncEvery {
				delete(l.per, q)
			}
		}
		if len(l.per) >= maxLeaveSyncPeers {
			return false
		}
	}
	l.per[p] = leaveSync{busy: true, last: now}
	return true
}

// end records the end of p's sync begun by begin.
func (l *leaveSyncs) end(p peer.ID, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.per[p] = leaveSync{last: now}
}

// removedHere reports whether p is no member of s in this node's state
// because a removal of p is the change in force against it.
func (n *Node) removedHere(s *privSpace, p peer.ID) bool {
	if s.current.Load().IsMember(p) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.graph.LastChange(p)
	if last == nil {
		return false
	}
	c, _, err := member.ParseChange(last)
	return err == nil && c.Op == member.OpRemove
}

// ErrorCode lets mesh/admit send an *Error's code.
func (e *Error) ErrorCode() string { return e.Code }

// Member is a member of a private space.
type Member = member.Entry

// Members lists a private space's members as this node knows them.
func (n *Node) Members(ref string) (Space, []Member, error) {
	sp, s, err := n.privateSpace(ref)
	if err != nil {
		return Space{}, nil, err
	}
	ms := s.current.Load().Members()
	if s.removed.Load() {
		ms = slices.DeleteFunc(ms, func(e Member) bool { return e.Peer == n.mesh.ID() })
	}
	return sp, ms, nil
}

// Remove removes a member of a private space (this node must be an admin
// or its owner, and outrank it): its messages after the removal are
// refused by every node.
func (n *Node) Remove(ctx context.Context, ref string, p peer.ID) (Message, error) {
	return n.change(ctx, ref, member.Change{Op: member.OpRemove, Peer: p.String()})
}

// SetRole gives a member of a private space another role.
func (n *Node) SetRole(ctx context.Context, ref string, p peer.ID, r member.Role) (Message, error) {
	return n.change(ctx, ref, member.Change{Op: member.OpRole, Peer: p.String(), Role: r})
}

func (n *Node) change(ctx context.Context, ref string, c member.Change) (Message, error) {
	sp, s, err := n.privateSpace(ref)
	if err != nil {
		return Message{}, err
	}
	p, _ := peer.Decode(c.Peer)
	if c.Op == member.OpRemove && !s.current.Load().IsMember(p) {
		return Message{}, errorf(api.CodeNotFound, "%s is not a member of %s", c.Peer, sp.Name)
	}
	if c.Op == member.OpRemove && s.sealed() {
		// The removal carries the next epoch's key for everyone else: what
		// is sent after it is sealed in an epoch the removed peer never gets.
		if c.Keys, err = n.rekey(sp.ID, s, *s.current.Load(), p); err != nil {
			return Message{}, err
		}
	}
	content, err := json.Marshal(c)
	if err != nil {
		return Message{}, err
	}
	return n.Send(ctx, sp.ID, Post{Type: member.TypeMember, Content: content})
}

// privateByName finds a joined private space by its name (open spaces are
// found by the hash of theirs); of two with one name, the lower ID. It
// takes the private spaces from memory (every one joined has its graph
// there) and their records from the store's cache, since it runs
// on every request that names a private space: scanning every space's
// record took 7 % of a daemon's CPU when agents sent by name.
func (n *Node) privateByName(name string) (store.Space, error) {
	var (
		found store.Space
		ok    bool
	)
	for _, ps := range n.private.all() {
		sp, err := n.store.Space(ps.graph.Space())
		if errors.Is(err, store.ErrNotFound) {
			continue // left
		}
		if err != nil {
			return store.Space{}, err
		}
		if sp.Private != nil && sp.Name == name && (!ok || slices.Compare(sp.ID[:], found.ID[:]) < 0) {
			found, ok = sp, true
		}
	}
	if !ok {
		return store.Space{}, store.ErrNotFound
	}
	return found, nil
}

// leavePrivate announces that this node leaves private space sp, before
// it leaves locally: a signed leave (PRIVATE.md), published and presented
// to each member connected, so that it reaches them although this node
// stops taking part at once. A sealed space's admins then rotate its key
// (rotateIfExposed). It does nothing for an open space, for the owner
// (who cannot leave: the space stays its own; it leaves only locally), or
// for a node no longer a member. It fails, announcing nothing, when no
// other member is connected to hear it: leaving then would leave the
// others counting this node a member.
func (n *Node) leavePrivate(ctx context.Context, sp Space) error {
	s := n.private.get(sp.ID)
	if s == nil {
		return nil
	}
	self := n.mesh.ID()
	st := s.current.Load()
	wire := s.leave.Load() // a leave signed by an attempt no member confirmed
	if wire != nil && n.leaveOverruled(s, st, *wire) {
		// This node was removed meanwhile: its leave is not what made it
		// a non-member. Members refuse it (its sender is no member) and do
		// not sync with a non-member, so it would be presented for ever.
		s.leave.Store(nil)
		n.log.Info("private space: this node was removed while its leave was not confirmed; leaving locally", "space", sp.ID)
		return nil
	}
	if wire == nil && (!st.IsMember(self) || st.Role(self) == member.Owner || s.removed.Load()) {
		return nil
	}
	reach := n.connectedMembers(st)
	if len(reach) == 0 {
		// A member that took in the leave some other way (sync) has closed
		// this node's connections: dial the members it knows the
		// addresses of.
		n.dialMembers(ctx, st)
		reach = n.connectedMembers(st)
	}
	if len(reach) == 0 {
		return errorf(api.CodeUnreachable, "no other member of %s is connected or could be dialled to hear this node leave: connect to one (weft connect), then leave", sp.Name)
	}
	if wire == nil {
		m, err := n.change(ctx, sp.ID.String(), member.Change{Op: member.OpLeave, Peer: self.String()})
		if err != nil {
			return err
		}
		w := m.Wire()
		wire = &w
		s.leave.Store(wire)
	}
	ctx, cancel := context.WithTimeout(ctx, admit.Timeout)
	defer cancel()
	var (
		wg    sync.WaitGroup
		heard atomic.Int32
	)
	for _, p := range reach {
		wg.Go(func() {
			if err := admit.Present(ctx, n.mesh.Host(), p, *wire); err != nil {
				n.log.Debug("private space: present the leave", "peer", p, "err", err)
				return
			}
			heard.Add(1)
		})
	}
	wg.Wait()
	if heard.Load() == 0 {
		// A member lacking one of the leave's parents refuses it until
		// sync brings them, and sync needs this node in the space.
		n.finishLeaveLater(s)
		return errorf(api.CodeUnreachable, "no member of %s confirmed this node's leave (%d tried): the leave is signed and the node stays in the space until one does, presenting it again in the background (weft leave again tries at once)", sp.Name, len(reach))
	}
	s.leave.Store(nil)
	return nil
}

// leaveOverruled reports whether wire, this node's pending leave of s, is
// not the change in force against it: the node was told of its removal,
// or its graph applies a removal (or any change but wire) to it last.
func (n *Node) leaveOverruled(s *privSpace, st *member.State, wire []byte) bool {
	if s.removed.Load() {
		return true
	}
	self := n.mesh.ID()
	if st.IsMember(self) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lo := s.graph.LeaveOf(self)
	return lo == nil || !bytes.Equal(lo.Wire(), wire)
}

// A leave no member confirmed is presented again in the background (see
// finishLeaveLater) after leaveRetryFirst, then after twice the last wait,
// up to leaveRetryMax.
const (
	leaveRetryFirst = 2 * time.Second
	leaveRetryMax   = time.Minute
)

// finishLeaveLater leaves private space s, whose leave no member has
// confirmed, once one does: it presents the same signed leave again
// (Leave, as weft leave does), waiting longer each time, until a member
// takes it, the leave is confirmed or the space left otherwise (weft leave
// again), or the node stops. One loop per space (s.finishing).
func (n *Node) finishLeaveLater(s *privSpace) {
	if !s.finishing.CompareAndSwap(false, true) {
		return
	}
	space := s.graph.Space() // set once, at NewGraph
	started := n.spawn(func() {
		defer s.finishing.Store(false)
		wait := leaveRetryFirst
		for {
			if !n.pause(wait) {
				return
			}
			if s.leave.Load() == nil {
				return // confirmed by a leave run meanwhile
			}
			ctx, cancel := context.WithTimeout(n.bg, admit.Timeout+leaveDialWait)
			err := n.Leave(ctx, space.String())
			cancel()
			var e *Error
			switch {
			case err == nil:
				n.log.Info("private space: a member took this node's leave; left", "space", space)
				return
			case errors.As(err, &e) && e.Code == api.CodeUnknownSpace, n.bg.Err() != nil:
				return
			}
			n.log.Debug("private space: the leave is still not confirmed", "space", space, "err", err, "next", wait)
			wait = min(2*wait, leaveRetryMax)
		}
	})
	if !started {
		s.finishing.Store(false)
	}
}

// connectedMembers returns the members of st this node is connected to,
// itself left out.
func (n *Node) connectedMembers(st *member.State) []peer.ID {
	var out []peer.ID
	for _, e := range st.Members() {
		if e.Peer != n.mesh.ID() && n.mesh.Host().Network().Connectedness(e.Peer) == network.Connected {
			out = append(out, e.Peer)
		}
	}
	return out
}

// maxLeaveDials bounds the members leavePrivate dials, and how many at
// once; leaveDialWait bounds each dial.
const (
	maxLeaveDials = 16
	leaveDialWait = 5 * time.Second
)

// dialMembers dials members of st (at most maxLeaveDials) at the addresses
// this node knows of them.
func (n *Node) dialMembers(ctx context.Context, st *member.State) {
	var wg sync.WaitGroup
	dialled := 0
	for _, e := range st.Members() {
		if e.Peer == n.mesh.ID() || len(n.mesh.Host().Peerstore().Addrs(e.Peer)) == 0 {
			continue
		}
		if dialled++; dialled > maxLeaveDials {
			break
		}
		p := e.Peer
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, leaveDialWait)
			defer cancel()
			if err := n.mesh.Host().Connect(cctx, peer.AddrInfo{ID: p}); err != nil {
				n.log.Debug("private space: dial a member to hear a leave", "peer", p, "err", err)
			}
		})
	}
	wg.Wait()
}

// tellRemovedTries bounds the attempts to tell a removed member of its
// removal; they wait 0.5, 1, 2… s between them.
const tellRemovedTries = 5

// tellRemoved presents this node's removal of p (wire) to p, so that its
// daemon stops posting: gossip no longer reaches it and members refuse its
// sync. The dial races p's own redial of this node, which has just dropped
// it (a TCP simultaneous open fails both), so a failed attempt is tried
// again, a few times; a refusal is final.
func (n *Node) tellRemoved(p peer.ID, wire []byte) {
	wait := 500 * time.Millisecond
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(n.bg, admit.Timeout)
		err := admit.Present(ctx, n.mesh.Host(), p, wire)
		cancel()
		var refused *admit.Refused
		if err == nil || errors.As(err, &refused) || try == tellRemovedTries {
			if err != nil {
				n.log.Debug("private space: tell a removed member", "peer", p, "tries", try, "err", err)
			}
			return
		}
		if !n.pause(wait) {
			return
		}
		wait *= 2
	}
}
