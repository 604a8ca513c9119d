// Package iacp translates between weft's direct messages and the JSON
// envelopes of IACP 1.x, the Inter-Agent Communication Protocol of Works
// With Agents: iacp.md version 1.1.0 (whose definitions are unchanged since
// 1.0.0) and the Internet-Draft draft-vystartas-iacp-00, both kept in
// github.com/workswithagents/specs and published at
// https://workswithagents.dev/specs/iacp.md.
//
// [Import] reads an envelope into a [protocol.Draft] that a daemon signs as
// itself and sends to [Imported.Recipient]; [Export] writes a signed direct
// message as an envelope that an IACP peer can read and, through the x-weft
// extension, verify. The package imports only [protocol] of weft.
//
// # Envelope
//
// The spec draws the envelope in YAML. The JSON used here follows the
// spec's reference clients (iacp/v1.1.0/typescript.md, iacp/v1.0.0/curl.md):
// envelope fields at the top level, the message nested under "message".
//
//	{"version":"1.0","message_id":UUIDv7,"correlation_id":UUID,
//	 "sender":{"agent_id":S,"identity_sig":HEX},
//	 "recipient":{"agent_id":PEER_ID,"channel":C},
//	 "timestamp":RFC3339,"ttl_seconds":N,
//	 "message":{"type":KIND,"intent":I,"payload":{…}},
//	 "x-weft":{…}}
//
// Import also reads the JSON form of the YAML drawing, where these envelope
// fields sit in an "envelope" object beside "message". Giving both forms in
// one document is refused. Objects are read with [protocol.ParseObject]:
// a repeated key, or a key that differs from a field name only in case, is
// refused.
//
// # Mapping
//
// The fields map as follows (import: IACP → weft; export: weft → IACP):
//
//	version              must be 1.x: another major version is
//	                     protocol.ErrVersion. Export writes "1.0".
//	message_id           meta "iacp.id": a UUIDv7 (RFC 9562), stored in lower
//	                     case. Export takes it from meta "iacp.id", or else
//	                     derives one (below).
//	correlation_id       meta "correlation". Any UUID version is accepted,
//	                     because the spec's reference clients send v4. Export
//	                     writes it only when meta "correlation" is a lower-case
//	                     UUID. Any other value stays in x-weft.meta.
//	sender.agent_id      meta "iacp.sender": what the envelope claims, not
//	                     checked. weft vouches only for the daemon that signs.
//	                     Export uses meta "iacp.sender", else "from".
//	sender.identity_sig  On import: neither checked nor kept. The draft does
//	                     not define the canonical serialization it signs, and
//	                     the importing daemon signs the message itself.
//	                     On export: the weft signature in hex (Ed25519 by the
//	                     key behind x-weft.from, over protocol.SigningDomain
//	                     followed by x-weft.body).
//	recipient.agent_id   The recipient: a libp2p peer ID (in any form
//	                     peer.Decode accepts, written in canonical form).
//	                     space = protocol.InboxSpace(recipient),
//	                     refs.nodes = [recipient].
//	                     The spec's wildcards are refused: a direct message has
//	                     exactly one recipient.
//	recipient.channel    meta "iacp.channel": a name accepted by
//	                     protocol.CheckName.
//	timestamp            created_at (RFC 3339 with any offset; time finer than
//	                     a millisecond is dropped; before 1970 is refused).
//	                     Export writes it in UTC, adding milliseconds only when
//	                     they are not zero.
//	ttl_seconds          ttl: a whole number from 1 to protocol.MaxTTL.
//	                     Leaving it out means no expiry. 0 is refused, because
//	                     in IACP it would mean the message has already expired.
//	message.type         type: request, response, event, error or heartbeat
//	                     (protocol.Kinds).
//	message.intent       meta "iacp.intent": a name accepted by
//	                     protocol.CheckName. It may be left out (the spec's
//	                     error messages have none).
//	message.payload      content: must be a JSON object (the spec's payload
//	                     is always one), at most protocol.MaxMessageSize
//	                     bytes. Import copies it byte for byte. Export writes
//	                     it compacted (white space between tokens removed),
//	                     because it is written through encoding/json.
//
// # The x-weft extension
//
// IACP 1.x defines no metadata or trace fields, and it ignores fields it
// does not know. So weft puts everything the spec has no field for in one
// top-level extension object, "x-weft" (the draft reserves the x- prefix for
// custom names):
//
//	id        export only: the weft message ID.
//	from      export only: the peer ID that signed the message.
//	body      export only: the exact signed body, as a JSON string.
//	          SHA-256(body) is id, and sender.identity_sig verifies over it,
//	          so a reader can check the export without trusting whoever
//	          relayed it.
//	reply_to  refs.messages[0]: the weft message this one answers. It is
//	          read on import and written on export.
//	meta      every other meta entry, such as traceparent, tracestate and
//	          session. It is read on import and written on export. On
//	          import it may not set a key that an envelope field maps to,
//	          nor a local key (protocol.IsLocalMeta).
//
// Import ignores x-weft's id, from and body: the draft it returns is a new
// message, which the importing daemon signs.
//
// # Derived message IDs
//
// When meta has no "iacp.id", Export derives the message_id, so that every
// export is reproducible. It is a UUIDv7: its 48-bit unix_ts_ms is
// created_at, and its bytes 6–15 are bytes 0–9 of the weft message ID with
// the version (7) and variant (10) bits set on top.
//
// # Errors and time
//
// Every error Import and Export return wraps one of protocol's sentinel
// errors (protocol.ErrTooLarge, protocol.ErrVersion, protocol.ErrMalformed,
// protocol.ErrBadSignature), so protocol.Code maps it to a stable code.
// Import does not look at the clock: the daemon's protocol.Sign and
// protocol.Validate check skew and TTL.
package iacp
