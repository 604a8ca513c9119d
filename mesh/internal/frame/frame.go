// Package frame reads and writes the length-prefixed frames of weft's
// stream protocols: a uvarint length, then that many bytes.
package frame

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Errors of Read beside the reader's own.
var (
	ErrTooLarge  = errors.New("frame too large")                // longer than the limit
	ErrMalformed = errors.New("frame length overflows 64 bits") // a malformed uvarint
)

// Write writes one frame to w. w is buffered: the caller flushes.
func Write(w *bufio.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// WriteJSON writes v, JSON-encoded, as one frame. Agents' JSON is passed
// on as it came: '<', '>' and '&' are not escaped (which would make frames
// up to six times larger than the sizes checked).
func WriteJSON(w *bufio.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return Write(w, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// Read reads one frame of at most limit bytes. It returns io.EOF when the
// stream ends cleanly before a frame and io.ErrUnexpectedEOF when it ends
// inside one. A frame longer than 4 KiB is read into a buffer that grows as
// bytes arrive, so a length alone allocates no more than that (ReadIn,
// whose scope has reserved the length, allocates it at once).
func Read(r *bufio.Reader, limit int) ([]byte, error) {
	return ReadIn(r, limit, nil)
}

// Scope is where ReadIn accounts a frame's memory: a libp2p resource scope
// (a stream's network.StreamScope), so that the resource manager's limits
// of the stream's service and peer bound it.
type Scope interface {
	ReserveMemory(size int, prio uint8) error
	ReleaseMemory(size int)
}

// reservePriority is the priority of a frame's reservation: libp2p's
// network.ReservationPriorityAlways, as its own protocols use for their
// bounded reads; the limits still apply.
const reservePriority = 255

// smallFrame is the longest frame read into a buffer of its announced
// length at once; a longer one grows its buffer as its bytes arrive.
const smallFrame = 4 << 10

// ReadIn is Read, with the frame's announced length reserved in scope
// before its body is read: a frame the limits cannot make room for is
// refused unread, with the scope's error (wrapping libp2p's
// network.ErrResourceLimitExceeded). On success the caller holds len(b)
// bytes in scope and releases them once done with b; on error nothing
// stays reserved. A nil scope reserves nothing.
func ReadIn(r *bufio.Reader, limit int, scope Scope) ([]byte, error) {
	// A larger frame's buffer grows as its bytes arrive when no scope
	// reserved its length, so that a peer announcing one and sending
	// little costs little.
	const preallocMax = 8 << 20
	n, err := readLen(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrTooLarge, n, limit)
	}
	if scope != nil && n > 0 {
		if err := scope.ReserveMemory(int(n), reservePriority); err != nil {
			return nil, fmt.Errorf("frame of %d bytes: %w", n, err)
		}
	}
	if n <= smallFrame {
		// Small enough to allocate on its length alone.
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			if scope != nil && n > 0 {
				scope.ReleaseMemory(int(n))
			}
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	var buf bytes.Buffer
	if scope != nil && n <= preallocMax {
		// Reserved already: read it into one buffer of its size, not one
		// doubled as it arrives (a sync exchange of 4 MiB left 8 MiB of
		// garbage and copies behind). Without a scope the length alone
		// must not allocate.
		buf.Grow(int(n))
	}
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		if scope != nil && n > 0 {
			scope.ReleaseMemory(int(n))
		}
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadJSON reads one frame of at most limit bytes into v.
func ReadJSON(r *bufio.Reader, limit int, v any) error {
	b, err := Read(r, limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bad frame: %w", err)
	}
	return nil
}

// readLen reads a frame's uvarint length. Unlike binary.ReadUvarint it
// tells a malformed length from a failed read, and a clean end (io.EOF
// before any byte) from a cut one.
func readLen(r io.ByteReader) (uint64, error) {
	var x uint64
	for i := range binary.MaxVarintLen64 {
		c, err := r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<(7*i), nil
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, ErrMalformed
}
