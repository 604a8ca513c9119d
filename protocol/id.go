package protocol

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
)

// IDSize is the size in bytes of a message or space ID (a SHA-256 digest).
const IDSize = sha256.Size

// idEncoding renders IDs as lower-case, unpadded base32 (52 characters).
var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// IDStringLen is the length of an ID's text form.
var IDStringLen = idEncoding.EncodedLen(IDSize)

// idTextLen is IDStringLen as a constant (TestIDStringLen).
const idTextLen = 52

// ID names a message (the SHA-256 of its signed bytes) or a space (the
// SHA-256 of its domain-separated name). The zero ID is never valid.
type ID [IDSize]byte

// ErrBadID reports text that is not an ID.
var ErrBadID = errors.New("bad id")

// ParseID parses the text form of an ID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != IDStringLen {
		return id, fmt.Errorf("%w: %q has length %d, want %d", ErrBadID, truncate(s, 80), len(s), IDStringLen)
	}
	// Every message received names a few IDs (its space, its parents):
	// read here with a table, 8 characters (40 bits, 5 bytes) at a time,
	// not by encoding/base32, which the decoding of a message spent more
	// on than on its JSON. What it accepts is what idEncoding decodes
	// into 32 bytes that encode back to s (TestParseIDMatchesBase32).
	var acc uint64
	for i := range idTextLen {
		v := idDigits[s[i]]
		if v == noDigit {
			return ID{}, fmt.Errorf("%w: %q is not base32", ErrBadID, truncate(s, 80))
		}
		acc = acc<<5 | uint64(v)
		if i%8 == 7 {
			g := i / 8 * 5
			id[g], id[g+1], id[g+2], id[g+3], id[g+4] = byte(acc>>32), byte(acc>>24), byte(acc>>16), byte(acc>>8), byte(acc)
			acc = 0
		}
	}
	// The last 4 characters: 20 bits, 16 of the ID and 4 unused.
	if acc&0xf != 0 {
		return ID{}, fmt.Errorf("%w: %q is not in canonical form", ErrBadID, truncate(s, 80))
	}
	id[IDSize-2], id[IDSize-1] = byte(acc>>12), byte(acc>>4)
	if id.IsZero() {
		return ID{}, fmt.Errorf("%w: zero id", ErrBadID)
	}
	return id, nil
}

// idAlphabet is idEncoding's alphabet.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// idDigits maps a byte to its value in idAlphabet, noDigit if it is none.
var idDigits = func() (t [256]byte) {
	for i := range t {
		t[i] = noDigit
	}
	for i := range len(idAlphabet) {
		t[idAlphabet[i]] = byte(i)
	}
	return t
}()

const noDigit = 0xff

// String returns the ID's text form.
func (id ID) String() string { return idEncoding.EncodeToString(id[:]) }

// AppendText appends the ID's text form (String) to b, without
// allocating (encoding.TextAppender).
func (id ID) AppendText(b []byte) ([]byte, error) { return idEncoding.AppendEncode(b, id[:]), nil }

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// MarshalText implements encoding.TextMarshaler.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// MessageID returns the ID of a message whose signed bytes are body.
func MessageID(body []byte) ID { return sha256.Sum256(body) }

// spaceIDDomain separates space-name hashes from every other hash.
const spaceIDDomain = "weft/space/v1\x00"

// SpaceID returns the ID of the open space called name.
func SpaceID(name string) ID {
	h := sha256.New()
	h.Write([]byte(spaceIDDomain))
	h.Write([]byte(name))
	var id ID
	h.Sum(id[:0])
	return id
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
