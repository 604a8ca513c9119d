package reconcile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// Wire format. Every unit on the stream is a frame: uvarint length, then
// that many bytes. The initiator sends a hello, the responder a hello reply
// and, unless the reply ends the session, its first exchange; from then on
// the two sides take turns sending one exchange each.
//
//	hello    = version(1) space(32) floor count(uvarint) fingerprint(16) heads
//	reply    = status(1) [floor heads]                (floor and heads only with statusReconcile)
//	floor    = time(varint) idlen(uvarint ≤ 32) id-prefix(idlen)
//	heads    = n(uvarint) id(32)…
//	exchange = n(uvarint) range…  n(uvarint) want-id(32)…  n(uvarint) missing-id(32)…
//	           n(uvarint) (len(uvarint) wire-message)…
//	range    = upper-bound mode(1) [count(uvarint) fingerprint(16) | n(uvarint) id(32)…]
//	bound    = time-delta(uvarint) idlen(uvarint ≤ 32) id-prefix(idlen)
//
// The floor is the lowest sync key the session covers. A non-empty range
// list covers [floor, MaxSyncKey) with contiguous ranges, each from the
// previous upper bound (the first from the floor) to its own; bounds
// strictly increase. A bound's time is the previous bound's time (the
// floor's for the first) plus the delta, in 64-bit wrapping arithmetic.
// IDs in floors and bounds are a prefix followed by zero bytes.
const (
	version = 1

	statusReconcile = 0 // ranges differ: an exchange follows
	statusInSync    = 1 // the fingerprints matched: nothing to do
	statusNotMember = 2 // the responder has not joined the space
	statusBusy      = 3 // the responder refuses for now (too many sessions, or banned)

	modeSkip        = 0 // nothing to say about the range
	modeFingerprint = 1 // the sender's count and fingerprint of the range
	modeIDList      = 2 // every ID the sender has in the range

	// maxFrame bounds one frame: a message budget of frameMessageBytes
	// plus one message at the size limit, and room for ranges and IDs.
	maxFrame = frameMessageBytes + protocol.MaxWireSize + 4<<20
	// maxHeads bounds the heads in a hello.
	maxHeads = 16
	// maxRangeHeader bounds the encoded size of a range without its IDs.
	maxRangeHeader = 2*binary.MaxVarintLen64 + protocol.IDSize + 1 + protocol.FingerprintSize + binary.MaxVarintLen32
	// maxRanges, maxIDs and maxMessages bound what one exchange may hold,
	// well above what an honest peer sends (frameRangeBytes, frameWants,
	// frameMessageBytes), so that decoding costs memory in proportion to
	// the frame's bytes.
	maxRanges   = 2 * frameRangeBytes / (maxRangeHeader - protocol.IDSize)
	maxIDs      = 4 * frameWants
	maxMessages = maxFrame / minMessageWire
	// minMessageWire is below the size of any valid wire message (its
	// signature alone is 64 bytes).
	minMessageWire = 64
)

var errMalformed = errors.New("malformed sync frame")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// hello opens a session.
type hello struct {
	space protocol.ID
	floor protocol.SyncKey
	count int
	fp    protocol.Fingerprint
	heads []protocol.ID
}

// reply answers a hello.
type reply struct {
	status byte
	floor  protocol.SyncKey
	heads  []protocol.ID
}

// rng is one range of an exchange: from the previous range's upper bound
// to upper.
type rng struct {
	upper protocol.SyncKey
	mode  byte
	count int                  // modeFingerprint
	fp    protocol.Fingerprint // modeFingerprint
	ids   []protocol.ID        // modeIDList
}

// exchange is one turn of a session.
type exchange struct {
	ranges  []rng
	wants   []protocol.ID // messages the sender asks for
	missing []protocol.ID // wanted messages the sender does not have
	msgs    [][]byte      // wire messages, wanted or found missing on the receiver

	rangeBytes int // bound on the encoded size of ranges added by addRange (not sent)
}

