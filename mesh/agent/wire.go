package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// Bounds of the two frames of an exchange.
const (
	maxQuery  = 1 << 10   // an AgentQuery
	maxAnswer = 256 << 10 // a Card, a Health or an error
)

// What an AgentQuery asks for.
const (
	getCard   = "card"
	getHealth = "health"
)

// maxErrorText bounds the message of an error answer kept from a peer.
const maxErrorText = 512

// writeFrame writes b behind its uvarint length, in one write.
func writeFrame(w io.Writer, b []byte) error {
	buf := make([]byte, 0, binary.MaxVarintLen64+len(b))
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	_, err := w.Write(append(buf, b...))
	return err
}

// readFrame reads one frame of at most limit bytes, with errors in the
// protocol's terms. A frame announcing more is refused before anything of
// its body is read.
func readFrame(r *bufio.Reader, limit int) ([]byte, error) {
	b, err := frame.Read(r, limit)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, frame.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", protocol.ErrTooLarge, err)
	case errors.Is(err, frame.ErrMalformed):
		return nil, fmt.Errorf("%w: frame length overflows 64 bits", protocol.ErrMalformed)
	}
	return nil, fmt.Errorf("frame: %w", err)
}

// errorAnswer encodes an error answer.
func errorAnswer(code, format string, args ...any) []byte {
	b, _ := json.Marshal(struct {
		Error *protocol.CallError `json:"error"`
	}{protocol.Errorf(code, format, args...)})
	return b
}

// decodeAnswer decodes an answer into v, or returns the *protocol.CallError
// the peer answered with.
func decodeAnswer(b []byte, v any) error {
	var e struct {
		Error *protocol.CallError `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Errorf("%w: answer is not a JSON object: %v", protocol.ErrMalformed, err)
	}
	if e.Error != nil {
		if e.Error.Code == "" {
			return fmt.Errorf("%w: error answer without a code", protocol.ErrMalformed)
		}
		e.Error.Code = truncate(e.Error.Code, 64)
		e.Error.Message = truncate(e.Error.Message, maxErrorText)
		return e.Error
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", protocol.ErrMalformed, err)
	}
	return nil
}

// decodeCard decodes the card p answered with: its ID must be p (a peer
// cannot pass off another's card), and capabilities with invalid or
// repeated names are left out (see checkCaps).
func decodeCard(b []byte, p peer.ID) (protocol.Card, error) {
	var c protocol.Card
	if err := decodeAnswer(b, &c); err != nil {
		return protocol.Card{}, err
	}
	id, err := peer.Decode(c.ID)
	if err != nil || id != p {
		return protocol.Card{}, fmt.Errorf("%w: %s answered with a card for %q", ErrForged, p, truncate(c.ID, 80))
	}
	c.ID = p.String() // the canonical form, whichever the peer used
	c.Capabilities = checkCaps(c.Capabilities)
	return c, nil
}

// decodeHealth decodes a health answer; it must have a status.
func decodeHealth(b []byte) (protocol.Health, error) {
	var h protocol.Health
	if err := decodeAnswer(b, &h); err != nil {
		return protocol.Health{}, err
	}
	if h.Status == "" {
		return protocol.Health{}, fmt.Errorf("%w: health without a status", protocol.ErrMalformed)
	}
	h.Status = truncate(h.Status, 64)
	return h, nil
}

// checkCaps returns caps without those whose names fail protocol.CheckName
// and without repeats of a name (the first is kept). Dropping rather than
// refusing the whole card keeps a node that offers one odd (or, to this
// version, unknown) name usable for the rest.
func checkCaps(caps []protocol.Capability) []protocol.Capability {
	out := caps[:0:0]
	seen := make(map[string]bool, len(caps))
	for _, c := range caps {
		if protocol.CheckName(c.Name) != nil || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// truncate shortens s to at most n bytes (plus an ellipsis), on a rune
// boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
