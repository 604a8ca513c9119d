package iacp

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/weftmesh/weft/protocol"
)

// parseUUID reads a UUID in its 8-4-4-4-12 hex form, in either case.
func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, errorf(protocol.ErrMalformed, "%q is not a UUID (8-4-4-4-12 hex digits)", truncate(s, 80))
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, errorf(protocol.ErrMalformed, "%q is not a UUID (8-4-4-4-12 hex digits)", truncate(s, 80))
	}
	return u, nil
}

// checkUUIDv7 checks that s is an RFC 9562 version 7 UUID and returns it in
// lower case.
func checkUUIDv7(s string) (string, error) {
	u, err := parseUUID(s)
	if err != nil {
		return "", err
	}
	if v := u[6] >> 4; v != 7 {
		return "", errorf(protocol.ErrMalformed, "%s is a version %d UUID, want version 7", s, v)
	}
	if u[8]>>6 != 0b10 {
		return "", errorf(protocol.ErrMalformed, "%s does not have the RFC 9562 variant", s)
	}
	return formatUUID(u), nil
}

func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// deriveMessageID derives the UUIDv7 of a message that carries none: its
// timestamp is createdAt (Unix ms) and its other bits come from the
// message ID.
func deriveMessageID(createdAt int64, id protocol.ID) string {
	var u [16]byte
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(createdAt))
	copy(u[0:6], ts[2:8])
	copy(u[6:16], id[0:10])
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return formatUUID(u)
}
