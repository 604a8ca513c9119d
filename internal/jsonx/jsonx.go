// Package jsonx encodes JSON the way weft shows agents' JSON: as written.
package jsonx

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
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

// AppendString appends s as a JSON string, escaped exactly as Marshal
// escapes it (encoding/json without HTML escaping): `"` and `\`, control
// characters (\b \f \n \r \t, others as \u00XX), invalid UTF-8 as
// \ufffd, and U+2028 and U+2029, which JavaScript reads as line ends.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// AppendStringMap appends m as Marshal writes a map[string]string: an
// object with its keys in sorted order, each key and value escaped as
// AppendString escapes them.
func AppendStringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(append(AppendString(b, k), ':'), m[k])
	}
	return append(b, '}')
}
