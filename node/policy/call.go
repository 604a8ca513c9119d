package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Words of a call policy (HandlerRequest.allow, weft handle --allow).
const (
	AllowTrusted = "trusted" // the peers on the trust list
	AllowAnyone  = "anyone"  // every peer, strangers included
	// AllowPeerPrefix may precede a peer ID ("peer:12D3…"); a bare peer
	// ID means the same.
	AllowPeerPrefix = "peer:"
	// AllowSpacePrefix is reserved for the members of a private space
	// ("space:NAME"), which come with private spaces: see Relations.
	AllowSpacePrefix = "space:"
)

// Access values of a capability in an agent card.
const (
	AccessAnyone     = "anyone"     // any peer may call it
	AccessRestricted = "restricted" // only peers the node chose (trusted or listed)
)

// Relations is what a policy asks about a caller. Members of private
// spaces will be asked here too (a method such as InSpace(space, p)),
// once private spaces exist.
type Relations interface {
	IsTrusted(p peer.ID) bool
}

// CallPolicy says who may call a handler. The zero value allows the
// trusted peers only: a handler is never exposed to strangers unless its
// owner says "anyone".
type CallPolicy struct {
	anyone  bool
	trusted bool
	peers   []peer.ID // sorted, no duplicates
}

// ParseCallPolicy reads a policy from its words: "trusted", "anyone",
// peer IDs (bare or as "peer:ID"). No words means "trusted". Listing
// peers alone allows those peers and not the trusted ones; give
// "trusted" too for both.
func ParseCallPolicy(words []string) (CallPolicy, error) {
	if len(words) == 0 {
		return CallPolicy{trusted: true}, nil
	}
	var p CallPolicy
	for _, w := range words {
		w = strings.TrimSpace(w)
		switch {
		case w == AllowTrusted:
			p.trusted = true
		case w == AllowAnyone:
			p.anyone = true
		case strings.HasPrefix(w, AllowSpacePrefix):
			return CallPolicy{}, fmt.Errorf("allow %q: private spaces are not supported yet; allow %q, %q or peer IDs", w, AllowTrusted, AllowAnyone)
		default:
			id, err := peer.Decode(strings.TrimPrefix(w, AllowPeerPrefix))
			if err != nil {
				return CallPolicy{}, fmt.Errorf("allow %q: want %q, %q or a peer ID", w, AllowTrusted, AllowAnyone)
			}
			if !slices.Contains(p.peers, id) {
				p.peers = append(p.peers, id)
			}
		}
	}
	slices.Sort(p.peers)
	return p, nil
}

// Allows reports whether caller may call under p.
func (p CallPolicy) Allows(caller peer.ID, r Relations) bool {
	switch {
	case p.anyone:
		return true
	case slices.Contains(p.peers, caller):
		return true
	case p.trusted || p.isZero():
		return r != nil && r.IsTrusted(caller)
	}
	return false
}

func (p CallPolicy) isZero() bool { return !p.anyone && !p.trusted && len(p.peers) == 0 }

// Access is what an agent card says of a handler under p: AccessAnyone or
// AccessRestricted.
func (p CallPolicy) Access() string {
	if p.anyone {
		return AccessAnyone
	}
	return AccessRestricted
}

// Words returns p in its words, as ParseCallPolicy reads them ("anyone"
// alone when anyone may call).
func (p CallPolicy) Words() []string {
	if p.anyone {
		return []string{AllowAnyone}
	}
	var out []string
	if p.trusted || p.isZero() {
		out = append(out, AllowTrusted)
	}
	for _, id := range p.peers {
		out = append(out, AllowPeerPrefix+id.String())
	}
	return out
}
