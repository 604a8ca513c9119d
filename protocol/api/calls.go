package api

import "time"

// Calls answers GET /v1/calls: the handlers this node's agents registered
// and the calls in flight, both those they serve for peers and those they
// made to peers, oldest first.
type Calls struct {
	Handlers []HandlerInfo  `json:"handlers"`
	Serving  []CallInFlight `json:"serving"` // calls from peers to this node's handlers
	Calling  []CallInFlight `json:"calling"` // calls from this node's agents to peers
}

// HandlerInfo is one registered handler connection.
type HandlerInfo struct {
	Names    []string `json:"names"`
	Allow    []string `json:"allow"`     // who may call ("trusted", "anyone", "peer:ID")
	InFlight int      `json:"in_flight"` // calls it holds now
	Capacity int      `json:"capacity"`  // calls it takes at once
}

// CallInFlight is a call that has not ended.
type CallInFlight struct {
	ID        string    `json:"id,omitempty"` // served calls: answer with POST /v1/calls/{id}/reply
	Name      string    `json:"name"`
	Peer      string    `json:"peer"` // the caller (serving) or the callee (calling)
	Stream    bool      `json:"stream,omitempty"`
	StartedAt time.Time `json:"started_at"`
	ElapsedMS float64   `json:"elapsed_ms"` // how long it has run so far
}
