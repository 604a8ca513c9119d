package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol/jsonvalid"
)

// SignatureSize is the size of an Ed25519 signature.
const SignatureSize = 64

// SigningDomain is prepended to a body before it is signed, so a weft
// signature can never be replayed as a signature over anything else.
const SigningDomain = "weft/message/v1\x00"

// jsonSpace is JSON's white space.
const jsonSpace = " \t\r\n"

// MaxTTL is the longest TTL a message may carry (in seconds), so that
// created_at + ttl never overflows.
const MaxTTL = math.MaxInt64 / int64(time.Second) / 2

// wireFormat is the first byte of a message's wire encoding.
const wireFormat = 0x01

// Refs are the semantic links an agent chooses: the messages a message
// replies to and the nodes it is addressed to.
type Refs struct {
	Messages []ID     `json:"messages,omitempty"`
	Nodes    []string `json:"nodes,omitempty"`
}

// IsZero reports whether r holds no refs.
func (r Refs) IsZero() bool { return len(r.Messages) == 0 && len(r.Nodes) == 0 }

// Header is everything in a message body but its content.
type Header struct {
	V         int               `json:"v"`
	Space     ID                `json:"space"`
	From      string            `json:"from"`
	CreatedAt int64             `json:"created_at"` // Unix milliseconds
	Prev      []ID              `json:"prev,omitempty"`
	Refs      Refs              `json:"refs,omitzero"`
	Type      string            `json:"type"`
	TTL       int64             `json:"ttl,omitempty"` // seconds; 0 = none
	Meta      map[string]string `json:"meta,omitempty"`
}

// Created returns the creation time.
func (h *Header) Created() time.Time { return time.UnixMilli(h.CreatedAt) }

// Expiry returns when the message expires and whether it does at all.
func (h *Header) Expiry() (time.Time, bool) {
	if h.TTL <= 0 {
		return time.Time{}, false
	}
	return h.Created().Add(time.Duration(min(h.TTL, MaxTTL)) * time.Second), true
}

// body is how a Header and its content are parsed from the signed bytes.
type body struct {
	Header
	Content json.RawMessage `json:"content"`
}

// Message is a decoded, immutable message. Body holds the exact signed bytes;
// the other fields are read from them. Do not modify a Message.
type Message struct {
	Header
	Content json.RawMessage // the content object as it appears in Body
	ID      ID
	Body    []byte
	Sig     []byte
	sender  peer.ID
	wire    []byte // the wire encoding it was made or decoded from
	sigOK   bool   // made by Sign or Validate: its signature is good
}

// Sender returns the decoded sender.
func (m *Message) Sender() peer.ID { return m.sender }

// Draft is what a sender supplies to make a message.
type Draft struct {
	Space     ID
	CreatedAt time.Time
	Prev      []ID
	Refs      Refs
	Type      string
	TTL       time.Duration // rounded down to whole seconds; 0 = none
	Meta      map[string]string
	Content   json.RawMessage // a JSON object
}

// Sign makes a message from d, signed by key (which must be Ed25519), and
// checks it against lim exactly as a receiver would at time d.CreatedAt.
// A sender that signs many messages keeps a Signer instead.
func Sign(key crypto.PrivKey, d Draft, lim Limits) (*Message, error) {
	s, err := NewSigner(key)
	if err != nil {
		return nil, err
	}
	return s.Sign(d, lim)
}

// Signer signs messages with one key. It holds what every message of that
// sender repeats (its peer ID, as the from field writes it), so signing
// a message encodes the body once and reads nothing back. It is safe for
// concurrent use.
type Signer struct {
	key  crypto.PrivKey
	id   peer.ID
	from string
}

// NewSigner returns a Signer for key, which must be Ed25519.
func NewSigner(key crypto.PrivKey) (*Signer, error) {
	if key.Type() != crypto.Ed25519 {
		return nil, errorf(ErrBadSender, "key type %s, want Ed25519", key.Type())
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, errorf(ErrBadSender, "%v", err)
	}
	return &Signer{key: key, id: id, from: id.String()}, nil
}

