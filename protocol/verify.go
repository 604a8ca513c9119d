package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/binary"
	"sync"
	"time"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Verifier checks many messages' signatures faster than Validate when
// their senders repeat, as when a node catches up on a space's history:
// once a sender's key has been seen a few times it precomputes multiples
// of that key (about 160 KiB per key, for at most maxTables keys, and
// 480 KiB of multiples of the base point once the first is made), so
// that each later check costs about a quarter of crypto/ed25519's.
//
// It accepts exactly what ed25519.Verify accepts: the check is the same
// equation, R == encode([S]B - [k]A) with S canonical and A decoded as
// ed25519 decodes it, only [k]A is summed from the precomputed multiples
// rather than computed afresh; it is not a batch check (no randomness,
// nothing that could accept a signature a single check refuses). The
// tests compare the two on valid and invalid signatures.
//
// A Verifier is safe for concurrent use.
type Verifier struct {
	base     sync.Once
	baseRows *baseTable // built with the first key table

	mu     sync.Mutex
	seen   map[[32]byte]int       // checks per key without a table
	tables map[[32]byte]*keyTable // at most maxTables
	built  int                    // tables built so far
	calls  int                    // checks so far (see decay)
	credit int                    // tables that may be built now (see buildEvery)

	// senders are "from" fields found to be canonical peer IDs of Ed25519
	// keys (see checkShape), with their raw keys: at most maxSeen.
	sendersMu sync.RWMutex
	senders   map[string]knownSender
}

type knownSender struct {
	id  peer.ID
	pub []byte
}

// Verifier bounds: a key gets a table at its tableAfter-th check (building
// one costs about as much as 10 checks); at most maxTables keys have one;
// at most maxSeen keys are counted. When the tables are all taken, a new
// key gets one only in place of a table used fewer than tableAfter times
// lately (uses are halved every decay checks), so that many senders in
// turn do not make it build tables again and again.
const (
	tableAfter = 8
	maxTables  = 16
	maxSeen    = 4096
	decay      = 1024
	buildEvery = 64
)

// NewVerifier returns an empty Verifier.
func NewVerifier() *Verifier {
	return &Verifier{seen: make(map[[32]byte]int), tables: make(map[[32]byte]*keyTable), senders: make(map[string]knownSender), credit: maxTables}
}

// sender returns the peer ID of a "from" field checked before; false when
// v is nil or it was not.
func (v *Verifier) sender(from string) (peer.ID, bool) {
	if v == nil {
		return "", false
	}
	v.sendersMu.RLock()
	defer v.sendersMu.RUnlock()
	s, ok := v.senders[from]
	return s.id, ok
}

// senderKey returns the raw Ed25519 key of a "from" field checked before.
func (v *Verifier) senderKey(from string) ([]byte, bool) {
	v.sendersMu.RLock()
	defer v.sendersMu.RUnlock()
	s, ok := v.senders[from]
	return s.pub, ok
}

// addSender records that from is id in canonical form, the ID of an
// Ed25519 key (checkShape checked it); nothing when v is nil.
func (v *Verifier) addSender(from string, id peer.ID) {
	if v == nil {
		return
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return
	}
	raw, err := pub.Raw()
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return
	}
	v.sendersMu.Lock()
	defer v.sendersMu.Unlock()
	if len(v.senders) >= maxSeen {
		clear(v.senders)
	}
	v.senders[from] = knownSender{id: id, pub: raw}
}

// Validate is protocol.Validate, with signatures checked by v.
func (v *Verifier) Validate(wire []byte, now time.Time, lim Limits) (*Message, error) {
	m, err := decode(wire, lim, v)
	if err != nil {
		return nil, err
	}
	if err := m.verify(now, lim, v); err != nil {
		return nil, err
	}
	m.sigOK = true
	return m, nil
}

// ValidateAll is Validate of each of wires, in one goroutine: msgs[i] is
// wires[i] decoded and checked, or nil with errs[i] saying why. It accepts
// and refuses exactly what Validate does, message by message, and costs
// less when many are by senders with a table (a session's exchange of a
// space's history): their signatures are checked one by one as Validate
// checks them, save the last step, the encoding of the point each one's R
// must encode, which needs a field inversion (about a fifth of a check);
// ValidateAll inverts all of theirs at once.
func (v *Verifier) ValidateAll(wires [][]byte, now time.Time, lim Limits) (msgs []*Message, errs []error) {
	msgs, errs = make([]*Message, len(wires)), make([]error, len(wires))
	var (
		pending []int // indexes of messages whose point is in pts
		pts     []extPoint
	)
	for i, w := range wires {
		m, err := decode(w, lim, v)
		if err != nil {
			errs[i] = err
			continue
		}
		t := v.tableOf(m)
		if t == nil {
			// Validate's own path: a sender without a table (yet), or
			// a key that is not a known Ed25519 sender.
			if err := m.verify(now, lim, v); err != nil {
				errs[i] = err
				continue
			}
			m.sigOK = true
			msgs[i] = m
			continue
		}
		pts = append(pts, extPoint{})
		if !t.point(&pts[len(pts)-1], m.Sig, []byte(SigningDomain), m.Body) {
			pts = pts[:len(pts)-1]
			errs[i] = errorf(ErrBadSignature, "not signed by %s", m.From)
			continue
		}
		pending = append(pending, i)
		msgs[i] = m
	}
	enc := make([][32]byte, len(pts))
	one := !encodeAll(pts, enc) // cannot happen: then each on its own
	for k, i := range pending {
		m := msgs[i]
		good := bytes.Equal(m.Sig[:32], enc[k][:])
		if one {
			e, ok := pts[k].encode()
			good = ok && bytes.Equal(m.Sig[:32], e)
		}
		if !good {
			msgs[i], errs[i] = nil, errorf(ErrBadSignature, "not signed by %s", m.From)
			continue
		}
		if err := m.checkTime(now, lim); err != nil {
			msgs[i], errs[i] = nil, err
			continue
		}
		m.sigOK = true
	}
	return msgs, errs
}

