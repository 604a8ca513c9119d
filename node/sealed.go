package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/admit"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// Sealed spaces (protocol/member, PRIVATE.md "Sealed spaces"): a private
// space whose messages' content is encrypted end to end. This node seals
// what its agents send (sealDraft) and opens what it hands them
// (openMessage, applied to every message read after decodeStored). Its
// store holds the wire bytes as received: ciphertext. The epoch keys it
// holds are derived from the space's control messages in its store with
// its identity key (learnKeys, called for each message the space's graph
// takes in), and held in memory only.

// keyring is what a node knows of a sealed space's epoch keys: its own,
// and which peers were given which epoch (to share only what is missing).
type keyring struct {
	mu     sync.RWMutex
	keys   map[uint64][]member.Key // concurrent rekeys may make two keys of one epoch
	shared map[uint64]map[peer.ID]bool
	top    uint64 // highest epoch seen in any share
	any    bool   // whether top is set
}

func (k *keyring) add(epoch uint64, key member.Key) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.Contains(k.keys[epoch], key) {
		return false
	}
	if k.keys == nil {
		k.keys = map[uint64][]member.Key{}
	}
	k.keys[epoch] = append(k.keys[epoch], key)
	return true
}

func (k *keyring) note(ks member.KeyShares) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.shared == nil {
		k.shared = map[uint64]map[peer.ID]bool{}
	}
	if k.shared[ks.Epoch] == nil {
		k.shared[ks.Epoch] = map[peer.ID]bool{}
	}
	for _, s := range ks.Shares {
		if p, err := peer.Decode(s.Peer); err == nil {
			k.shared[ks.Epoch][p] = true
		}
	}
	if !k.any || ks.Epoch > k.top {
		k.top, k.any = ks.Epoch, true
	}
}

// get returns the keys of an epoch.
func (k *keyring) get(epoch uint64) []member.Key {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys[epoch]
}

// current returns the highest epoch this node holds a key of, and that
// key (the first one learnt, if a concurrent rekey made two).
func (k *keyring) current() (uint64, member.Key, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var best uint64
	found := false
	for e := range k.keys {
		if !found || e > best {
			best, found = e, true
		}
	}
	if !found {
		return 0, member.Key{}, false
	}
	return best, k.keys[best][0], true
}

// next returns the epoch a rekey makes: above every epoch seen.
func (k *keyring) next() uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := k.top + 1
	for e := range k.keys {
		n = max(n, e+1)
	}
	return n
}

