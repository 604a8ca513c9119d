package api

// Attempt is a provider a call by capability tried before the one that
// answered, and the error that made it move on (unreachable, overloaded,
// no_handler or forbidden).
//
// A call by capability (POST /v1/invoke with "capability" instead of
// "peer") discovers the peers that offer the capability, ranks them by
// health and load (their heartbeat, and the calls this daemon has in
// flight to each), and tries them in turn; the answer names the provider
// that answered (InvokeResult.Peer, or the first Frame's Peer).
type Attempt struct {
	Peer    string `json:"peer"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}
