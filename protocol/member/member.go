// Package member is the wire contract of private spaces: their genesis,
// the control messages that change membership and roles, invite tokens,
// and the auth rule every node applies, alone, to every message of a
// private space. Everything here is a pure, deterministic function of the
// messages given to it, so that all nodes that hold the same messages
// accept the same ones whatever order they arrived in. PRIVATE.md beside
// this file states the rules in full.
//
// # Space ID
//
// A private space's ID is SHA-256 of "weft/private/v1\x00", the owner's
// peer ID, a zero byte and a 16..64-byte random nonce. The genesis message
// (type "weft.space.genesis", no prev) carries the nonce, is signed by
// the owner and names that ID as its space: no one else can make a valid
// genesis for it, and it cannot collide with an open space's ID (another
// hash domain).
//
// # Control messages
//
// Type "weft.space.member", content {"op": OP, "peer": PEER, "role":
// ROLE, "invite": TOKEN}: op "join" (peer is the sender, invite is
// required), "add", "role", "remove" and "leave" (peer is the sender).
//
// # Auth
//
// A message is accepted iff it is valid in the membership state of its
// causal past (the control messages among its prev closure, applied in
// a deterministic order: see Resolve). Ordinary messages need a member
// (any role) as sender.
//
// # Sealed spaces
//
// A genesis with "sealed" makes a space whose ordinary messages' content
// and meta are an envelope (sealed.go) under an epoch key; keys reach
// members wrapped to their identity keys in the genesis, removals and
// key messages (type "weft.space.key", admins only), and in invites.
package member

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Message types of private spaces' control messages.
const (
	TypeGenesis = "weft.space.genesis"
	TypeMember  = "weft.space.member"
)

// Operations of a TypeMember message.
const (
	OpJoin   = "join"
	OpAdd    = "add"
	OpRole   = "role"
	OpRemove = "remove"
	OpLeave  = "leave"
)

// Role is a member's role.
type Role string

// Roles, from the most to the least powerful.
const (
	Owner  Role = "owner"
	Admin  Role = "admin"
	Member Role = "member"
)

// Power orders roles; zero is not a member.
func (r Role) Power() int {
	switch r {
	case Owner:
		return 100
	case Admin:
		return 50
	case Member:
		return 10
	}
	return 0
}

// ParseRole reads a role an invite or a change may grant (not owner).
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case Admin, Member:
		return Role(s), nil
	case "":
		return Member, nil
	}
	return "", fmt.Errorf("%w: role %q: want member or admin", ErrUnauthorized, s)
}

// Errors every refusal wraps one of.
var (
	// ErrMalformed: a genesis or control message of the wrong shape.
	ErrMalformed = errors.New("malformed private-space message")
	// ErrUnauthorized: valid, but its sender lacks the membership or role
	// in the state of its causal past.
	ErrUnauthorized = errors.New("not authorized in the space")
	// ErrBadInvite: a forged, tampered, expired or misbound invite.
	ErrBadInvite = errors.New("bad invite")
)

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// idDomain separates private space IDs from every other hash.
const idDomain = "weft/private/v1\x00"

// Nonce sizes of a genesis.
const (
	MinNonce = 16
	MaxNonce = 64
)

// SpaceID returns the ID of the private space owner creates with nonce.
func SpaceID(owner peer.ID, nonce []byte) protocol.ID {
	h := sha256.New()
	h.Write([]byte(idDomain))
	h.Write([]byte(owner))
	h.Write([]byte{0})
	h.Write(nonce)
	var id protocol.ID
	h.Sum(id[:0])
	return id
}

// Genesis is the content of a genesis message.
type Genesis struct {
	Name   string `json:"name"`
	Nonce  []byte `json:"nonce"` // base64 in JSON
	Sealed bool   `json:"sealed,omitempty"`
	// Keys: in a sealed space, epoch 0's key wrapped to the owner.
	Keys *KeyShares `json:"keys,omitempty"`
}

