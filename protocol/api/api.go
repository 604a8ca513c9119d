// Package api holds the JSON types of weft's local HTTP API (served by the
// daemon on its Unix socket, under /v1). It imports nothing of weft or
// libp2p, so clients can use it without pulling in the mesh or the store.
//
// Fields are only ever added, never renamed or removed.
package api

import (
	"encoding/json"
	"time"
)

// Node describes the local daemon (GET /v1/node).
type Node struct {
	ID      string   `json:"id"`
	Addrs   []string `json:"addrs"` // full multiaddrs, ending in /p2p/ID
	Version string   `json:"version"`
	Home    string   `json:"home,omitempty"`
	// Reachability is whether peers can dial this node: "public",
	// "private" (behind NAT: reached through relays) or "unknown".
	Reachability string `json:"reachability,omitempty"`
	// StartedAt is when the daemon started; UptimeS the seconds since.
	StartedAt time.Time `json:"started_at,omitzero"`
	UptimeS   int64     `json:"uptime_s"`
	// Sync is the state of this node's sync (gap repair) with its peers.
	Sync *SyncState `json:"sync,omitempty"`
	// Web is the base URL of the daemon's loopback web listener (without
	// its token, which is in <home>/web.token); absent when it is off.
	Web string `json:"web,omitempty"`
}

// SyncState says whether a sync session is running and how many ran.
type SyncState struct {
	Active   bool `json:"active"`
	Sessions int  `json:"sessions"`
}

// Peer is a connected peer (GET /v1/peers).
type Peer struct {
	ID        string   `json:"id"`
	Addrs     []string `json:"addrs"`
	Direction string   `json:"direction,omitempty"` // "inbound" or "outbound"
	// Relayed is true when every connection to the peer goes through a
	// relay (circuit relay v2): reachable, but not directly (yet).
	Relayed bool `json:"relayed,omitempty"`
	// RTTMillis is the round-trip time last measured to the peer (a
	// moving average; health checks measure it); absent when unknown.
	RTTMillis float64 `json:"rtt_ms,omitempty"`
}

// Peers is the answer of GET /v1/peers.
type Peers struct {
	Peers []Peer `json:"peers"`
}

// ConnectRequest is the body of POST /v1/peers.
type ConnectRequest struct {
	Addr string `json:"addr"` // a multiaddr ending in /p2p/ID
}

// Space is a joined space.
type Space struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	JoinedAt time.Time `json:"joined_at"`
	Messages int       `json:"messages"`
	Peers    int       `json:"peers"` // peers seen in the space's gossip topic
	// Retention is what this node keeps of the space (the node's default
	// unless set for the space); absent when it keeps everything.
	Retention *Retention `json:"retention,omitempty"`
	// Bytes is what the space's messages take (what its quota counts).
	Bytes int64 `json:"bytes"`
	// Limits is what this node takes into the space (the node's defaults
	// unless set for the space).
	Limits *SpaceLimits `json:"limits,omitempty"`
	// Private is true for a members-only space (see /v1/private).
	Private bool `json:"private,omitempty"`
	// Sealed is true for a private space whose content is encrypted end
	// to end.
	Sealed bool `json:"sealed,omitempty"`
	// Sync is what history sync does for the space (GET /v1/status only).
	Sync *SpaceSync `json:"sync,omitempty"`
}

// Sync states of a space (SpaceSync.State).
const (
	SyncInSync     = "in_sync"     // the last session ended with nothing left to fetch
	SyncCatchingUp = "catching_up" // the running (or last) session knows of messages still to fetch
	SyncRunning    = "syncing"     // a session runs and has found nothing to fetch so far
	SyncFailed     = "failed"      // the last session failed (see LastError)
	SyncNone       = "not_synced"  // no session since the space was joined or the node started
)

// SpaceSync is what history sync does for one space.
type SpaceSync struct {
	State   string `json:"state"`   // one of the Sync* states
	Running bool   `json:"running"` // a session with a peer runs now
	// Left is how many messages the running session, or else the last,
	// knew the space lacked and had not fetched yet, including those the
	// peer could not send within its session budget (an estimate: ranges
	// not compared yet may hide more; parents no peer holds count too
	// until the next session).
	Left int `json:"left"`
	// LastEnd is when the last session ended, LastPeer with whom;
	// LastReceived is how many messages it fetched, LastError why it failed.
	LastEnd      time.Time `json:"last_end,omitzero"`
	LastPeer     string    `json:"last_peer,omitempty"`
	LastReceived int       `json:"last_received"`
	LastError    string    `json:"last_error,omitempty"`
}

// SpaceLimits bound what a node takes into a space, from the network and
// from its own agents alike: the bytes the space may hold, the bytes each
// sender may hold in it, and the body size of one message. Zero or absent
// fields mean the node's defaults (1 GiB, 64 MiB, the message limit). A
// message over them is not stored (a send answers 507 quota_exceeded or
// 413 too_large).
type SpaceLimits struct {
	MaxBytes       int64 `json:"max_bytes,omitempty"`
	MaxSenderBytes int64 `json:"max_sender_bytes,omitempty"`
	MaxMessageSize int   `json:"max_message_size,omitempty"`
}

// Retention bounds what a node keeps of a space: the newest MaxCount
// messages (by created_at) and those younger than MaxAge (a Go duration,
// e.g. "720h"). Zero or absent fields mean no bound. Older messages are
// removed and are not fetched again by sync.
type Retention struct {
	MaxCount int    `json:"max_count,omitempty"`
	MaxAge   string `json:"max_age,omitempty"`
}

// Spaces is the answer of GET /v1/spaces.
type Spaces struct {
	Spaces []Space `json:"spaces"`
}