// empty reports whether x says nothing: no messages, IDs, or ranges other
// than skips. Two empty exchanges in a row end a session.
func (x *exchange) empty() bool {
	if len(x.wants) > 0 || len(x.missing) > 0 || len(x.msgs) > 0 {
		return false
	}
	for _, r := range x.ranges {
		if r.mode != modeSkip {
			return false
		}
	}
	return true
}

func (h *hello) encode() []byte {
	b := []byte{version}
	b = append(b, h.space[:]...)
	b = appendKey(b, h.floor)
	b = binary.AppendUvarint(b, uint64(h.count))
	b = append(b, h.fp[:]...)
	return appendIDs(b, h.heads)
}

func decodeHello(b []byte) (*hello, error) {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != version {
		return nil, malformed("version %d", v)
	}
	h := &hello{space: d.id(), floor: d.key(), count: d.count(1 << 40)}
	h.fp = protocol.Fingerprint(d.bytes(protocol.FingerprintSize))
	h.heads = d.ids(maxHeads)
	return h, d.finish()
}

func (r *reply) encode() []byte {
	b := []byte{r.status}
	if r.status != statusReconcile {
		return b
	}
	b = appendKey(b, r.floor)
	return appendIDs(b, r.heads)
}

func decodeReply(b []byte) (*reply, error) {
	d := decoder{b: b}
	r := &reply{status: d.byte()}
	if d.err == nil && r.status > statusBusy {
		return nil, malformed("status %d", r.status)
	}
	if r.status == statusReconcile {
		r.floor = d.key()
		r.heads = d.ids(maxHeads)
	}
	return r, d.finish()
}

func (x *exchange) encode(floor protocol.SyncKey) []byte {
	// Sized at once: an exchange carries up to 4 MiB of messages, which
	// appending would copy again at each doubling.
	size := 4*binary.MaxVarintLen64 + len(x.ranges)*maxRangeHeader + (len(x.wants)+len(x.missing))*protocol.IDSize
	for _, r := range x.ranges {
		size += len(r.ids) * protocol.IDSize
	}
	for _, m := range x.msgs {
		size += binary.MaxVarintLen64 + len(m)
	}
	b := binary.AppendUvarint(make([]byte, 0, size), uint64(len(x.ranges)))
	prev := floor
	for _, r := range x.ranges {
		b = appendBound(b, prev.Time, r.upper)
		prev = r.upper
		b = append(b, r.mode)
		switch r.mode {
		case modeFingerprint:
			b = binary.AppendUvarint(b, uint64(r.count))
			b = append(b, r.fp[:]...)
		case modeIDList:
			b = appendIDs(b, r.ids)
		}
	}
	b = appendIDs(b, x.wants)
	b = appendIDs(b, x.missing)
	b = binary.AppendUvarint(b, uint64(len(x.msgs)))
	for _, m := range x.msgs {
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	return b
}

// decodeExchange decodes an exchange of a session whose floor is floor,
// checking that its ranges are contiguous and cover [floor, MaxSyncKey).
func decodeExchange(b []byte, floor protocol.SyncKey) (*exchange, error) {
	d := decoder{b: b}
	x := &exchange{}
	n := d.count(maxRanges)
	lower := floor
	for range n {
		r := rng{upper: d.bound(lower.Time), mode: d.byte()}
		switch r.mode {
		case modeSkip:
		case modeFingerprint:
			r.count = d.count(1 << 40)
			r.fp = protocol.Fingerprint(d.bytes(protocol.FingerprintSize))
		case modeIDList:
			r.ids = d.ids(len(b))
		default:
			if d.err == nil {
				d.err = malformed("range mode %d", r.mode)
			}
		}
		if d.err != nil {
			return nil, d.err
		}
		if !lower.Less(r.upper) {
			return nil, malformed("range bounds do not increase")
		}
		lower = r.upper
		x.ranges = append(x.ranges, r)
	}
	if n > 0 && lower != protocol.MaxSyncKey {
		return nil, malformed("ranges end before the last key")
	}
	x.wants = d.ids(maxIDs)
	x.missing = d.ids(maxIDs)
	nm := d.count(min(maxMessages, len(b)/minMessageWire))
	for range nm {
		l := d.count(protocol.MaxWireSize)
		if l < minMessageWire && d.err == nil {
			d.fail("message length")
		}
		if m := d.bytes(l); d.err == nil {
			x.msgs = append(x.msgs, m)
		}
	}
	return x, d.finish()
}

func appendIDs(b []byte, ids []protocol.ID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}

// appendBound encodes k relative to the previous bound's time.
func appendBound(b []byte, prevTime int64, k protocol.SyncKey) []byte {
	b = binary.AppendUvarint(b, uint64(k.Time)-uint64(prevTime))
	return appendIDPrefix(b, k.ID)
}

// appendKey encodes a floor.
func appendKey(b []byte, k protocol.SyncKey) []byte {
	return appendIDPrefix(binary.AppendVarint(b, k.Time), k.ID)
}

// appendIDPrefix encodes id without its trailing zero bytes.
func appendIDPrefix(b []byte, id protocol.ID) []byte {
	n := protocol.IDSize
	for n > 0 && id[n-1] == 0 {
		n--
	}
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, id[:n]...)
}

