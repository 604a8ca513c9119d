package store

import (
	"encoding/binary"

	"github.com/weftmesh/weft/protocol"
)

// Key layout. Every key starts with a one-byte prefix naming its table;
// IDs are the raw 32 bytes and sequence numbers are 8-byte big-endian, so
// the parts need no separators and byte order is the natural order.
//
//	m id             → message record (see encodeRecord): seq, space, time,
//	                   expires, prev, reply-to, size, sender; and the raw
//	                   wire bytes when record and bytes together stay under
//	                   Badger's value threshold (most messages: one key, one
//	                   read; see setRecord)
//	d id n           → chunk n (one byte) of the raw wire bytes of a larger
//	                   message (and of any message a version 2 or 3 record,
//	                   from an older store, describes), at most
//	                   dataChunkSize each; the record holds the count. Kept apart from the record so records stay
//	                   small and inline in the LSM tree (heads and cursors
//	                   never touch the value log); chunked so a message at
//	                   the protocol's 1 MiB limit fits an in-memory store,
//	                   whose values must be smaller than 1 MiB.
//	i space seq      → message id; the space's order index, read by cursors
//	h space id       → empty; id is a head of space (no stored message names it in Prev)
//	c parent child   → empty; child names parent in its Prev (children index)
//	r parent         → empty; some stored message names parent in its Prev.
//	                   Read with Get by parent's own Put (when the ID filter of
//	                   reference keys says it may be there, see idfilter.go) so
//	                   that a child committed concurrently is caught by conflict
//	                   detection (badger does not detect conflicts on ranges,
//	                   only on keys).
//	t space time id  → empty; the space's time index in sync order (time is
//	                   created_at, Unix ms, see putTime). Read keys-only to
//	                   build the in-memory range index (see rangeIndex).
//	e expires id     → empty; expiry index, only for messages with Expires != 0
//	                   (expires as putTime), read by Sweep from the start
//	                   up to now.
//	q space          → 8-byte BE seq: the highest seq of a deleted message of
//	                   space, so that seqs are not reused after a reopen when
//	                   the newest messages were deleted (see lastSeq).
//	b space          → the space's usage: bytes(8, BE) | count(8, BE) of
//	                   its messages' raw bytes (see usage.go)
//	f space from     → one sender's usage in space: bytes(8) | count(8) |
//	                   since(8, Unix ms, store clock); from is Message.From
//	z                → one byte: the version of the usage counters (they
//	                   are counted afresh at Open when it is missing, see
//	                   migrateUsage)
//	s id             → JSON space record
//	p peer-id        → JSON peer record
//
// The outbox (see outbox.go): direct messages waiting for delivery and the
// dead letters that were not delivered in time. An ID is in at most one of
// the two; its wire bytes stay under w while it moves between them.
//
//	o id             → outbox record (see encodeOutgoing)
//	u next id        → empty; the outbox in next-try order (next as
//	                   putTime), read by Due from the start up to now
//	v n to next id   → empty; the same per recipient (n: one byte, the
//	                   length of to), read by Pending(to)
//	w id n           → chunk n (one byte) of the wire bytes of outgoing
//	                   message id, at most dataChunkSize each; the outbox or
//	                   dead-letter record holds the total length
//	k id             → dead-letter record (see encodeDeadLetter)
//	l seq            → id; dead letters in the order they died, read by
//	                   DeadLetters' cursors
//	g                → 8-byte BE: the last dead-letter seq allocated, so that
//	                   seqs are never reused, even after deletes and a reopen
//	n seq            → sent-log record (see encodeSent): a delivered direct
//	                   message, in delivery order, bounded (see SentMax)
const (
	prefixMessage byte = 'm'
	prefixData    byte = 'd'
	prefixOrder   byte = 'i'
	prefixHead    byte = 'h'
	prefixChild   byte = 'c'
	prefixRef     byte = 'r'
	prefixReply   byte = 'x'
	prefixTime    byte = 't'
	prefixExpiry  byte = 'e'
	prefixSeqMark byte = 'q'
	prefixSpace   byte = 's'
	prefixUsage   byte = 'b'
	prefixSender  byte = 'f'
	prefixVersion byte = 'z'
	prefixPeer    byte = 'p'

	prefixOutbox     byte = 'o'
	prefixOutboxDue  byte = 'u'
	prefixOutboxTo   byte = 'v'
	prefixOutboxRaw  byte = 'w'
	prefixDead       byte = 'k'
	prefixDeadOrder  byte = 'l'
	prefixDeadSeqMax byte = 'g'
	prefixSent       byte = 'n'
)

const (
	seqSize  = 8
	timeSize = 8
)

// putTime writes t (Unix ms, possibly negative) as 8 bytes big-endian with
// the sign bit flipped, so that byte order is numeric order.
func putTime(b []byte, t int64) { binary.BigEndian.PutUint64(b, uint64(t)^(1<<63)) }

// readTime reverses putTime.
func readTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func idKey(prefix byte, id protocol.ID) []byte {
	k := make([]byte, 1+protocol.IDSize)
	k[0] = prefix
	copy(k[1:], id[:])
	return k
}

func pairKey(prefix byte, a, b protocol.ID) []byte {
	k := make([]byte, 1+2*protocol.IDSize)
	k[0] = prefix
	copy(k[1:], a[:])
	copy(k[1+protocol.IDSize:], b[:])
	return k
}

func messageKey(id protocol.ID) []byte { return idKey(prefixMessage, id) }

