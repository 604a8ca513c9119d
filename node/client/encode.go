package client

import (
	"slices"
	"strconv"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/protocol/api"
)

// encodeRequest is marshal(in), written by hand for a send without refs
// (what agents send most, and where the content may be large): the same
// bytes (TestEncodeSendMatchesMarshal), without encoding/json's reflection
// and its compaction of the content one scanner step per byte.
func encodeRequest(in any) ([]byte, error) {
	req, ok := in.(api.SendRequest)
	if !ok || req.Refs != nil {
		return marshal(in)
	}
	b := make([]byte, 0, len(req.Content)+64)
	b = append(b, `{"content":`...)
	if req.Content == nil {
		b = append(b, "null"...)
	} else {
		var err error
		if b, err = jsonx.AppendCompact(b, req.Content); err != nil {
			return marshal(in) // encoding/json's error
		}
	}
	if req.Type != "" {
		b = jsonx.AppendString(append(b, `,"type":`...), req.Type)
	}
	if req.TTL != 0 {
		b = strconv.AppendInt(append(b, `,"ttl":`...), req.TTL, 10)
	}
	if len(req.Meta) > 0 {
		b = append(b, `,"meta":{`...)
		keys := make([]string, 0, len(req.Meta))
		for k := range req.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonx.AppendString(append(jsonx.AppendString(b, k), ':'), req.Meta[k])
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}
