// Package mesh is the libp2p side of a weft daemon.
//
// It builds the host (persistent Ed25519 identity, TCP and QUIC, Noise and
// TLS, a resource manager and a connection manager), finds peers (mDNS on
// the LAN, weft's own Kademlia DHT under protocol.DHTPrefix, and a DHT
// rendezvous per space), and carries spaces over gossipsub.
//
// Every space is one gossipsub topic (protocol.Topic). A topic validator
// runs protocol.Validate on everything that arrives, so only valid messages
// of that space are forwarded and handed to the space's Sink; the gossip
// seen-cache is keyed by the weft message ID (qualified by its signature, so
// a forged copy cannot shadow the real message).
//
// mesh imports none of weft's other packages but protocol: the daemon hands
// it a Sink, a one-method interface its store satisfies.
package mesh
