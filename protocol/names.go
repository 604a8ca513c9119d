package protocol

// Names of weft's protocols, topics and discovery keys. Changing any of them
// splits the network.
const (
	// Version is the envelope version carried in every message ("v").
	Version = 1

	// DHTPrefix is the protocol prefix of weft's own Kademlia DHT, kept apart
	// from the public IPFS DHT.
	DHTPrefix = "/weft"

	// MDNSService is the mDNS service name weft daemons announce on a LAN.
	MDNSService = "_weft._udp"

	// SyncProtocol is the stream protocol for repairing gaps in a space.
	SyncProtocol = "/weft/sync/1.0.0"

	// AgentVersion prefixes the libp2p agent version of weft daemons.
	AgentVersion = "weft"
)

// Topic returns the gossipsub topic of a space.
func Topic(space ID) string { return "/weft/space/1/" + space.String() }

// Rendezvous returns the DHT rendezvous namespace under which members of a
// space advertise themselves.
func Rendezvous(space ID) string { return "weft/space/" + space.String() }