// JoinRequest is the body of POST /v1/spaces.
type JoinRequest struct {
	Name string `json:"name"`
	// Retention, when given, sets what this node keeps of the space (also
	// for a space already joined).
	Retention *Retention `json:"retention,omitempty"`
	// Limits, when given, sets what this node takes into the space (also
	// for a space already joined; zero fields: the node's defaults).
	Limits *SpaceLimits `json:"limits,omitempty"`
}

// Refs are a message's semantic links.
type Refs struct {
	Messages []string `json:"messages,omitempty"` // message IDs replied to
	Nodes    []string `json:"nodes,omitempty"`    // peer IDs addressed
}

// SendRequest is the body of POST /v1/spaces/{space}/messages.
type SendRequest struct {
	Content json.RawMessage   `json:"content"`        // a JSON object
	Type    string            `json:"type,omitempty"` // default "text"
	Refs    *Refs             `json:"refs,omitempty"`
	TTL     int64             `json:"ttl,omitempty"` // seconds
	Meta    map[string]string `json:"meta,omitempty"`
}

// Message is a stored message as the API shows it. Raw holds the exact
// signed wire encoding (base64) so a client can verify it independently.
type Message struct {
	ID        string            `json:"id"`
	V         int               `json:"v"`
	Space     string            `json:"space"`
	From      string            `json:"from"`
	CreatedAt time.Time         `json:"created_at"`
	Prev      []string          `json:"prev,omitempty"`
	Refs      *Refs             `json:"refs,omitempty"`
	Type      string            `json:"type"`
	TTL       int64             `json:"ttl,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	Content   json.RawMessage   `json:"content"`
	Sig       string            `json:"sig"`              // base64 Ed25519 signature
	Cursor    string            `json:"cursor,omitempty"` // position in this node's order of the space
	Raw       []byte            `json:"raw,omitempty"`    // wire encoding, when asked for
}

// EndCursor is the ?after= value that names the current end of a space (or
// the inbox): a page read after it is empty and its Next is the cursor of
// the end, and events followed after it are only those stored from then on.
const EndCursor = "end"

// Page is the answer of GET /v1/spaces/{space}/messages. It holds at most
// ?limit= messages, and fewer when they would pass the daemon's byte
// budget for one answer (4 MiB, always at least one message): read on
// from Next until a page is empty.
type Page struct {
	Messages []Message `json:"messages"`
	Next     string    `json:"next"` // pass as ?after= to continue; unchanged when nothing new
}

// ThreadMessage is a message in a thread, with its distance from the
// message the thread was asked for (0 for that message itself).
type ThreadMessage struct {
	Depth int `json:"depth"`
	Message
}

// Thread is the answer of GET /v1/messages/{id}/thread: the message and its
// ancestors (the messages it replies to, through refs.messages, and so on)
// or its descendants (the replies to it, and so on), nearest first, and by
// creation time within one depth.
type Thread struct {
	Direction string          `json:"direction"` // "ancestors" or "descendants"
	Messages  []ThreadMessage `json:"messages"`
	Truncated bool            `json:"truncated,omitempty"` // the depth or size limit cut it short
}

// Error is the body of every error answer.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong: a stable code and a human message.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes: every code the API answers with is one of these, with the
// status beside it on every route. Those a message's validation gives are
// protocol's (protocol.Code), those of calls and direct messages are the
// call codes on the wire (protocol.Code*): a test keeps them in step.
const (
	// The request.
	CodeBadRequest   = "bad_request"   // 400: malformed JSON, bad parameter
	CodeBadCursor    = "bad_cursor"    // 400
	CodeBadAddr      = "bad_multiaddr" // 400
	CodeBadID        = "bad_id"        // 400: not a message ID
	CodeMethod       = "method_not_allowed"
	CodeForbidden    = "forbidden"    // 403: browser-origin request; a call the callee's policy does not allow
	CodeUnauthorized = "unauthorized" // 401: the MCP endpoint's token is missing or wrong

	// What it names.
	CodeNotFound     = "not_found"     // 404: route, message
	CodeUnknownSpace = "unknown_space" // 404: space not joined

	// A message that is not acceptable: 422, or 413 when too large.
	CodeInvalid            = "invalid" // well-formed JSON, but not a message: no content, negative ttl, bad refs
	CodeTooLarge           = "too_large"
	CodeMalformed          = "malformed"
	CodeUnsupportedVersion = "unsupported_version"
	CodeBadSender          = "bad_sender"
	CodeBadSignature       = "bad_signature"
	CodeIDMismatch         = "id_mismatch"
	CodeClockSkew          = "clock_skew"
	CodeExpired            = "expired"

	// This node.
	CodeUnavailable   = "unavailable"    // 503: the store or the network failed
	CodeConnectFailed = "connect_failed" // 502: the peer could not be reached

	// Flood resistance: the space's quota is full (507), or an agent posts
	// to a space faster than its peers accept one author's posts (429).
	CodeQuotaExceeded = "quota_exceeded"
	CodeRateLimited   = "rate_limited"
)

// Status is the answer of GET /v1/status (weft status): the node, its
// peers and spaces, and what it does.
type Status struct {
	Node
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds int64     `json:"uptime_seconds"`
	Peers         []Peer    `json:"peers"`
	Spaces        []Space   `json:"spaces"`
	// Outbox is how many direct messages wait for delivery.
	Outbox int `json:"outbox"`
	// Handlers are the names the node's agents serve calls to.
	Handlers []string   `json:"handlers"`
	Sync     SyncStatus `json:"sync"`
}

// SyncStatus is what history sync is doing.
type SyncStatus struct {
	Active   bool `json:"active"`   // a sync with a peer runs now
	Received int  `json:"received"` // messages sync fetched since the node started
}
