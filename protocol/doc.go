// Package protocol is weft's wire contract: the message envelope, IDs,
// signing and verification, the wire encoding, validation limits, and the
// names of weft's protocols and topics. It imports none of weft's other
// packages and nothing of libp2p's host or of the store. Its sub-packages
// are api (the local API's JSON types, free of weft and libp2p) and iacp
// (IACP 1.x interop, built on this package).
//
// # Messages
//
// A message is immutable. Its body — the signed unit — is one JSON object,
// produced once by the sender's daemon:
//
//	{"v":1,"space":SPACE_ID,"from":PEER_ID,"created_at":UNIX_MS,
//	 "prev":[ID…],"refs":{"messages":[ID…],"nodes":[PEER_ID…]},
//	 "type":"text","ttl":SECONDS,"meta":{"k":"v"},"content":{…}}
//
// The header fields come first; content is the agent's JSON object, copied
// in verbatim (only surrounding white space is trimmed). prev, refs, ttl and
// meta are omitted when empty. Receivers never re-serialize the body: the
// message ID is SHA-256 over the exact body bytes, and the signature is
// Ed25519 by the key behind "from" over SigningDomain followed by the body.
// Unknown fields in the body are preserved (they are part of the bytes)
// and ignored. A body with a duplicated top-level key is refused, so that
// no two parsers can read one signed body two ways.
//
// # Wire encoding
//
//	byte 0x01 (format) | uvarint len(body) | body | 64-byte Ed25519 signature
//
// IDs (messages and spaces) are 32-byte SHA-256 digests written as 52
// characters of unpadded lower-case base32. An open space's ID is
// SHA-256("weft/space/v1\x00" + name).
//
// # Validation
//
// Validate runs on every path a message enters a node (local API, gossip,
// sync): size (≤ 1 MiB by default, configurable lower), frame, JSON shape,
// sender key type, signature, clock skew (created_at at most MaxSkew in the
// future), age (created_at at most MaxAge in the past, a year by default;
// older counts as expired) and TTL (expired messages are refused). Golden vectors in
// testdata/ let another implementation check its bytes, IDs and signatures.
package protocol