// Sign makes a message from d, as the package's Sign does.
//
// The message's fields are those it was made of, not the body read back:
// the body is built from them by one json.Marshal of the header (which
// writes each field once, so no key repeats) and the content object
// appended, which is exactly what a receiver's parse reads back when
// every string is valid UTF-8 (json.Marshal would replace invalid bytes,
// and the fields would then differ from the body) and no ID is zero (a
// zero ID is written, but refused when read). Any other draft takes the
// slow path, a full parse of the body, and fails as it always did. TestSignMatchesParse holds the two
// equal.
func (s *Signer) Sign(d Draft, lim Limits) (*Message, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	content := bytes.Trim(d.Content, jsonSpace)
	if len(content) == 0 || content[0] != '{' || !jsonvalid.Valid(content) {
		return nil, errorf(ErrMalformed, "content must be a JSON object")
	}
	h := Header{
		V:         Version,
		Space:     d.Space,
		From:      s.from,
		CreatedAt: d.CreatedAt.UnixMilli(),
		Prev:      slices.Clone(d.Prev),
		Refs:      Refs{Messages: slices.Clone(d.Refs.Messages), Nodes: slices.Clone(d.Refs.Nodes)},
		Type:      d.Type,
		TTL:       int64(d.TTL / time.Second),
		Meta:      maps.Clone(d.Meta),
	}
	// The body is built after the signing domain, which the signature
	// covers too: one buffer, not a copy of the body to sign.
	buf := make([]byte, 0, len(SigningDomain)+headerSize(&h)+len(content)+16)
	buf = append(buf, SigningDomain...)
	b, ok := appendHeader(buf[len(SigningDomain):], &h)
	if !ok {
		hb, err := json.Marshal(&h)
		if err != nil {
			return nil, errorf(ErrMalformed, "header: %v", err)
		}
		b = append(buf[len(SigningDomain):], hb[:len(hb)-1]...) // drop the closing brace
	}
	b = append(b, `,"content":`...)
	at := len(b)
	b = append(b, content...)
	b = append(b, '}')
	if len(b) > lim.MaxSize {
		return nil, errorf(ErrTooLarge, "%d bytes, limit %d", len(b), lim.MaxSize)
	}
	var m *Message
	var err error
	if utf8.Valid(content) && h.stringsUTF8() && !slices.Contains(h.Prev, ID{}) && !slices.Contains(h.Refs.Messages, ID{}) {
		// What parse would read back, without reading it.
		h.Prev = nilIfEmpty(h.Prev)
		h.Refs = Refs{Messages: nilIfEmpty(h.Refs.Messages), Nodes: nilIfEmpty(h.Refs.Nodes)}
		if len(h.Meta) == 0 {
			h.Meta = nil
		}
		m = &Message{Header: h, Content: b[at : len(b)-1 : len(b)-1], ID: MessageID(b), Body: b, sender: s.id}
		if err := m.checkVersion(); err != nil {
			return nil, err
		}
		if err := m.checkFields(lim); err != nil {
			return nil, err
		}
	} else if m, err = parse(b, lim, nil); err != nil {
		return nil, err
	}
	var sign []byte
	if n := len(SigningDomain) + len(b); n <= cap(buf) && &buf[:n][len(SigningDomain)] == &b[0] {
		sign = buf[:n] // the domain, then b in place
	} else {
		sign = signingBytes(b) // b grew out of buf
	}
	sig, err := s.key.Sign(sign)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	m.Sig = sig
	m.wire = m.encode()
	m.sigOK = true
	// The signature was just made with the sender's key; only the clock
	// and TTL checks a receiver runs remain.
	if err := m.checkTime(d.CreatedAt, lim); err != nil {
		return nil, err
	}
	return m, nil
}

