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
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

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
	var buf [idTextLen]byte // no allocation: every message received has IDs to parse
	n, err := idEncoding.Decode(id[:], append(buf[:0], s...))
	if err != nil || n != IDSize {
		return ID{}, fmt.Errorf("%w: %q is not base32", ErrBadID, truncate(s, 80))
	}
	idEncoding.Encode(buf[:], id[:])
	if string(buf[:]) != s { // unused trailing bits set
		return ID{}, fmt.Errorf("%w: %q is not in canonical form", ErrBadID, truncate(s, 80))
	}
	if id.IsZero() {
		return ID{}, fmt.Errorf("%w: zero id", ErrBadID)
	}
	return id, nil
}

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
