package api

// Codes of private spaces.
const (
	CodeNotMember = "not_member" // 403: the sender is not a member (with the role) of the private space
	CodeBadInvite = "bad_invite" // 422: a forged, tampered, expired or misbound invite
)

// CreateRequest is POST /v1/private: make a members-only space.
type CreateRequest struct {
	Name string `json:"name"`
	// Sealed also encrypts the space's content end to end.
	Sealed bool `json:"sealed,omitempty"`
}

// InviteRequest is POST /v1/spaces/{space}/invites.
type InviteRequest struct {
	Peer    string `json:"peer,omitempty"`    // bind the invite to this peer
	Role    string `json:"role,omitempty"`    // member (default) or admin
	Expires string `json:"expires,omitempty"` // a Go duration; default 24h
}

// Invite is an invite token and what it grants.
type Invite struct {
	Token   string `json:"token"`
	Space   string `json:"space"`
	Role    string `json:"role"`
	Peer    string `json:"peer,omitempty"`
	Expires string `json:"expires"` // RFC 3339
	// Sealed: the token carries the sealed space's current key (wrapped to
	// Peer, or, unbound, in the clear: then the token is a bearer secret).
	Sealed bool `json:"sealed,omitempty"`
}

// JoinInviteRequest is POST /v1/join: join a private space by invite.
type JoinInviteRequest struct {
	Invite string `json:"invite"`
}

// Member is one member of a private space.
type Member struct {
	Peer string `json:"peer"`
	Role string `json:"role"`
}

// Members is GET /v1/spaces/{space}/members.
type Members struct {
	Space   string   `json:"space"`
	Name    string   `json:"name"`
	Sealed  bool     `json:"sealed,omitempty"`
	Members []Member `json:"members"`
}