// appendHeader appends h's JSON as json.Marshal writes it, without the
// closing brace, when every string of h is plain (see plainString); it
// reports false for any other header, which json.Marshal is left to write.
// A send's header is written so at a fraction of json.Marshal's cost
// (TestAppendHeaderMatchesMarshal, FuzzAppendHeader).
func appendHeader(b []byte, h *Header) ([]byte, bool) {
	if !plainString(h.From) || !plainString(h.Type) {
		return b, false
	}
	for _, n := range h.Refs.Nodes {
		if !plainString(n) {
			return b, false
		}
	}
	for k, v := range h.Meta {
		if !plainString(k) || !plainString(v) {
			return b, false
		}
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(h.V), 10)
	b = AppendJSONID(append(b, `,"space":`...), h.Space)
	b = append(b, `,"from":"`...)
	b = append(append(b, h.From...), '"')
	b = strconv.AppendInt(append(b, `,"created_at":`...), h.CreatedAt, 10)
	if len(h.Prev) > 0 {
		b = AppendJSONIDs(append(b, `,"prev":`...), h.Prev)
	}
	if !h.Refs.IsZero() {
		b = append(b, `,"refs":{`...)
		if len(h.Refs.Messages) > 0 {
			b = AppendJSONIDs(append(b, `"messages":`...), h.Refs.Messages)
		}
		if len(h.Refs.Nodes) > 0 {
			if len(h.Refs.Messages) > 0 {
				b = append(b, ',')
			}
			b = append(b, `"nodes":[`...)
			for i, n := range h.Refs.Nodes {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(append(append(b, '"'), n...), '"')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `,"type":"`...)
	b = append(append(b, h.Type...), '"')
	if h.TTL != 0 {
		b = strconv.AppendInt(append(b, `,"ttl":`...), h.TTL, 10)
	}
	if len(h.Meta) > 0 {
		keys := make([]string, 0, len(h.Meta))
		for k := range h.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `,"meta":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(append(append(b, '"'), k...), `":"`...)
			b = append(append(b, h.Meta[k]...), '"')
		}
		b = append(b, '}')
	}
	return b, true
}

// headerSize is about the size of h's JSON, to size a buffer for it.
func headerSize(h *Header) int {
	n := 128 + len(h.From) + len(h.Type) + (len(h.Prev)+len(h.Refs.Messages))*(IDStringLen+3)
	for _, s := range h.Refs.Nodes {
		n += len(s) + 3
	}
	for k, v := range h.Meta {
		n += len(k) + len(v) + 6
	}
	return n
}

// AppendJSONID appends id as a JSON string (its text, as MarshalText
// writes it, between quotes).
func AppendJSONID(b []byte, id ID) []byte {
	return append(idEncoding.AppendEncode(append(b, '"'), id[:]), '"')
}

// AppendJSONIDs appends ids as a JSON array of strings (see AppendJSONID).
func AppendJSONIDs(b []byte, ids []ID) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONID(b, id)
	}
	return append(b, ']')
}

// plainString reports whether json.Marshal writes s as it is between
// quotes: printable ASCII but for '"', '\\' and the HTML characters it
// escapes ('<', '>', '&').
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// stringsUTF8 reports whether every string of h is valid UTF-8.
func (h *Header) stringsUTF8() bool {
	if !utf8.ValidString(h.Type) {
		return false
	}
	for _, n := range h.Refs.Nodes {
		if !utf8.ValidString(n) {
			return false
		}
	}
	for k, v := range h.Meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func signingBytes(body []byte) []byte {
	s := make([]byte, 0, len(SigningDomain)+len(body))
	return append(append(s, SigningDomain...), body...)
}

// Encode returns a new copy of the wire encoding of m, the caller's to
// keep or change.
func (m *Message) Encode() []byte {
	if m.wire != nil {
		return bytes.Clone(m.wire)
	}
	return m.encode()
}

// Wire returns the wire encoding of m without copying it: a message made
// by Sign or Decode keeps the bytes it was made from, so on its way to disk
// and to peers it is never encoded again. The bytes are shared: do not
// modify them.
func (m *Message) Wire() []byte {
	if m.wire != nil {
		return m.wire
	}
	return m.encode()
}

func (m *Message) encode() []byte {
	w := make([]byte, 0, 1+binary.MaxVarintLen64+len(m.Body)+len(m.Sig))
	w = append(w, wireFormat)
	w = binary.AppendUvarint(w, uint64(len(m.Body)))
	w = append(w, m.Body...)
	return append(w, m.Sig...)
}

// Decode parses a wire encoding without checking the signature, the clock
// or the TTL: use Validate for anything that arrives from outside. The
// returned message shares no memory with wire.
func Decode(wire []byte, lim Limits) (*Message, error) {
	return decode(wire, lim, nil)
}

// decode is Decode, with senders already checked by v (when not nil) not
// checked again.
func decode(wire []byte, lim Limits, v *Verifier) (*Message, error) {
	if len(wire) == 0 || wire[0] != wireFormat {
		return nil, errorf(ErrMalformed, "unknown wire format")
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(wire[1:])
	if k <= 0 {
		return nil, errorf(ErrMalformed, "bad body length")
	}
	if k > 1 && wire[k] == 0 { // the last varint byte carries no bits: padded
		return nil, errorf(ErrMalformed, "body length is not minimally encoded")
	}
	if n > uint64(lim.MaxSize) {
		return nil, errorf(ErrTooLarge, "%d bytes, limit %d", n, lim.MaxSize)
	}
	rest := wire[1+k:]
	if uint64(len(rest)) < SignatureSize || uint64(len(rest))-SignatureSize != n {
		return nil, errorf(ErrMalformed, "frame is %d bytes, want %d", len(rest), n+SignatureSize)
	}
	// One copy of the wire: Body and Sig are slices of it.
	own := bytes.Clone(wire)
	rest = own[1+k:]
	m, err := parse(rest[:n:n], lim, v)
	if err != nil {
		return nil, err
	}
	m.Sig = rest[n:]
	m.wire = own
	return m, nil
}

// DecodeStored reads back a wire encoding that this node checked (Validate
// or Sign) when it stored it, as a page of a space does for every message
// on it: it reads the body's fields and nothing more. It does not look for
// repeated keys, check the fields against limits or the sender's key, which
// the check on the way in did; what it returns is what Decode returns under
// StoredLimits for such bytes. Anything else (bytes from outside, or not
// known to have been checked) goes through Decode or Validate. The
// returned message shares no memory with wire.
func DecodeStored(wire []byte) (*Message, error) {
	if len(wire) == 0 || wire[0] != wireFormat {
		return nil, errorf(ErrMalformed, "unknown wire format")
	}
	n, k := binary.Uvarint(wire[1:])
	if k <= 0 || n > uint64(len(wire)) || uint64(len(wire)-1-k) != n+SignatureSize {
		return nil, errorf(ErrMalformed, "bad body length")
	}
	own := bytes.Clone(wire)
	rest := own[1+k:]
	b := rest[:n:n]
	// Read as parse reads a body (fastbody.go), or by json.Unmarshal if
	// its shape is one readBody leaves to it.
	var bd body
	fields, valid, err := parseObject(b, bodyFields)
	ok := err == nil && valid
	if ok {
		bd, ok = readBody(fields)
	}
	if !ok {
		bd = body{}
		if err := json.Unmarshal(b, &bd); err != nil {
			return nil, errorf(ErrMalformed, "%v", err)
		}
	}
	m := &Message{Header: bd.Header, Content: bd.Content, ID: MessageID(b), Body: b, Sig: rest[n:], wire: own}
	pid, err := peer.Decode(m.From)
	if err != nil {
		return nil, errorf(ErrBadSender, "from %q: %v", truncate(m.From, 80), err)
	}
	m.sender = pid
	return m, nil
}

// Validate decodes a wire encoding and checks everything: size, frame,
// shape, sender, signature, clock skew at now, and TTL.
func Validate(wire []byte, now time.Time, lim Limits) (*Message, error) {
	m, err := Decode(wire, lim)
	if err != nil {
		return nil, err
	}
	if err := m.Verify(now, lim); err != nil {
		return nil, err
	}
	m.sigOK = true
	return m, nil
}

// Verify checks m's signature, its clock skew at now and its TTL.
func (m *Message) Verify(now time.Time, lim Limits) error {
	return m.verify(now, lim, nil)
}

// verify is Verify, with the signature checked by v when not nil.
func (m *Message) verify(now time.Time, lim Limits, v *Verifier) error {
	if len(m.Sig) != SignatureSize {
		return errorf(ErrBadSignature, "signature is %d bytes", len(m.Sig))
	}
	if v != nil {
		if raw, ok := v.senderKey(m.From); ok && m.sender != "" {
			if !v.check(raw, m.Body, m.Sig) {
				return errorf(ErrBadSignature, "not signed by %s", m.From)
			}
			return m.checkTime(now, lim)
		}
	}
	pub, err := m.sender.ExtractPublicKey()
	if err != nil {
		return errorf(ErrBadSender, "%v", err)
	}
	var ok bool
	if raw, rerr := pub.Raw(); v != nil && rerr == nil && pub.Type() == crypto.Ed25519 {
		ok = v.check(raw, m.Body, m.Sig)
	} else {
		ok, err = pub.Verify(signingBytes(m.Body), m.Sig)
	}
	if err != nil || !ok {
		return errorf(ErrBadSignature, "not signed by %s", m.From)
	}
	return m.checkTime(now, lim)
}

// SignatureChecked reports whether m's signature is known to be good in
// this process: m was made by Sign or by Validate. A message only decoded
// has not been checked (and Verify, which may run on a shared message,
// marks nothing).
func (m *Message) SignatureChecked() bool { return m.sigOK }

// checkTime checks m's clock skew, age and TTL at now.
func (m *Message) checkTime(now time.Time, lim Limits) error {
	if skew := m.Created().Sub(now); skew > lim.MaxSkew {
		return errorf(ErrClockSkew, "created %s ahead of this node's clock", skew.Round(time.Millisecond))
	}
	if age := now.Sub(m.Created()); lim.MaxAge > 0 && age > lim.MaxAge {
		return errorf(ErrExpired, "created %s, older than this node's max age %s",
			m.Created().UTC().Format(time.RFC3339), lim.MaxAge)
	}
	if exp, ok := m.Expiry(); ok && !now.Before(exp) {
		return errorf(ErrExpired, "expired at %s", exp.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckID reports whether want is m's ID (for messages whose ID was carried
// beside them).
func (m *Message) CheckID(want ID) error {
	if want != m.ID {
		return errorf(ErrIDMismatch, "claimed %s, bytes hash to %s", want, m.ID)
	}
	return nil
}

// parse reads a body and checks its shape.
func parse(b []byte, lim Limits, v *Verifier) (*Message, error) {
	if len(b) > lim.MaxSize {
		return nil, errorf(ErrTooLarge, "%d bytes, limit %d", len(b), lim.MaxSize)
	}
	if !utf8.Valid(b) {
		return nil, errorf(ErrMalformed, "body is not UTF-8")
	}
	fields, err := checkTopLevel(b)
	if err != nil {
		return nil, err
	}
	bd, ok := readBody(fields)
	if fields == nil || !ok {
		// A shape readBody leaves to encoding/json (see fastbody.go).
		bd = body{}
		if err := json.Unmarshal(b, &bd); err != nil {
			return nil, errorf(ErrMalformed, "%v", err)
		}
	}
	m := &Message{Header: bd.Header, Content: bd.Content, ID: MessageID(b), Body: b}
	if err := m.checkShape(lim, v); err != nil {
		return nil, err
	}
	return m, nil
}

// Field names of a body and of its refs object. encoding/json matches keys
// case-insensitively (with Unicode folding), so a key that folds to one of
// these without being it would be read as it by Go and as an unknown field
// by a stricter parser: such keys are refused.
var (
	bodyFields = []string{"v", "space", "from", "created_at", "prev", "refs", "type", "ttl", "meta", "content"}
	refsFields = []string{"messages", "nodes"}
)

// checkTopLevel requires b to be one JSON object with no repeated key and
// no key that only case-folds to a field name; refs and meta are held to
// the same rule, so that no two parsers can read one signed body two ways.
// It returns the body's members (sharing b's memory) if b is valid JSON,
// else none (and no error only if json.Unmarshal finds none either).
func checkTopLevel(b []byte) (map[string]json.RawMessage, error) {
	fields, valid, err := parseObject(b, bodyFields)
	if err != nil {
		return nil, err
	}
	if raw, ok := fields["refs"]; ok && string(raw) != "null" {
		if _, err := ParseObject(raw, refsFields); err != nil {
			return nil, fmt.Errorf("refs: %w", err)
		}
	}
	if raw, ok := fields["meta"]; ok && string(raw) != "null" {
		if _, err := ParseObject(raw, nil); err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
	}
	if !valid {
		return nil, nil
	}
	return fields, nil
}

// ParseObject reads b as one JSON object and returns its members' raw
// values, holding it to the rule a message body follows: it refuses
// repeated keys, keys that differ from a name in known but fold to it
// (strings.EqualFold), and anything after the object, so that no two
// parsers read one document two ways. It checks members' keys only, not
// their values. Errors wrap ErrMalformed. Formats that carry weft messages
// (such as protocol/iacp) read their objects with it.
//
// The members' values share b's memory.
func ParseObject(b []byte, known []string) (map[string]json.RawMessage, error) {
	members, _, err := parseObject(b, known)
	return members, err
}

// parseObject is ParseObject; valid reports that b is valid JSON (and so
// its members' values are).
func parseObject(b []byte, known []string) (members map[string]json.RawMessage, valid bool, err error) {
	// Every message received is read with it (its body, refs and meta),
	// and json.Decoder's tokens cost a third of decoding one: a valid
	// document is read by a scanner that relies on its validity; an
	// invalid one by the Decoder, which says what is wrong.
	if jsonvalid.Valid(b) {
		if members, err := scanObject(b, known); members != nil || err != nil {
			return members, err == nil, err
		}
	}
	members, err = decodeObject(b, known)
	return members, false, err
}

// decodeObject is ParseObject with json.Decoder, for any document.
func decodeObject(b []byte, known []string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errorf(ErrMalformed, "not a JSON object")
	}
	members := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errorf(ErrMalformed, "%v", err)
		}
		key, _ := tok.(string)
		if _, dup := members[key]; dup {
			return nil, errorf(ErrMalformed, "repeated key %q", truncate(key, 40))
		}
		for _, f := range known {
			if key != f && strings.EqualFold(key, f) {
				return nil, errorf(ErrMalformed, "key %q is not %q", truncate(key, 40), f)
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errorf(ErrMalformed, "%v", err)
		}
		members[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, errorf(ErrMalformed, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errorf(ErrMalformed, "data after the JSON object")
	}
	return members, nil
}

// scanObject is ParseObject for b that jsonvalid.Valid accepts: one JSON value,
// with nothing but white space around it. ok is false if b is not an
// object, or a key is not read: it returns neither members nor an error
// (decodeObject then says why).
func scanObject(b []byte, known []string) (map[string]json.RawMessage, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil
	}
	members := make(map[string]json.RawMessage)
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		end := stringEnd(b, i)
		raw := b[i+1 : end-1]
		key := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
			// Unescaped, or invalid UTF-8 replaced, as the Decoder does.
			if json.Unmarshal(b[i:end], &key) != nil {
				return nil, nil
			}
		}
		if _, dup := members[key]; dup {
			return nil, errorf(ErrMalformed, "repeated key %q", truncate(key, 40))
		}
		for _, f := range known {
			if key != f && strings.EqualFold(key, f) {
				return nil, errorf(ErrMalformed, "key %q is not %q", truncate(key, 40), f)
			}
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the colon
		vend := valueEnd(b, i)
		members[key] = b[i:vend:vend]
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return members, nil
}

// skipSpace returns the index of the first byte of b at or after i that
// is not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the valid JSON string starting at
// b[i] (its opening quote), 8 bytes a step where nothing ends or escapes
// it (see jsonvalid.StringEnd).
func stringEnd(b []byte, i int) int { return jsonvalid.StringEnd(b, i) }

// valueEnd returns the index just past the valid JSON value starting at
// b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
		i++ // a number, true, false or null
	}
	return i
}

func (m *Message) checkShape(lim Limits, v *Verifier) error {
	if err := m.checkVersion(); err != nil {
		return err
	}
	if pid, ok := v.sender(m.From); ok {
		m.sender = pid
		return m.checkFields(lim)
	}
	pid, err := peer.Decode(m.From)
	if err != nil {
		return errorf(ErrBadSender, "from %q: %v", truncate(m.From, 80), err)
	}
	pub, err := pid.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return errorf(ErrBadSender, "from %s does not embed an Ed25519 key", m.From)
	}
	if pid.String() != m.From {
		return errorf(ErrBadSender, "from %q is not in canonical form %s", truncate(m.From, 80), pid)
	}
	m.sender = pid
	v.addSender(m.From, pid)
	return m.checkFields(lim)
}

// checkVersion checks what checkShape checks before the sender.
func (m *Message) checkVersion() error {
	if m.V != Version {
		return errorf(ErrVersion, "v=%d, this node speaks %d", m.V, Version)
	}
	if m.Space.IsZero() {
		return errorf(ErrMalformed, "missing space")
	}
	return nil
}

// checkFields is checkShape after the sender.
func (m *Message) checkFields(lim Limits) error {
	if m.CreatedAt <= 0 {
		return errorf(ErrMalformed, "missing created_at")
	}
	if len(m.Prev) > lim.MaxPrev {
		return errorf(ErrMalformed, "%d prev, limit %d", len(m.Prev), lim.MaxPrev)
	}
	if len(m.Refs.Messages) > lim.MaxRefs || len(m.Refs.Nodes) > lim.MaxRefs {
		return errorf(ErrMalformed, "more than %d refs", lim.MaxRefs)
	}
	for _, n := range m.Refs.Nodes {
		if p, err := peer.Decode(n); err != nil || p.String() != n {
			return errorf(ErrMalformed, "refs.nodes: %q is not a peer ID in canonical form", truncate(n, 80))
		}
	}
	if m.Type == "" || len(m.Type) > lim.MaxType {
		return errorf(ErrMalformed, "type must be 1..%d bytes", lim.MaxType)
	}
	if m.TTL < 0 || m.TTL > MaxTTL {
		return errorf(ErrMalformed, "ttl must be 0..%d seconds", MaxTTL)
	}
	if len(m.Meta) > lim.MaxMeta {
		return errorf(ErrMalformed, "%d meta entries, limit %d", len(m.Meta), lim.MaxMeta)
	}
	for k, v := range m.Meta {
		if k == "" || len(k) > lim.MaxMetaLen || len(v) > lim.MaxMetaLen {
			return errorf(ErrMalformed, "meta entries must be 1..%d bytes", lim.MaxMetaLen)
		}
	}
	c := bytes.Trim(m.Content, jsonSpace)
	if len(c) == 0 || c[0] != '{' {
		return errorf(ErrMalformed, "content must be a JSON object")
	}
	return nil
}