// ParseGenesis checks that m is a valid genesis (of the space it names)
// and returns its content.
func ParseGenesis(m *protocol.Message) (Genesis, error) {
	var g Genesis
	if m.Type != TypeGenesis {
		return g, errorf(ErrMalformed, "type %q is not %s", m.Type, TypeGenesis)
	}
	if len(m.Prev) != 0 {
		return g, errorf(ErrMalformed, "genesis has prev")
	}
	if err := json.Unmarshal(m.Content, &g); err != nil {
		return g, errorf(ErrMalformed, "genesis content: %v", err)
	}
	if len(g.Nonce) < MinNonce || len(g.Nonce) > MaxNonce {
		return g, errorf(ErrMalformed, "genesis nonce is %d bytes, want %d..%d", len(g.Nonce), MinNonce, MaxNonce)
	}
	if want := SpaceID(m.Sender(), g.Nonce); want != m.Space {
		return g, errorf(ErrMalformed, "genesis names space %s, its owner and nonce make %s", m.Space, want)
	}
	return g, nil
}

// Change is the content of a TypeMember message.
type Change struct {
	Op     string `json:"op"`
	Peer   string `json:"peer"`
	Role   Role   `json:"role,omitempty"`
	Invite string `json:"invite,omitempty"`
	// Keys: in a sealed space, a removal's new epoch key wrapped to every
	// remaining member (the rekey is part of the removal).
	Keys *KeyShares `json:"keys,omitempty"`
}

// ParseChange reads m's change and checks its shape (not its authority).
func ParseChange(m *protocol.Message) (Change, peer.ID, error) {
	var c Change
	if m.Type != TypeMember {
		return c, "", errorf(ErrMalformed, "type %q is not %s", m.Type, TypeMember)
	}
	if err := json.Unmarshal(m.Content, &c); err != nil {
		return c, "", errorf(ErrMalformed, "change content: %v", err)
	}
	p, err := peer.Decode(c.Peer)
	if err != nil || p.String() != c.Peer {
		return c, "", errorf(ErrMalformed, "change peer %q is not a peer ID", truncate(c.Peer, 80))
	}
	switch c.Op {
	case OpJoin, OpLeave:
		if p != m.Sender() {
			return c, "", errorf(ErrMalformed, "%s names %s, sent by %s", c.Op, p, m.Sender())
		}
		if c.Op == OpJoin && c.Invite == "" {
			return c, "", errorf(ErrMalformed, "join without an invite")
		}
	case OpAdd, OpRole:
		if _, err := ParseRole(string(c.Role)); err != nil || c.Role == "" {
			return c, "", errorf(ErrMalformed, "%s with role %q", c.Op, c.Role)
		}
	case OpRemove:
	default:
		return c, "", errorf(ErrMalformed, "unknown op %q", truncate(c.Op, 40))
	}
	if c.Keys != nil && c.Op != OpRemove {
		// Only a removal (by an admin or the owner) rekeys: a member must
		// not plant an epoch key others would then send in.
		return c, "", errorf(ErrMalformed, "%s carries keys: only a removal may", c.Op)
	}
	return c, p, nil
}

// IsControl reports whether m is a control message of a private space.
func IsControl(m *protocol.Message) bool { return m.Type == TypeGenesis || m.Type == TypeMember }

// State is a space's membership: each member's role. A State is never
// modified once made; Apply returns a new one.
type State struct {
	members map[peer.ID]Role
}

// Role returns p's role, "" for a non-member.
func (s State) Role(p peer.ID) Role { return s.members[p] }

// IsMember reports whether p is a member.
func (s State) IsMember(p peer.ID) bool { return s.members[p] != "" }

// Len returns the number of members.
func (s State) Len() int { return len(s.members) }

// Entry is one member with its role.
type Entry struct {
	Peer peer.ID
	Role Role
}