func dataKey(id protocol.ID, chunk int) []byte {
	return append(idKey(prefixData, id), byte(chunk))
}
func refKey(parent protocol.ID) []byte          { return idKey(prefixRef, parent) }
func spaceKey(id protocol.ID) []byte            { return idKey(prefixSpace, id) }
func headKey(space, id protocol.ID) []byte      { return pairKey(prefixHead, space, id) }
func childKey(parent, child protocol.ID) []byte { return pairKey(prefixChild, parent, child) }
func replyKey(to, reply protocol.ID) []byte     { return pairKey(prefixReply, to, reply) }
func replyPrefix(to protocol.ID) []byte         { return idKey(prefixReply, to) }
func orderPrefix(space protocol.ID) []byte      { return idKey(prefixOrder, space) }
func headPrefix(space protocol.ID) []byte       { return idKey(prefixHead, space) }

func orderKey(space protocol.ID, seq uint64) []byte {
	k := make([]byte, 1+protocol.IDSize+seqSize)
	k[0] = prefixOrder
	copy(k[1:], space[:])
	binary.BigEndian.PutUint64(k[1+protocol.IDSize:], seq)
	return k
}

func seqMarkKey(space protocol.ID) []byte { return idKey(prefixSeqMark, space) }
func usageKey(space protocol.ID) []byte   { return idKey(prefixUsage, space) }

func senderUsageKey(space protocol.ID, from string) []byte {
	return append(idKey(prefixSender, space), from...)
}

func usageVersionKey() []byte             { return []byte{prefixVersion} }
func timePrefix(space protocol.ID) []byte { return idKey(prefixTime, space) }

const timeKeySize = 1 + protocol.IDSize + timeSize + protocol.IDSize

func timeKey(space protocol.ID, k protocol.SyncKey) []byte {
	b := make([]byte, timeKeySize)
	b[0] = prefixTime
	copy(b[1:], space[:])
	putTime(b[1+protocol.IDSize:], k.Time)
	copy(b[1+protocol.IDSize+timeSize:], k.ID[:])
	return b
}

// timeKeySync returns the sync key of a time-index key.
func timeKeySync(b []byte) (protocol.SyncKey, bool) {
	if len(b) != timeKeySize || b[0] != prefixTime {
		return protocol.SyncKey{}, false
	}
	return protocol.SyncKey{
		Time: readTime(b[1+protocol.IDSize:]),
		ID:   protocol.ID(b[1+protocol.IDSize+timeSize:]),
	}, true
}

const expiryKeySize = 1 + timeSize + protocol.IDSize

func expiryKey(expires int64, id protocol.ID) []byte {
	b := make([]byte, expiryKeySize)
	b[0] = prefixExpiry
	putTime(b[1:], expires)
	copy(b[1+timeSize:], id[:])
	return b
}

// expiryKeyParts returns the expiry time and message id of an expiry key.
func expiryKeyParts(b []byte) (int64, protocol.ID, bool) {
	if len(b) != expiryKeySize || b[0] != prefixExpiry {
		return 0, protocol.ID{}, false
	}
	return readTime(b[1:]), protocol.ID(b[1+timeSize:]), true
}

// orderKeySeq returns the sequence number of an order-index key.
func orderKeySeq(k []byte) (uint64, bool) {
	if len(k) != 1+protocol.IDSize+seqSize || k[0] != prefixOrder {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1+protocol.IDSize:]), true
}

func peerKey(id string) []byte {
	k := make([]byte, 1+len(id))
	k[0] = prefixPeer
	copy(k[1:], id)
	return k
}

func outboxKey(id protocol.ID) []byte { return idKey(prefixOutbox, id) }
func deadKey(id protocol.ID) []byte   { return idKey(prefixDead, id) }

func outboxRawKey(id protocol.ID, chunk int) []byte {
	return append(idKey(prefixOutboxRaw, id), byte(chunk))
}

const dueKeySize = 1 + timeSize + protocol.IDSize

func dueKey(next int64, id protocol.ID) []byte {
	b := make([]byte, dueKeySize)
	b[0] = prefixOutboxDue
	putTime(b[1:], next)
	copy(b[1+timeSize:], id[:])
	return b
}

// recipientPrefix returns the prefix of the recipient index keys of to,
// which is at most MaxRecipientSize bytes long.
func recipientPrefix(to string) []byte {
	b := make([]byte, 2+len(to), 2+len(to)+timeSize+protocol.IDSize)
	b[0] = prefixOutboxTo
	b[1] = byte(len(to))
	copy(b[2:], to)
	return b
}

func recipientKey(to string, next int64, id protocol.ID) []byte {
	b := recipientPrefix(to)
	b = b[:len(b)+timeSize]
	putTime(b[len(b)-timeSize:], next)
	return append(b, id[:]...)
}

// nextTryKeyParts returns the next-try time and ID that end a due or
// recipient index key whose prefix (everything before them) is prefixLen
// bytes long.
func nextTryKeyParts(b []byte, prefixLen int) (int64, protocol.ID, bool) {
	if len(b) != prefixLen+timeSize+protocol.IDSize {
		return 0, protocol.ID{}, false
	}
	return readTime(b[prefixLen:]), protocol.ID(b[prefixLen+timeSize:]), true
}

func deadOrderKey(seq uint64) []byte {
	b := make([]byte, 1+seqSize)
	b[0] = prefixDeadOrder
	binary.BigEndian.PutUint64(b[1:], seq)
	return b
}

// deadOrderKeySeq returns the sequence number of a dead-letter order key.
func deadOrderKeySeq(b []byte) (uint64, bool) {
	if len(b) != 1+seqSize || b[0] != prefixDeadOrder {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[1:]), true
}

func deadSeqMaxKey() []byte { return []byte{prefixDeadSeqMax} }