// tableOf returns the table of m's sender, as m.verify would check m's
// signature with it, and counts the check; nil if m.verify would not use
// one.
func (v *Verifier) tableOf(m *Message) *keyTable {
	if v == nil || len(m.Sig) != SignatureSize || m.sender == "" {
		return nil
	}
	raw, ok := v.senderKey(m.From)
	if !ok || len(raw) != ed25519.PublicKeySize {
		return nil
	}
	return v.tabled([32]byte(raw))
}

// check reports whether sig is pub's Ed25519 signature of a body (that
// is, of SigningDomain followed by body), as ed25519.Verify does.
func (v *Verifier) check(pub, body, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	k := [32]byte(pub)
	if t := v.lookup(k); t != nil {
		return t.verify(sig, []byte(SigningDomain), body)
	}
	if !ed25519.Verify(pub, signingBytes(body), sig) {
		return false // a key earns its table with good signatures only
	}
	v.good(k)
	return true
}

// lookup counts a check and returns k's table, nil if it has none.
func (v *Verifier) lookup(k [32]byte) *keyTable {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lookupLocked(k)
}

// tabled is lookup for a key with a table: it counts no check and returns
// nil for a key without one (whose check, by Verifier.check, counts).
func (v *Verifier) tabled(k [32]byte) *keyTable {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.tables[k]; !ok {
		return nil
	}
	return v.lookupLocked(k)
}

// lookupLocked is lookup under v.mu.
func (v *Verifier) lookupLocked(k [32]byte) *keyTable {
	if v.calls++; v.calls%decay == 0 {
		for _, t := range v.tables {
			t.uses /= 2
		}
	}
	if v.calls%buildEvery == 0 && v.credit < maxTables {
		v.credit++
	}
	if t, ok := v.tables[k]; ok {
		t.uses++
		return t
	}
	return nil
}

