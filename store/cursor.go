package store

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// Cursor is a position in a space's order: reading after it continues with
// the next message. The zero Cursor is the start of the space. Cursors are
// opaque: pass them back as they were given, in Go or as text.
type Cursor uint64

// cursorVersion is the first byte of a cursor's text form.
const cursorVersion = 1

var cursorEncoding = base64.RawURLEncoding.Strict()

// String returns the cursor's opaque text form, or "" for the start.
func (c Cursor) String() string {
	if c == 0 {
		return ""
	}
	var b [1 + seqSize]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:], uint64(c))
	return cursorEncoding.EncodeToString(b[:])
}

// AppendText appends the cursor's text form (String) to b, without
// allocating (encoding.TextAppender).
func (c Cursor) AppendText(b []byte) ([]byte, error) {
	if c == 0 {
		return b, nil
	}
	var raw [1 + seqSize]byte
	raw[0] = cursorVersion
	binary.BigEndian.PutUint64(raw[1:], uint64(c))
	return cursorEncoding.AppendEncode(b, raw[:]), nil
}

// ParseCursor parses a cursor's text form; "" is the start. Malformed
// text gives an error wrapping ErrBadCursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return 0, nil
	}
	const textLen = 12 // base64 of 9 bytes, unpadded
	if len(s) != textLen {
		return 0, fmt.Errorf("%w: length %d, want %d", ErrBadCursor, len(s), textLen)
	}
	b, err := cursorEncoding.DecodeString(s)
	if err != nil || len(b) != 1+seqSize {
		return 0, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	if b[0] != cursorVersion {
		return 0, fmt.Errorf("%w: unknown version %d", ErrBadCursor, b[0])
	}
	c := Cursor(binary.BigEndian.Uint64(b[1:]))
	if c == 0 {
		return 0, fmt.Errorf("%w: the start is written \"\"", ErrBadCursor)
	}
	return c, nil
}

// MarshalText implements encoding.TextMarshaler.
func (c Cursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Cursor) UnmarshalText(b []byte) error {
	v, err := ParseCursor(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