// decoder reads the fields of one frame, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = malformed("truncated or invalid %s", what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.fail("bytes")
		return make([]byte, max(n, 0))
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a uvarint that must not exceed limit.
func (d *decoder) count(limit int) int {
	v := d.uvarint()
	if v > uint64(limit) {
		d.fail("count")
		return 0
	}
	return int(v)
}

func (d *decoder) id() protocol.ID { return protocol.ID(d.bytes(protocol.IDSize)) }

// ids reads a counted list of IDs; each takes 32 bytes, so a count larger
// than the bytes left is refused before anything is allocated.
func (d *decoder) ids(limit int) []protocol.ID {
	n := d.count(limit)
	if d.err != nil || n*protocol.IDSize > len(d.b) {
		d.fail("id list")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]protocol.ID, n)
	for i := range out {
		out[i] = d.id()
	}
	return out
}

func (d *decoder) bound(prevTime int64) protocol.SyncKey {
	k := protocol.SyncKey{Time: int64(uint64(prevTime) + d.uvarint())}
	k.ID = d.idPrefix()
	return k
}

func (d *decoder) key() protocol.SyncKey {
	k := protocol.SyncKey{Time: d.varint()}
	k.ID = d.idPrefix()
	return k
}

// idPrefix reads an ID without its trailing zeros; a prefix that itself
// ends in a zero byte is not canonical and is refused.
func (d *decoder) idPrefix() (id protocol.ID) {
	n := d.count(protocol.IDSize)
	copy(id[:], d.bytes(n))
	if d.err == nil && n > 0 && id[n-1] == 0 {
		d.fail("id prefix")
	}
	return id
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = malformed("%d trailing bytes", len(d.b))
	}
	return d.err
}

// writeFrame writes one length-prefixed frame to w (buffered: the caller
// flushes).
func writeFrame(w *bufio.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame of at most limit bytes. The buffer grows as
// bytes arrive, so a length alone reserves nothing.
func readFrame(r *bufio.Reader, limit int) ([]byte, error) {
	return readFrameIn(r, limit, nil)
}

// readFrameIn is readFrame, with the frame's memory reserved in scope (see
// frame.ReadIn) unless scope is nil. A stream that ends, even between
// frames, is an unexpected end: the session says when it is done.
func readFrameIn(r *bufio.Reader, limit int, scope frame.Scope) ([]byte, error) {
	b, err := frame.ReadIn(r, limit, scope)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, io.EOF):
		return nil, io.ErrUnexpectedEOF
	case errors.Is(err, frame.ErrTooLarge), errors.Is(err, frame.ErrMalformed):
		return nil, malformed("%v", err)
	}
	return nil, err
}
