package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// A body is read once: checkTopLevel's scan of its members (ParseObject)
// gives each field's raw value, and readBody reads the fields from those
// values, so the content, usually most of the body, is not scanned again
// by encoding/json. It reads only the shapes a sender's daemon writes
// (strings without escapes, integers, arrays of such strings); a body with
// anything else in its fields is read by json.Unmarshal as before, so the
// result (fields, or an error) is always encoding/json's.

// readBody reads b's fields from fields, its members as checkTopLevel
// returned them (b is valid UTF-8 and passed checkTopLevel). It reports false if a field has
// a shape it does not read.
func readBody(fields map[string]json.RawMessage) (body, bool) {
	var bd body
	for k, raw := range fields {
		if isNull(raw) && k != "content" {
			continue // encoding/json leaves the field at its zero value
		}
		ok := true
		switch k {
		case "v":
			var v int64
			v, ok = readInt(raw, strconv.IntSize)
			bd.V = int(v)
		case "space":
			bd.Space, ok = readID(raw)
		case "from":
			bd.From, ok = readString(raw)
		case "created_at":
			bd.CreatedAt, ok = readInt(raw, 64)
		case "prev":
			bd.Prev, ok = readIDs(raw)
		case "refs":
			ok = json.Unmarshal(raw, &bd.Refs) == nil
		case "type":
			bd.Type, ok = readString(raw)
		case "ttl":
			bd.TTL, ok = readInt(raw, 64)
		case "meta":
			ok = json.Unmarshal(raw, &bd.Meta) == nil
		case "content":
			bd.Content = raw
		}
		if !ok {
			return body{}, false
		}
	}
	return bd, true
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// readString reads a JSON string with no escapes (the body is valid UTF-8
// and valid JSON, so its bytes are the string's).
func readString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// readInt reads a JSON number written as an integer that fits bits.
func readInt(raw []byte, bits int) (int64, bool) {
	if bytes.ContainsAny(raw, ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(raw), 10, bits)
	return v, err == nil
}

func readID(raw []byte) (ID, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return ID{}, false
	}
	var id ID
	return id, id.UnmarshalText(raw[1:len(raw)-1]) == nil
}

// readIDs reads a JSON array of IDs written as strings with no escapes.
func readIDs(raw []byte) ([]ID, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	ids := []ID{} // as encoding/json: [] is empty, not nil
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != ']' {
		if raw[i] != '"' {
			return nil, false
		}
		end := stringEnd(raw, i)
		id, ok := readID(raw[i:end])
		if !ok {
			return nil, false
		}
		ids = append(ids, id)
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return ids, true
}