// missing returns the epochs this node holds whose key p was not given.
func (k *keyring) missing(p peer.ID) []uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []uint64
	for e := range k.keys {
		if !k.shared[e][p] {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// sealed reports whether s encrypts its content.
func (s *privSpace) sealed() bool { return s != nil && s.genesis.Sealed }

// learnKeys takes in the keys m, a message of sealed space s the graph
// has taken in, carries: epoch keys wrapped to this node, in the genesis,
// a removal's rekey or a key message; the key of the invite this node
// joined by. It notes who was given which epoch.
func (n *Node) learnKeys(s *privSpace, m *protocol.Message) {
	if !s.sealed() || (m.Type != member.TypeGenesis && m.Type != member.TypeMember && m.Type != member.TypeKey) {
		return // an ordinary message carries no key
	}
	self, err := peer.IDFromPrivateKey(n.key) // also before the mesh starts (loadPrivate)
	if err != nil {
		return
	}
	var shares []member.KeyShares
	switch m.Type {
	case member.TypeGenesis:
		if g, err := member.ParseGenesis(m); err == nil && g.Keys != nil {
			shares = append(shares, *g.Keys)
		}
	case member.TypeMember:
		c, _, err := member.ParseChange(m)
		if err != nil {
			return
		}
		if c.Keys != nil && c.Op == member.OpRemove { // ParseChange allows no other
			shares = append(shares, *c.Keys)
		}
		if c.Op == member.OpJoin {
			// The joiner was given the invite's key.
			if inv, err := member.ParseInvite(c.Invite); err == nil && inv.Key != nil {
				s.keys.note(member.KeyShares{Epoch: inv.Key.Epoch, Shares: []member.Share{{Peer: m.From}}})
				if m.Sender() == self {
					if k, err := inv.Key.Open(n.key, self, m.Space); err == nil {
						s.keys.add(inv.Key.Epoch, k)
					} else {
						n.log.Warn("sealed space: the invite's key does not open", "space", m.Space, "err", err)
					}
				}
			}
		}
	case member.TypeKey:
		km, err := member.ParseKeyMessage(m)
		if err != nil {
			return
		}
		shares = km.Keys
	default:
		return
	}
	for _, ks := range shares {
		s.keys.note(ks)
	}
	for e, k := range member.Mine(n.key, self, m.Space, shares) {
		if s.keys.add(e, k) {
			n.log.Debug("sealed space: epoch key", "space", m.Space, "epoch", e, "from", m.From)
		}
	}
}

// sealDraft encrypts a draft's content and meta for a sealed space, in
// the newest epoch this node holds a key of. Control and key messages
// stay clear (every node needs them to authorize); so do the headers.
func (n *Node) sealDraft(d *protocol.Draft) error {
	s := n.private.get(d.Space)
	if !s.sealed() || d.Type == member.TypeGenesis || d.Type == member.TypeMember || d.Type == member.TypeKey {
		return nil
	}
	epoch, key, ok := s.keys.current()
	if !ok {
		return errorf(api.CodeNotMember, "sealed space %s: this node holds no key yet (an admin shares it when it sees this node's join)", d.Space)
	}
	content, err := member.Seal(key, epoch, member.Headers{Space: d.Space, From: n.mesh.ID().String(), CreatedAt: d.CreatedAt.UnixMilli(), Type: d.Type}, d.Content, d.Meta)
	if err != nil {
		return err
	}
	d.Content, d.Meta = content, nil
	return nil
}

// SealedMarker is the content a sealed message shows when this node
// cannot open it: {"sealed": "no key for epoch N"} (or why else).
type SealedMarker struct {
	Sealed string `json:"sealed"`
}

// openMessage returns m as this node's agents see it: a sealed space's
// message with its content and meta decrypted, or, if this node lacks
// its epoch's key, a SealedMarker content (never the ciphertext shown as
// content). m itself is not changed; the copy keeps m's signed body.
func (n *Node) openMessage(m Message) Message {
	if m.Message == nil {
		return m
	}
	s := n.private.get(m.Space)
	if !s.sealed() || member.IsControl(m.Message) || m.Type == member.TypeKey {
		return m
	}
	cp := *m.Message
	env, ok := member.ParseEnvelope(m.Content)
	if !ok {
		cp.Content = markerContent("not a sealed envelope")
		return Message{Message: &cp, Cursor: m.Cursor}
	}
	content, meta, err := member.Open(env, member.HeadersOf(m.Message), s.keys.get(env.Epoch))
	if err != nil {
		if len(s.keys.get(env.Epoch)) == 0 {
			cp.Content = markerContent(fmt.Sprintf("no key for epoch %d", env.Epoch))
		} else {
			cp.Content = markerContent(fmt.Sprintf("does not open with the keys of epoch %d", env.Epoch))
		}
		return Message{Message: &cp, Cursor: m.Cursor}
	}
	cp.Content, cp.Meta = content, meta
	return Message{Message: &cp, Cursor: m.Cursor}
}

func markerContent(why string) json.RawMessage {
	b, _ := json.Marshal(SealedMarker{Sealed: why})
	return b
}

// openAll opens each of ms (see openMessage).
func (n *Node) openAll(ms []Message) []Message {
	for i, m := range ms {
		ms[i] = n.openMessage(m)
	}
	return ms
}

// genesisKeys makes a sealed space's epoch 0 key, wrapped to its owner.
func (n *Node) genesisKeys(space protocol.ID) (*member.KeyShares, error) {
	k, err := member.NewKey()
	if err != nil {
		return nil, err
	}
	ks, err := member.WrapAll([]peer.ID{n.mesh.ID()}, space, 0, k)
	return &ks, err
}

// rekey makes the next epoch's key of s, wrapped to every member of st
// but the one removed (and those that can be given no key: logged): a
// removal carries it.
func (n *Node) rekey(sp protocol.ID, s *privSpace, st member.State, removed peer.ID) (*member.KeyShares, error) {
	k, err := member.NewKey()
	if err != nil {
		return nil, err
	}
	ks := member.KeyShares{Epoch: s.keys.next()}
	for _, e := range st.Members() {
		if e.Peer == removed {
			continue
		}
		sh, err := member.Wrap(e.Peer, sp, ks.Epoch, k)
		if err != nil {
			if e.Peer == n.mesh.ID() {
				return nil, err
			}
			// A member whose peer ID holds no Ed25519 key (an admin may
			// add any peer ID) can be given no key: it reads nothing
			// sealed, and must not stop every rotation for the others.
			n.log.Warn("sealed space: a member can be given no key", "space", sp, "peer", e.Peer, "err", err)
			continue
		}
		ks.Shares = append(ks.Shares, sh)
	}
	return &ks, nil
}

// inviteKey is what an invite to sealed space s carries: the current
// epoch's key, wrapped to the bound peer or, unbound, in the clear (the
// token is then a bearer secret).
func (n *Node) inviteKey(space protocol.ID, s *privSpace, bound peer.ID) (*member.InviteKey, error) {
	if !s.sealed() {
		return nil, nil
	}
	epoch, key, ok := s.keys.current()
	if !ok {
		return nil, errorf(api.CodeNotMember, "sealed space %s: this node holds no key to give", space)
	}
	if bound == "" {
		return &member.InviteKey{Epoch: epoch, Key: key[:]}, nil
	}
	sh, err := member.Wrap(bound, space, epoch, key)
	if err != nil {
		return nil, wrap(api.CodeBadRequest, err)
	}
	return &member.InviteKey{Epoch: epoch, Share: &sh}, nil
}

// shareWithJoiner posts the epoch keys this node holds to p, who joined
// sealed space s and was not given them, if this node may (an admin or
// the owner). Duplicates from several admins are harmless. Not called
// under s.mu (Send takes it).
func (n *Node) shareWithJoiner(ctx context.Context, space protocol.ID, s *privSpace, p peer.ID) {
	self := n.mesh.ID()
	st := s.current.Load()
	if p == self || !st.IsMember(p) || st.Role(self).Power() < member.Admin.Power() {
		return
	}
	epochs := s.keys.missing(p)
	if len(epochs) == 0 {
		return
	}
	var km member.KeyMessage
	for _, e := range epochs {
		for _, k := range s.keys.get(e) {
			ks, err := member.WrapAll([]peer.ID{p}, space, e, k)
			if err != nil {
				n.log.Warn("sealed space: wrap a key for a joiner", "peer", p, "err", err)
				return
			}
			km.Keys = append(km.Keys, ks)
		}
	}
	content, err := json.Marshal(km)
	if err != nil {
		return
	}
	if _, err := n.Send(ctx, space, Post{Type: member.TypeKey, Content: content}); err != nil {
		n.log.Warn("sealed space: share keys with a joiner", "space", space, "peer", p, "err", err)
		return
	}
	n.log.Debug("sealed space: keys shared with a joiner", "space", space, "peer", p, "epochs", epochs)
}

// rotateStagger is how long each admin after the first waits, in rank
// order, before it rotates a sealed space's key for a member who left:
// the owner (or the first admin online) usually does it alone, and the
// others find it done (duplicates would be harmless, only wasteful).
const rotateStagger = 3 * time.Second

// newest returns the highest epoch seen in any share.
func (k *keyring) newest() uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.top
}

// givenTo returns the peers the key of epoch was given to.
func (k *keyring) givenTo(epoch uint64) []peer.ID {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]peer.ID, 0, len(k.shared[epoch]))
	for p := range k.shared[epoch] {
		out = append(out, p)
	}
	return out
}

