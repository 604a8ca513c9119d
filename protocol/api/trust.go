package api

import "time"

// TrustedPeer is a peer on this node's trust list. Trusted peers may call
// the handlers that allow "trusted" (the default) and write to the inbox
// without the rate and quota of strangers.
type TrustedPeer struct {
	Peer  string    `json:"peer"`           // peer ID
	Name  string    `json:"name,omitempty"` // the user's name for it
	Added time.Time `json:"added"`
}

// TrustRequest is the body of POST /v1/trust: trust a peer (again, to
// change its name). The answer is the TrustedPeer, 201 when it is new to
// the list, else 200.
type TrustRequest struct {
	Peer string `json:"peer"`
	Name string `json:"name,omitempty"`
}

// TrustList answers GET /v1/trust: the trusted peers, sorted by ID, and
// the inbox's DM policy.
type TrustList struct {
	Peers []TrustedPeer `json:"peers"`
	DM    *DMPolicy     `json:"dm,omitempty"`
}

// Untrusted answers DELETE /v1/trust/{peer}: whether the peer was on the
// list (removing a peer that is not is no error).
type Untrusted struct {
	Peer    string `json:"peer"`
	Removed bool   `json:"removed"`
}

// DMPolicy is who may put direct messages in this node's inbox: "anyone"
// or "trusted". Trusted peers are never limited; each stranger may send
// Rate messages a second (bursts of Burst) and have Quota held in the
// inbox, and all strangers together AllRate, AllBurst and AllQuota. A
// refusal is acknowledged to the sender: refused with reason "forbidden"
// for good, or overloaded with reason "rate_limited" or "quota", which its
// outbox retries.
type DMPolicy struct {
	Policy   string  `json:"policy"`
	Rate     float64 `json:"rate"`
	Burst    int     `json:"burst"`
	Quota    int     `json:"quota"`
	AllRate  float64 `json:"all_rate"`
	AllBurst int     `json:"all_burst"`
	AllQuota int     `json:"all_quota"`
}
