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

// ErrTooLarge is returned by Read for a frame longer than its limit.
var ErrTooLarge = errors.New("frame too large")

// Write writes one frame to w. w is buffered: the caller flushes.
func Write(w *bufio.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// WriteJSON writes v, JSON-encoded, as one frame.
func WriteJSON(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return Write(w, b)
}

// Read reads one frame of at most limit bytes. It returns io.EOF when the
// stream ends cleanly before a frame and io.ErrUnexpectedEOF when it ends
// inside one. The buffer grows as bytes arrive, so a length alone reserves
// nothing.
func Read(r *bufio.Reader, limit int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err // io.EOF only when no byte of the length was read
	}
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, limit)
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
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
