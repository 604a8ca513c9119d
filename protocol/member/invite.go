package member

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// InviteDomain is prepended to an invite's body before it is signed.
const InviteDomain = "weft/invite/v1\x00"

// invitePrefix starts every invite token.
const invitePrefix = "weft-invite1."

// MaxInvite bounds an invite token's length.
const MaxInvite = 16 << 10

// MaxInviteHeads bounds the heads an invite carries.
const MaxInviteHeads = 16

// Invite is a signed capability: whoever presents it (or only Peer, when
// set) may join Space with Role until Expires, provided its issuer was an
// admin or the owner (and at least Role) in the state of the join's
// causal past. It carries what a joiner needs with no one else online:
// the space's genesis (which proves the space ID), the issuer's heads
// when it issued the invite (the join's prev) and the issuer's addresses.
type Invite struct {
	V       int           `json:"v"`
	Space   protocol.ID   `json:"space"`
	Issuer  string        `json:"issuer"`
	Role    Role          `json:"role"`
	Peer    string        `json:"peer,omitempty"` // bound to this peer; empty: any holder
	Expires int64         `json:"expires"`        // Unix milliseconds
	Nonce   []byte        `json:"nonce"`
	Heads   []protocol.ID `json:"heads"`
	Addrs   []string      `json:"addrs,omitempty"`
	Genesis []byte        `json:"genesis"`       // the genesis's wire encoding
	Key     *InviteKey    `json:"key,omitempty"` // a sealed space's current epoch key

	issuer peer.ID
}

// IssuerID returns the decoded issuer.
func (inv Invite) IssuerID() peer.ID { return inv.issuer }

// ExpiresAt returns when the invite expires.
func (inv Invite) ExpiresAt() time.Time { return time.UnixMilli(inv.Expires) }

// Issue signs inv with key (the issuer's, which sets Issuer) and returns
// the token.
func Issue(key crypto.PrivKey, inv Invite) (string, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", err
	}
	inv.V = 1
	inv.Issuer = id.String()
	if inv.Role == "" {
		inv.Role = Member
	}
	b, err := json.Marshal(inv)
	if err != nil {
		return "", err
	}
	sig, err := key.Sign(append([]byte(InviteDomain), b...))
	if err != nil {
		return "", err
	}
	tok := invitePrefix + base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(sig)
	if len(tok) > MaxInvite {
		return "", errorf(ErrBadInvite, "token is %d bytes, limit %d", len(tok), MaxInvite)
	}
	return tok, nil
}

// ParseInvite reads a token and checks everything that needs no state and
// no clock: its shape, its signature by its issuer, its role, and its
// genesis (a valid genesis of the invite's space). Every error wraps
// ErrBadInvite.
func ParseInvite(tok string) (Invite, error) {
	var inv Invite
	tok = strings.TrimSpace(tok)
	if len(tok) > MaxInvite {
		return inv, errorf(ErrBadInvite, "token is %d bytes, limit %d", len(tok), MaxInvite)
	}
	rest, ok := strings.CutPrefix(tok, invitePrefix)
	if !ok {
		return inv, errorf(ErrBadInvite, "not an invite token (want %q…)", invitePrefix)
	}
	b64body, b64sig, ok := strings.Cut(rest, ".")
	if !ok {
		return inv, errorf(ErrBadInvite, "token has no signature")
	}
	body, err := base64.RawURLEncoding.DecodeString(b64body)
	if err != nil {
		return inv, errorf(ErrBadInvite, "token body: %v", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(b64sig)
	if err != nil {
		return inv, errorf(ErrBadInvite, "token signature: %v", err)
	}
	if _, err := protocol.ParseObject(body, []string{"v", "space", "issuer", "role", "peer", "expires", "nonce", "heads", "addrs", "genesis", "key"}); err != nil {
		return inv, errorf(ErrBadInvite, "token body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&inv); err != nil {
		return inv, errorf(ErrBadInvite, "token body: %v", err)
	}
	if inv.V != 1 {
		return inv, errorf(ErrBadInvite, "version %d", inv.V)
	}
	iss, err := peer.Decode(inv.Issuer)
	if err != nil || iss.String() != inv.Issuer {
		return inv, errorf(ErrBadInvite, "issuer %q is not a peer ID", truncate(inv.Issuer, 80))
	}
	pub, err := iss.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return inv, errorf(ErrBadInvite, "issuer %s does not embed an Ed25519 key", iss)
	}
	if ok, err := pub.Verify(append([]byte(InviteDomain), body...), sig); err != nil || !ok {
		return inv, errorf(ErrBadInvite, "signature is not %s's: forged or tampered", iss)
	}
	inv.issuer = iss
	if _, err := ParseRole(string(inv.Role)); err != nil || inv.Role == "" {
		return inv, errorf(ErrBadInvite, "role %q", truncate(string(inv.Role), 40))
	}
	if inv.Peer != "" {
		if p, err := peer.Decode(inv.Peer); err != nil || p.String() != inv.Peer {
			return inv, errorf(ErrBadInvite, "bound peer %q is not a peer ID", truncate(inv.Peer, 80))
		}
	}
	if inv.Expires <= 0 {
		return inv, errorf(ErrBadInvite, "no expiry")
	}
	if len(inv.Heads) == 0 || len(inv.Heads) > MaxInviteHeads {
		return inv, errorf(ErrBadInvite, "%d heads, want 1..%d", len(inv.Heads), MaxInviteHeads)
	}
	g, err := protocol.Decode(inv.Genesis, protocol.StoredLimits())
	if err != nil {
		return inv, errorf(ErrBadInvite, "genesis: %v", err)
	}
	if err := g.Verify(g.Created(), protocol.StoredLimits()); err != nil {
		return inv, errorf(ErrBadInvite, "genesis: %v", err)
	}
	if _, err := ParseGenesis(g); err != nil {
		return inv, errorf(ErrBadInvite, "genesis: %v", err)
	}
	if g.Space != inv.Space {
		return inv, errorf(ErrBadInvite, "genesis is of space %s, not %s", g.Space, inv.Space)
	}
	return inv, nil
}

// GenesisMessage returns the invite's genesis, decoded (ParseInvite has
// checked it).
func (inv Invite) GenesisMessage() (*protocol.Message, error) {
	return protocol.Decode(inv.Genesis, protocol.StoredLimits())
}

// Admits reports whether joiner may use the invite at time at: not
// expired, and bound to joiner if bound at all.
func (inv Invite) Admits(joiner peer.ID, at time.Time) error {
	if !at.Before(inv.ExpiresAt()) {
		return errorf(ErrBadInvite, "expired at %s", inv.ExpiresAt().UTC().Format(time.RFC3339))
	}
	if inv.Peer != "" && inv.Peer != joiner.String() {
		return errorf(ErrBadInvite, "bound to %s, presented by %s", inv.Peer, joiner)
	}
	return nil
}
