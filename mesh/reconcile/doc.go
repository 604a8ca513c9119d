// Package reconcile is weft's sync protocol: two members of a space find
// the messages one of them lacks and exchange them, over a libp2p stream
// (Protocol), with no special node.
//
// The initiator sends a hello with its floor (the oldest created_at it
// keeps), its count and fingerprint of the space (see protocol.Sum) and
// its heads. If the responder's fingerprint over the same range matches,
// it answers "in sync" and the session ends: one small frame each way,
// whatever the history's size. Otherwise the two take turns, each turn an
// exchange of ranges, wants and messages (wire.go): a range whose
// fingerprints match is settled; a differing range is split into 16
// sub-ranges with their fingerprints, or, once small, answered with the
// IDs it holds — the receiver asks for the IDs it lacks and, if it holds
// some the list does not name, answers with its own list, which settles
// the range. A side with nothing in a range gets up to 4096 IDs listed at
// once. So rounds grow with the log of the history and bytes with the
// difference.
//
// Nothing is pushed: a side sends a message only when the other asks for
// it by ID, so a few bytes of hello cannot make a node send a whole space,
// and one session sends at most 64 MiB of messages (WithSessionBytes; a
// node that lacks more gets it in the sessions that follow).
//
// Everything fetched is validated exactly as gossip is (protocol.Validate,
// the space must match); expired and future-dated messages are dropped, and
// any other invalid message, or a malformed frame, aborts the session and
// refuses the peer for a while. After delivery the parents (prev) of each
// fetched message that are still missing are asked for (those below the
// session's floor are dropped on arrival; a peer serves only messages of
// the session's space).
//
// Bounds: an exchange carries at most 4 MiB of messages (plus one; a node
// sends 1 MiB, which keeps a joiner's memory small), 1 MiB of ranges (the
// rest are answered next turn) and 8192 wanted IDs; decoding refuses more. A node runs one session per space at a time, answers
// "busy" when its slot is taken, or when a peer (2 a second) or a space
// (10 a second) starts sessions faster than it answers them
// (WithSessionRates), ends a session whose peer leaves its first frame
// unanswered for 5 s (WithFirstReply, refusing the peer for a minute) or
// that moves too little data for too long, and answers none for more
// than 2 minutes.
package reconcile
