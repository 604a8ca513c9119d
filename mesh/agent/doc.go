// Package agent serves and fetches agent cards and health, advertises the
// capabilities a node offers in the DHT, and finds the providers of a
// capability without any registry.
//
// # Protocol
//
// One request per stream of Protocol (protocol.AgentProtocol). Both frames
// are a uvarint length followed by that many bytes of JSON:
//
//	asker → node: protocol.AgentQuery     {"get":"card"} or {"get":"health"}   ≤ 1 KiB
//	node → asker: protocol.Card or protocol.Health, or an error               ≤ 256 KiB
//	              {"error":{"code":"bad_request","message":"…"}}
//
// The asker half-closes after its query; the node answers and closes. A
// query that is not JSON or asks for something else gets a bad_request
// answer; a frame too large or cut short, or a stream past its deadline,
// is reset without an answer. Unknown JSON fields are ignored both ways.
//
// A card's "id" is the peer ID of the node serving it: the asker refuses a
// card naming any other peer (ErrForged), so a node cannot pass itself off
// as another, and drops capabilities whose names protocol.CheckName
// refuses (the rest of the card stays usable). Cards are cached per peer
// for a while (WithCardCacheTTL); health is always asked afresh, and its
// round-trip time is measured.
//
// # Discovery
//
// A node advertises each capability name it offers (Advertise) as a
// provider record under protocol.CapabilityNamespace(name) in the mesh's
// DHT, the rendezvous the mesh uses for spaces. Discover looks the name up
// there, adds the peers it is connected to (LAN peers found by mDNS among
// them), and asks each candidate for its card: a provider is a peer whose
// card, served by itself, lists the capability. DHT records are only
// hints — they outlive a node's offer and anyone can write one — so the
// card decides.
package agent
