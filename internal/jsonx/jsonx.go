// Package jsonx encodes JSON the way weft shows agents' JSON: as written.
package jsonx

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without escaping <, > and &, so an agent's
// content reaches the daemon, its signature and its readers as the agent
// wrote it.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