// exposed returns a peer that holds the newest epoch key of sealed space
// s, the one its members send in (or a newer one this node has seen
// given but lacks), but is no longer a member of st: it left (a leave
// carries no rekey), or a removal was made without one. "" if there is
// none.
func (s *privSpace) exposed(st *member.State) peer.ID {
	epoch, _, ok := s.keys.current()
	if !ok {
		return ""
	}
	for _, e := range []uint64{epoch, s.keys.newest()} {
		for _, p := range s.keys.givenTo(e) {
			if !st.IsMember(p) {
				return p
			}
		}
	}
	return ""
}

// rotateRank is this node's place among the peers that may rotate s's
// key (owner, then admins by peer ID), or -1 if it may not.
func rotateRank(st *member.State, self peer.ID) int {
	rank := 0
	for _, e := range st.Members() { // the owner first, then admins by peer ID
		if e.Role.Power() < member.Admin.Power() {
			break
		}
		if e.Peer == self {
			return rank
		}
		rank++
	}
	return -1
}

// rotateIfExposed gives sealed space s a new epoch key when someone who
// is no longer a member holds the current one (see exposed), if this node
// may (an admin or the owner): a key message wraps the next epoch to
// every member, and from then on members send in it. The admins wait
// their turn (rotateStagger) and look again first, so one of them usually
// does it. It runs on its own goroutine (Send takes s.mu). It returns an
// error only for an attempt that failed (rotateLater tries again), nil
// when it rotated or had nothing to do.
func (n *Node) rotateIfExposed(ctx context.Context, space protocol.ID, s *privSpace) error {
	self := n.mesh.ID()
	st := s.current.Load()
	rank := rotateRank(st, self)
	if !s.sealed() || rank < 0 || s.exposed(st) == "" {
		return nil
	}
	if wait := rotateWait(rank); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return n.rotateNow(ctx, space, s)
}

