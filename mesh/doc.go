// Package mesh is the libp2p side of a weft daemon.
//
// It builds the host (persistent Ed25519 identity, TCP and QUIC, Noise and
// TLS, a resource manager and a connection manager), finds peers (mDNS on
// the LAN, weft's own Kademlia DHT under protocol.DHTPrefix, and a DHT
// rendezvous per space), and carries spaces over gossipsub.
//
// Who may reach a node (gate.go): a network key makes a private network
// (TCP only); an allowlist (Config.Allow) is enforced by the connection
// gater; the relay service serves the peers the node keeps unless opened
// (Config.Relay); and peers the node does not keep share a limited part of
// the inbound connections, so that the kept ones (bootstrap peers, peers
// connected with Connect, members of joined spaces, Config.Keep) still get
// in when strangers have filled it (Config.Conns).
//
// The resource manager has libp2p's default limits and one named service
// per weft stream protocol (call.ServiceName, direct.ServiceName,
// agent.ServiceName, reconcile.ServiceName), each with limits on its
// streams and memory in all and per peer (limits.go); the protocols'
// handlers attach their streams to their service.
//
// Every space is one gossipsub topic (protocol.Topic). A topic validator
// runs protocol.Validate on everything that arrives, so only valid messages
// of that space are forwarded and handed to the space's Sink; the gossip
// seen-cache is keyed by the weft message ID (qualified by its signature, so
// a forged copy cannot shadow the real message).
//
// Gossip alone loses what was sent while a member was away. With a
// History (Config.History), the mesh runs the sync protocol of the
// mesh/reconcile sub-package for every joined space and decides when: with
// each member that joins the topic (new or reconnected; the member with
// the lower peer ID first), with a random member every SyncInterval, with
// the relay of a message whose parents are missing, and with the other
// members after a session brought news. Fetched messages go to the same
// Sink as gossip.
//
// mesh imports none of weft's other packages but protocol: the daemon hands
// it a Sink, a one-method interface its store satisfies, and a History
// (reconcile.Store), which the store satisfies too.
package mesh
