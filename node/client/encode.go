package client

import (
	"strconv"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/protocol/api"
)

// encodeRequest is marshal(in), written by hand for a send without refs
// (what agents send most, and where the content may be large): the same
// bytes (TestEncodeSendMatchesMarshal), without encoding/json's reflection
// and its compaction of the content one scanner step per byte.
func encodeRequest(in any) ([]byte, error) {
	if inv, ok := in.(api.InvokeRequest); ok {
		return encodeInvoke(inv)
	}
	req, ok := in.(api.SendRequest)
	if !ok || req.Refs != nil {
		return marshal(in)
	}
	b := make([]byte, 0, len(req.Content)+64)
	b, err := jsonx.AppendRaw(append(b, `{"content":`...), req.Content)
	if err != nil {
		return marshal(in) // encoding/json's error
	}
	if req.Type != "" {
		b = jsonx.AppendString(append(b, `,"type":`...), req.Type)
	}
	if req.TTL != 0 {
		b = strconv.AppendInt(append(b, `,"ttl":`...), req.TTL, 10)
	}
	if len(req.Meta) > 0 {
		b = jsonx.AppendStringMap(append(b, `,"meta":`...), req.Meta)
	}
	return append(b, '}'), nil
}

// encodeInvoke is marshal(inv), written by hand: a call's request crosses
// the caller's API on every call.
func encodeInvoke(inv api.InvokeRequest) ([]byte, error) {
	b := make([]byte, 0, len(inv.Input)+128)
	b = append(b, '{')
	if inv.Peer != "" {
		b = append(jsonx.AppendString(append(b, `"peer":`...), inv.Peer), ',')
	}
	if inv.Capability != "" {
		b = append(jsonx.AppendString(append(b, `"capability":`...), inv.Capability), ',')
	}
	b = jsonx.AppendString(append(b, `"name":`...), inv.Name)
	if len(inv.Input) > 0 {
		var err error
		if b, err = jsonx.AppendCompact(append(b, `,"input":`...), inv.Input); err != nil {
			return marshal(inv) // encoding/json's error
		}
	}
	if len(inv.Meta) > 0 {
		b = jsonx.AppendStringMap(append(b, `,"meta":`...), inv.Meta)
	}
	if inv.Timeout != "" {
		b = jsonx.AppendString(append(b, `,"timeout":`...), inv.Timeout)
	}
	if inv.Stream {
		b = append(b, `,"stream":true`...)
	}
	if inv.Parent != "" {
		b = jsonx.AppendString(append(b, `,"parent":`...), inv.Parent)
	}
	return append(b, '}'), nil
}