// good counts a good signature by k, a key without a table, and builds
// k's table at its tableAfter-th when there is room and build credit (a
// build costs about 10 checks: after the first maxTables, at most one per
// buildEvery checks, so that senders of a few messages each, fresh keys
// being free, cannot make the Verifier cost much more than ed25519).
func (v *Verifier) good(k [32]byte) {
	v.mu.Lock()
	if len(v.seen) >= maxSeen {
		clear(v.seen)
	}
	v.seen[k]++
	build := v.seen[k] >= tableAfter && v.credit > 0 && v.hasRoom()
	if build {
		delete(v.seen, k)
		v.credit--
	}
	v.mu.Unlock()
	if !build {
		return
	}
	v.base.Do(func() { v.baseRows = newBaseTable() })
	t, err := newKeyTable(k, v.baseRows)
	if err != nil {
		return // ed25519.Verify decoded k: cannot happen
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.tables[k]; ok || !v.room() {
		return
	}
	v.tables[k] = t
	v.built++
}

// hasRoom reports whether room would make room, without evicting; under mu.
func (v *Verifier) hasRoom() bool {
	if len(v.tables) < maxTables {
		return true
	}
	for _, t := range v.tables {
		if t.uses < tableAfter {
			return true
		}
	}
	return false
}

// room reports whether a table may be added, making room if one has been
// used too little to keep; under mu.
func (v *Verifier) room() bool {
	if len(v.tables) < maxTables {
		return true
	}
	var least [32]byte
	fewest := -1
	for k, t := range v.tables {
		if fewest < 0 || t.uses < fewest {
			least, fewest = k, t.uses
		}
	}
	if fewest >= tableAfter {
		return false
	}
	delete(v.tables, least)
	return true
}

// keyTable holds [d·64^j](-A) for a public key A, j in 0…kDigits-1 and d
// in 1…32 (at rows[j*32+d-1]), so that [k](-A) for a scalar k < 2^253 is
// the sum or difference of at most kDigits of them, one per digit of k in
// base 64 with digits from −32 to 31 (see signedDigits): 43 additions
// where base-16 digits took up to 64. They are kept with Z = 1
// (affinePoint), which makes each addition cheaper (about 160 KiB per
// key).
type keyTable struct {
	uses int // checks lately (see decay; under Verifier.mu)
	pub  [32]byte
	rows [kDigits * kRow]affinePoint
	base *baseTable // shared by every key's table
}

// kDigits signed base-64 digits cover a scalar below 2^253 (the group
// order is below that); a key table has kRow multiples per digit.
const (
	kDigits = 43
	kRow    = 32
)

// signedDigits returns k (32 bytes, little-endian, below 2^253) as
// kDigits digits e[j] in −32…31 with k = Σ e[j]·64^j.
func signedDigits(k []byte) [kDigits]int8 {
	var w [5]uint64 // k's limbs, and one of zeros for the last window
	for i := range 4 {
		w[i] = binary.LittleEndian.Uint64(k[8*i:])
	}
	var e [kDigits]int8
	carry := uint64(0)
	for j := range e {
		limb, off := 6*j/64, uint(6*j%64)
		v := w[limb] >> off
		if off > 58 {
			v |= w[limb+1] << (64 - off)
		}
		d := v&63 + carry // 0…64
		carry = 0
		if d >= 32 {
			e[j] = int8(int(d) - 64)
			carry = 1
		} else {
			e[j] = int8(d)
		}
	}
	// k < 2^253: the last digit is (k >> 252) + carry ≤ 2, no carry left.
	return e
}

// baseTable holds [d·256^j]B for the base point B, j in 0…31 and d in
// 1…128 (at rows[j*128+d-1]), so that [S]B for a scalar S < 2^253 is the
// sum or difference of at most 32 of them, one per digit of S in base 256
// with digits from −128 to 127 (see signedBytes): about 480 KiB, one per
// Verifier, half of what digits 0…255 took; and the curve's 2d.
type baseTable struct {
	rows [32 * sRow]affinePoint
	d2   field.Element
}

// sRow is the number of multiples per base-256 digit in a baseTable.
const sRow = 128

// signedBytes returns s (32 bytes, little-endian, below 2^253) as 32
// digits e[j] in −128…127 with s = Σ e[j]·256^j.
func signedBytes(s []byte) [32]int8 {
	var e [32]int8
	carry := 0
	for j := range e {
		d := int(s[j]) + carry // 0…256
		carry = 0
		if d >= 128 {
			d -= 256
			carry = 1
		}
		e[j] = int8(d)
	}
	// s < 2^253: the last byte is below 32, its digit below 33, no carry.
	return e
}

func newBaseTable() *baseTable {
	t := new(baseTable)
	t.d2.Set(curveD2())
	pts := make([]edwards25519.Point, len(t.rows))
	base := edwards25519.NewGeneratorPoint()
	for j := range 32 {
		row := pts[j*sRow : (j+1)*sRow]
		row[0].Set(base)
		for d := 1; d < len(row); d++ {
			row[d].Add(&row[d-1], base)
		}
		base.Add(&row[len(row)-1], &row[len(row)-1]) // 256·base
	}
	toAffine(t.rows[:], pts, &t.d2)
	return t
}

func newKeyTable(pub [32]byte, base *baseTable) (*keyTable, error) {
	a, err := new(edwards25519.Point).SetBytes(pub[:])
	if err != nil {
		return nil, err
	}
	t := &keyTable{pub: pub, base: base}
	pts := make([]edwards25519.Point, len(t.rows))
	p := new(edwards25519.Point).Negate(a)
	for j := range kDigits {
		row := pts[j*kRow : (j+1)*kRow]
		row[0].Set(p)
		for d := 1; d < len(row); d++ {
			row[d].Add(&row[d-1], p)
		}
		p.Add(&row[len(row)-1], &row[len(row)-1]) // 64·p
	}
	toAffine(t.rows[:], pts, &base.d2)
	return t, nil
}

// verify is ed25519.Verify(t.pub, msg, sig) where msg is the parts
// concatenated (see verifyWithDom in the standard library): the same
// checks in the same order, with [S]B and [k](-A) summed from the tables.
func (t *keyTable) verify(sig []byte, msg ...[]byte) bool {
	var r extPoint
	if !t.point(&r, sig, msg...) {
		return false
	}
	enc, ok := r.encode()
	return ok && bytes.Equal(sig[:32], enc)
}

// point sets r to [S]B − [k]A for sig and msg, the point whose encoding a
// good signature's R is (see verify); false, and r unset, if sig is
// malformed: not 64 bytes, or S not canonical.
func (t *keyTable) point(r *extPoint, sig []byte, msg ...[]byte) bool {
	if len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(t.pub[:])
	for _, p := range msg {
		h.Write(p)
	}
	var digest [sha512.Size]byte
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return false
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	r.setIdentity()
	for j, d := range signedBytes(s.Bytes()) { // [S]B
		switch {
		case d > 0:
			r.addAffine(&t.base.rows[j*sRow+int(d)-1])
		case d < 0:
			r.subAffine(&t.base.rows[j*sRow-int(d)-1])
		}
	}
	for j, d := range signedDigits(k.Bytes()) { // [k](-A)
		switch {
		case d > 0:
			r.addAffine(&t.rows[j*kRow+int(d)-1])
		case d < 0:
			r.subAffine(&t.rows[j*kRow-int(d)-1])
		}
	}
	return true
}
