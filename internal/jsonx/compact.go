package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/weftmesh/weft/protocol/jsonvalid"
)

// errNotJSON is AppendCompact's error for a value that is not JSON.
var errNotJSON = errors.New("jsonx: not one valid JSON value")

// AppendCompact appends v with its insignificant white space left out, as
// json.Compact writes it (and as encoding/json writes a json.RawMessage),
// and fails if v is not one valid JSON value, leaving dst as it was. A v
// with no white space outside its strings, as encoders and most agents
// write JSON, is checked (jsonvalid.Valid) and copied as it is:
// json.Compact would copy it byte for byte, one step of its scanner per
// byte, which for a message of a few KiB cost more than the rest of the
// API's answer.
func AppendCompact(dst, v []byte) ([]byte, error) {
	valid, spaced := jsonvalid.Check(v)
	switch {
	case !valid:
		return dst, errNotJSON
	case !spaced:
		return append(dst, v...), nil
	}
	n := len(dst)
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, v); err != nil {
		return dst[:n], err // cannot happen: v is valid
	}
	return buf.Bytes(), nil
}

// AppendRaw appends v as encoding/json writes a json.RawMessage: null if
// v is nil, else v compacted (AppendCompact, whose error it returns).
func AppendRaw(dst []byte, v json.RawMessage) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	return AppendCompact(dst, v)
}