// Members lists the members, most powerful first, then by peer ID.
func (s State) Members() []Entry {
	out := make([]Entry, 0, len(s.members))
	for p, r := range s.members {
		out = append(out, Entry{p, r})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if d := b.Role.Power() - a.Role.Power(); d != 0 {
			return d
		}
		return strings.Compare(string(a.Peer), string(b.Peer))
	})
	return out
}

func (s State) with(p peer.ID, r Role) State {
	m := make(map[peer.ID]Role, len(s.members)+1)
	for k, v := range s.members {
		m[k] = v
	}
	if r == "" {
		delete(m, p)
	} else {
		m[p] = r
	}
	return State{members: m}
}

// Genesis returns the state a genesis makes: its sender the owner.
func genesisState(g *protocol.Message) State {
	return State{members: map[peer.ID]Role{g.Sender(): Owner}}
}

// Authorize reports whether m (not a genesis) may be accepted in state s,
// the state of its causal past, and returns the state m makes (s itself
// for an ordinary message). space is the space's ID.
func Authorize(s State, m *protocol.Message) (State, error) {
	if m.Type == TypeGenesis {
		return s, errorf(ErrMalformed, "a second genesis")
	}
	from := m.Sender()
	if m.Type == TypeKey {
		if _, err := ParseKeyMessage(m); err != nil {
			return s, err
		}
		if s.Role(from).Power() < Admin.Power() {
			return s, errorf(ErrUnauthorized, "%s (role %q) may not share keys", from, s.Role(from))
		}
		return s, nil
	}
	if m.Type != TypeMember {
		if !s.IsMember(from) {
			return s, errorf(ErrUnauthorized, "%s is not a member", from)
		}
		return s, nil
	}
	c, p, err := ParseChange(m)
	if err != nil {
		return s, err
	}
	mine, theirs := s.Role(from).Power(), s.Role(p).Power()
	switch c.Op {
	case OpJoin:
		inv, err := ParseInvite(c.Invite)
		if err != nil {
			return s, err
		}
		if inv.Space != m.Space {
			return s, errorf(ErrBadInvite, "invite is for space %s", inv.Space)
		}
		if err := inv.Admits(from, m.Created()); err != nil {
			return s, err
		}
		issuer := s.Role(inv.IssuerID())
		if issuer.Power() < Admin.Power() || issuer.Power() < inv.Role.Power() {
			return s, errorf(ErrBadInvite, "issuer %s (role %q) may not invite as %s", inv.Issuer, issuer, inv.Role)
		}
		if theirs >= inv.Role.Power() {
			return s, nil // already a member with this role or more: no change
		}
		return s.with(from, inv.Role), nil
	case OpLeave:
		if theirs == 0 {
			return s, errorf(ErrUnauthorized, "%s is not a member", from)
		}
		if s.Role(from) == Owner {
			return s, errorf(ErrUnauthorized, "the owner cannot leave")
		}
		return s.with(from, ""), nil
	case OpAdd, OpRole:
		if mine < Admin.Power() || mine < c.Role.Power() || (theirs > 0 && mine <= theirs) {
			return s, errorf(ErrUnauthorized, "%s (role %q) may not make %s %s", from, s.Role(from), p, c.Role)
		}
		if c.Op == OpRole && theirs == 0 {
			return s, errorf(ErrUnauthorized, "%s is not a member", p)
		}
		return s.with(p, c.Role), nil
	case OpRemove:
		if theirs == 0 {
			return s, errorf(ErrUnauthorized, "%s is not a member", p)
		}
		if mine < Admin.Power() || mine <= theirs {
			return s, errorf(ErrUnauthorized, "%s (role %q) may not remove %s (role %q)", from, s.Role(from), p, s.Role(p))
		}
		return s.with(p, ""), nil
	}
	return s, errorf(ErrMalformed, "unknown op %q", c.Op)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
