// Package jsonvalid reports whether bytes are one JSON value, with the
// same answer as encoding/json.Valid for every input, at several times its
// speed. Every message a node receives is checked with it (its body, and
// the content, refs and meta in it), as are call inputs and outputs, so
// the check is on the path of every byte that arrives; encoding/json's
// scanner steps through a function value per byte and was most of the
// cost of decoding a message with a large content.
//
// What it accepts is RFC 8259 JSON as encoding/json reads it: white space
// is space, tab, CR and LF only; strings may hold any byte but a control
// character (below 0x20), '"' and '\' unescaped, invalid UTF-8 included
// (encoding/json replaces it on decoding); objects and arrays nest at most
// 10,000 deep (encoding/json's bound); nothing but white space may follow
// the value.
package jsonvalid

import "encoding/binary"

// MaxDepth is the deepest nesting of objects and arrays Valid accepts,
// encoding/json's.
const MaxDepth = 10000

// Valid reports whether b is one JSON value, as encoding/json.Valid does.
func Valid(b []byte) bool {
	valid, _ := Check(b)
	return valid
}

// Check reports whether b is one JSON value, as Valid does, and if it is,
// whether it holds white space outside its strings: what json.Compact
// leaves out. A b without any is its own compact form.
func Check(b []byte) (valid, spaced bool) {
	var (
		small [64]byte
		open  = small[:0] // the containers open: '{' or '['
		i     = 0
		ok    bool
	)
	// skip moves i past white space, noting any.
	skip := func(from int) {
		i = space(b, from)
		spaced = spaced || i != from
	}
	skip(0)
	const (
		wantValue = iota
		wantKey
		afterValue
	)
	state := wantValue
	for {
		switch state {
		case wantValue:
			if i >= len(b) {
				return false, false
			}
			switch c := b[i]; {
			case c == '{' || c == '[':
				if len(open) == MaxDepth {
					return false, false
				}
				open = append(open, c)
				skip(i + 1)
				switch {
				case i < len(b) && c == '{' && b[i] == '}', i < len(b) && c == '[' && b[i] == ']':
					open = open[:len(open)-1]
					i++
					state = afterValue
				case c == '{':
					state = wantKey
				}
				continue
			case c == '"':
				i, ok = str(b, i)
			case c == '-' || '0' <= c && c <= '9':
				i, ok = number(b, i)
			case c == 't':
				i, ok = literal(b, i, "true")
			case c == 'f':
				i, ok = literal(b, i, "false")
			case c == 'n':
				i, ok = literal(b, i, "null")
			default:
				return false, false
			}
			if !ok {
				return false, false
			}
			state = afterValue
		case wantKey:
			if i >= len(b) || b[i] != '"' {
				return false, false
			}
			if i, ok = str(b, i); !ok {
				return false, false
			}
			skip(i)
			if i >= len(b) || b[i] != ':' {
				return false, false
			}
			skip(i + 1)
			state = wantValue
		case afterValue:
			skip(i)
			if len(open) == 0 {
				return i == len(b), spaced
			}
			if i >= len(b) {
				return false, false
			}
			top := open[len(open)-1]
			switch b[i] {
			case ',':
				skip(i + 1)
				if top == '{' {
					state = wantKey
				} else {
					state = wantValue
				}
				continue
			case '}':
				if top != '{' {
					return false, false
				}
			case ']':
				if top != '[' {
					return false, false
				}
			default:
				return false, false
			}
			open = open[:len(open)-1]
			i++
		}
	}
}

// space returns the index of the first byte at or after i that is not
// JSON white space.
func space(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// SWAR masks: a byte's worth of 0x01, and of 0x80.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plain8 reports whether none of the 8 bytes of w (little-endian) ends or
// escapes a string or is a control character: no '"', no '\', none below
// 0x20. Each test is exact as to whether any byte matches.
func plain8(w uint64) bool {
	quote := w ^ ('"' * ones)
	slash := w ^ ('\\' * ones)
	zeroQ := (quote - ones) &^ quote
	zeroS := (slash - ones) &^ slash
	below := (w - 0x20*ones) &^ w
	return (zeroQ|zeroS|below)&highs == 0
}

// StringEnd returns the index just past the string that starts at b[i],
// its opening quote, in a document Valid accepts: for readers of such a
// document that step over its strings. In any other document it returns
// where the string stops being one, at most len(b).
func StringEnd(b []byte, i int) int {
	end, _ := str(b, i)
	return end
}

// str returns the index just past the string starting at b[i] (its
// opening quote), and whether it is one.
func str(b []byte, i int) (int, bool) {
	i++
	for {
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !hex(b[i+2]) || !hex(b[i+3]) || !hex(b[i+4]) || !hex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default:
			i++
		}
	}
}

func hex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number returns the index just past the number starting at b[i], and
// whether it is one: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func number(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// literal returns the index just past word at b[i], and whether it is
// there.
func literal(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}
