package jsonx

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/weftmesh/weft/protocol/jsonvalid"
)

// Scanner reads JSON from B at I, for hand-written decoders of plain
// forms that leave everything else to encoding/json: each method reads
// one thing at I and reports false (I then anywhere) when B does not hold
// it in the plain form.
type Scanner struct {
	B []byte
	I int
}

// WS skips white space.
func (p *Scanner) WS() {
	for p.I < len(p.B) {
		switch p.B[p.I] {
		case ' ', '\t', '\n', '\r':
			p.I++
		default:
			return
		}
	}
}

// Eat reads c.
func (p *Scanner) Eat(c byte) bool {
	if p.I < len(p.B) && p.B[p.I] == c {
		p.I++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (p *Scanner) End() bool {
	p.WS()
	return p.I == len(p.B)
}

// PlainString reads a string with no escapes, no control characters and
// valid UTF-8, and returns its bytes between the quotes.
func (p *Scanner) PlainString() ([]byte, bool) {
	if !p.Eat('"') {
		return nil, false
	}
	start := p.I
	ascii := true
	for ; p.I < len(p.B); p.I++ {
		c := p.B[p.I]
		switch {
		case c == '"':
			s := p.B[start:p.I]
			p.I++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// Integer reads a JSON number with no fraction or exponent that fits an
// int64.
func (p *Scanner) Integer() (int64, bool) {
	start := p.I
	p.Eat('-')
	digits := p.I
	for p.I < len(p.B) && p.B[p.I] >= '0' && p.B[p.I] <= '9' {
		p.I++
	}
	switch {
	case p.I == digits, p.B[digits] == '0' && p.I-digits > 1:
		return 0, false
	case p.I < len(p.B) && (p.B[p.I] == '.' || p.B[p.I] == 'e' || p.B[p.I] == 'E'):
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.B[start:p.I]), 10, 64)
	return n, err == nil
}

// Members reads an object whose keys are plain strings: at each key it
// calls field with the key once the scanner is at the key's value, and
// field reads the value and reports whether to go on. It reports false
// for anything but such an object (or when field does).
func (p *Scanner) Members(field func(key []byte) bool) bool {
	if !p.Eat('{') {
		return false
	}
	p.WS()
	if p.Eat('}') {
		return true
	}
	for {
		p.WS()
		k, ok := p.PlainString()
		if !ok {
			return false
		}
		p.WS()
		if !p.Eat(':') {
			return false
		}
		p.WS()
		if !field(k) {
			return false
		}
		p.WS()
		if p.Eat(',') {
			continue
		}
		return p.Eat('}')
	}
}

// Fields reads the rest of B as one object whose keys are among names
// (see Object), and nothing after it but white space. It reports false
// for anything else.
func (p *Scanner) Fields(names []string, field func(i int) bool) bool {
	p.WS()
	return p.Object(names, field) && p.End()
}

// Object reads an object whose keys are among names (at most 64), each at
// most once: field(i) reads the value of names[i] and reports whether to
// go on. It reports false for anything else (another key, one twice, a
// value field refuses).
func (p *Scanner) Object(names []string, field func(i int) bool) bool {
	var seen uint64
	return p.Members(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return field(i)
			}
		}
		return false
	})
}

// StringTo reads a plain string (see PlainString) into *dst.
func (p *Scanner) StringTo(dst *string) bool {
	s, ok := p.PlainString()
	*dst = string(s)
	return ok
}

// TimeTo reads a plain string into *t as time.Time's UnmarshalJSON reads
// it (and so as encoding/json does).
func (p *Scanner) TimeTo(t *time.Time) bool {
	start := p.I
	_, ok := p.PlainString()
	return ok && t.UnmarshalJSON(p.B[start:p.I]) == nil
}

// Bool reads true or false.
func (p *Scanner) Bool() (v, ok bool) {
	for _, w := range [...]string{"true", "false"} {
		if len(p.B)-p.I >= len(w) && string(p.B[p.I:p.I+len(w)]) == w {
			p.I += len(w)
			return w == "true", true
		}
	}
	return false, false
}

// PlainMap reads an object of plain strings with no key twice.
func (p *Scanner) PlainMap() (map[string]string, bool) {
	m := map[string]string{}
	ok := p.Members(func(k []byte) bool {
		v, ok := p.PlainString()
		if !ok {
			return false
		}
		if _, dup := m[string(k)]; dup {
			return false
		}
		m[string(k)] = string(v)
		return true
	})
	if !ok {
		return nil, false
	}
	return m, true
}

// Value reads one JSON value other than null and returns its bytes.
func (p *Scanner) Value() ([]byte, bool) {
	start := p.I
	if p.I >= len(p.B) {
		return nil, false
	}
	switch p.B[p.I] {
	case '"':
		if !p.skipString() {
			return nil, false
		}
	case '{', '[':
		depth := 0
		for p.I < len(p.B) {
			switch p.B[p.I] {
			case '"':
				if !p.skipString() {
					return nil, false
				}
				continue
			case '{', '[':
				if depth++; depth > maxValueDepth {
					return nil, false // encoding/json counts the enclosing objects too
				}
			case '}', ']':
				depth--
			}
			p.I++
			if depth == 0 {
				break
			}
		}
	default: // a number, true or false
		for p.I < len(p.B) {
			switch p.B[p.I] {
			case ' ', '\t', '\n', '\r', ',', '}', ']':
				return p.literal(start)
			}
			p.I++
		}
	}
	return p.literal(start)
}

// maxValueDepth bounds the nesting Value reads: encoding/json's bound of
// 10,000 counts the objects around the value too, which Value cannot see;
// deeper values are left to encoding/json.
const maxValueDepth = 1000

// literal checks the value read from start.
func (p *Scanner) literal(start int) ([]byte, bool) {
	v := p.B[start:p.I]
	if len(v) == 0 || v[0] == 'n' || !jsonvalid.Valid(v) {
		return nil, false
	}
	return v, true
}

// skipString moves past a string, escapes and all (jsonvalid.Valid checks it).
func (p *Scanner) skipString() bool {
	for p.I++; p.I < len(p.B); p.I++ {
		switch p.B[p.I] {
		case '\\':
			p.I++
		case '"':
			p.I++
			return true
		}
	}
	return false
}

// PlainStrings reads an array of plain strings (see PlainString).
func (p *Scanner) PlainStrings() ([]string, bool) {
	if !p.Eat('[') {
		return nil, false
	}
	out := []string{}
	p.WS()
	if p.Eat(']') {
		return out, true
	}
	for {
		p.WS()
		s, ok := p.PlainString()
		if !ok {
			return nil, false
		}
		out = append(out, string(s))
		p.WS()
		if p.Eat(',') {
			continue
		}
		return out, p.Eat(']')
	}
}