// rotateNow is rotateIfExposed once this node's turn has come.
func (n *Node) rotateNow(ctx context.Context, space protocol.ID, s *privSpace) error {
	// One rotation at a time: one that waited here finds the epoch the
	// last one made, and nothing left to do.
	s.rotating.Lock()
	defer s.rotating.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	st := s.current.Load()
	gone := s.exposed(st)
	if gone == "" || rotateRank(st, n.mesh.ID()) < 0 || !n.joined(space) {
		return nil // rotated meanwhile, this node is no admin now, or it left
	}
	ks, err := n.rekey(space, s, *st, "")
	if err != nil {
		n.log.Warn("sealed space: rotate the key", "space", space, "err", err)
		return err
	}
	content, err := json.Marshal(member.KeyMessage{Keys: []member.KeyShares{*ks}})
	if err != nil {
		return err
	}
	// Send takes the key message in (learnKeys) before it returns.
	if _, err := n.Send(ctx, space, Post{Type: member.TypeKey, Content: content}); err != nil {
		n.log.Warn("sealed space: rotate the key", "space", space, "former_member", gone, "err", err)
		return err
	}
	n.log.Info("sealed space: key rotated", "space", space, "epoch", ks.Epoch, "former_member", gone)
	return nil
}

// maxRotateTurns bounds the turns an admin waits (rotateStagger each):
// past it, the admins of higher rank look together.
const maxRotateTurns = 8

// rotateWait is how long the admin of rank waits before it rotates.
func rotateWait(rank int) time.Duration {
	return time.Duration(min(rank, maxRotateTurns)) * rotateStagger
}

// A rotation that failed (no key made, a store error, the space's quota,
// its time ran out) is tried again after rotateRetryFirst, then after
// twice the last wait, up to rotateRetryMax, until it succeeds, the key is
// no longer exposed, this node may no longer rotate, or the node stops:
// without it a lone owner's space would stay readable by whoever left
// until the next change of membership or restart.
const (
	rotateRetryFirst = time.Second
	rotateRetryMax   = 30 * time.Second
)

// rotateLater runs rotateIfExposed for space s on the node's wait group,
// bounded in time, and tries again while it fails (retryRotation).
func (n *Node) rotateLater(space protocol.ID, s *privSpace) {
	n.spawn(func() {
		ctx, cancel := context.WithTimeout(n.bg, admit.Timeout+rotateWait(maxRotateTurns))
		err := n.rotateIfExposed(ctx, space, s)
		cancel()
		if err != nil && n.bg.Err() == nil {
			n.retryRotation(space, s)
		}
	})
}

// mayRotate reports whether sealed space s's key is exposed and this node
// may rotate it.
func (n *Node) mayRotate(s *privSpace) bool {
	st := s.current.Load()
	return s.sealed() && rotateRank(st, n.mesh.ID()) >= 0 && s.exposed(st) != "" && n.joined(s.graph.Space())
}

// joined reports whether this node is still in space (weft leave leaves a
// private space locally: n.private keeps it, the store does not).
func (n *Node) joined(space protocol.ID) bool {
	_, err := n.store.Space(space)
	return !errors.Is(err, store.ErrNotFound)
}

// retryRotation tries a failed rotation of s again (see rotateRetryFirst).
// One space has one such loop at a time (s.retrying): a rotation that
// fails while one runs leaves the trying to it, and a loop that ends
// looks once more, for one that failed as it ended.
func (n *Node) retryRotation(space protocol.ID, s *privSpace) {
	for s.retrying.CompareAndSwap(false, true) {
		n.retryRotationLoop(space, s)
		s.retrying.Store(false)
		if n.bg.Err() != nil || !n.mayRotate(s) {
			return
		}
	}
}

func (n *Node) retryRotationLoop(space protocol.ID, s *privSpace) {
	wait := rotateRetryFirst
	for try := 1; ; try++ {
		n.log.Info("sealed space: key rotation failed; trying again", "space", space, "in", wait, "tries", try)
		if !n.pause(wait) {
			return
		}
		if !n.mayRotate(s) {
			return
		}
		ctx, cancel := context.WithTimeout(n.bg, admit.Timeout)
		err := n.rotateNow(ctx, space, s)
		cancel()
		if err == nil || n.bg.Err() != nil {
			return
		}
		wait = min(2*wait, rotateRetryMax)
	}
}
