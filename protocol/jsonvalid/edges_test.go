package jsonvalid

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestEdges compares Valid with encoding/json.Valid on inputs at the
// grammar's edges, and on strings broken by each kind of byte at every
// offset across three 8-byte steps of the string scan.
func TestEdges(t *testing.T) {
	in := []string{
		"-", "-a", "--1", "-.5", "1.", "1.e", "1e", "1e+", "1e-", "1E", "01", "00", "-01", "0.0", "0e0", "0E-0", "-0.e1",
		"1e+1e", "1ee1", "0x", "1 ", " 1", "1\n", "1\x00", "t", "tr", "tru", "true ", "nul", "null\t", "falsee", "false,",
		"[true", "[tru", "[t", "{\"a\":t", "{\"a\":tr", "{\"a\":true", "{\"a\":tru}", "[nul]", "[fals]",
		"\"\x7f\"", "\"\x80\"", "\"\xff\xfe\"", "\"\x20\"", "\"\x1f\"", "\"\\u\"", "\"\\u0\"", "\"\\u00\"", "\"\\u000\"", "\"\\u0000\"",
		"\"\\u000g\"", "\"\\U0000\"", "\"\\", "\"\\u", "\"\\u00", "\"\\\"", "\"\\\\\"", "\"\\/\"", "\"\\a\"", "\"\\0\"",
		"{\"a\"", "{\"a\":", "{\"a\":1", "{\"a\":1,", "{\"a\":1,\"b\"", "{,}", "{:1}", "{\"a\"::1}", "[", "[1", "[1,",
		"{\"a\":1]", "[1}", "[[]", "[]]", "{}}", "{{}}", "[{}]", "[{},]", "{\"a\":[],\"b\":{}}", "\r\n\t ", "\v", "\f",
		"[\v]", "[\f1]", "[ 1 ]", "{ \"a\" : 1 }", "\x00", "\"", "\"\"\"", "\"a\"\"b\"", "[\"a\"\"b\"]", "[1 2]", "{\"a\" \"b\"}",
	}
	// Strings with each kind of byte at every offset across three 8-byte
	// steps, alone and in an array and an object.
	for _, c := range []byte{'"', '\\', 0, 1, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0x9f, 0xa2, 0xdc, 0xff} {
		for at := 0; at < 26; at++ {
			b := []byte(strings.Repeat("x", 26))
			b[at] = c
			in = append(in, "\""+string(b)+"\"", "[\""+string(b)+"\"]", "{\""+string(b)+"\":1}", "\""+string(b[:at+1]))
		}
	}
	for _, s := range in {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q)=%v json=%v", s, got, want)
		}
	}
}

// TestDepthShapes compares the two at and around the nesting bound, and
// where the open-container stack outgrows its first 64 bytes.
func TestDepthShapes(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 9999, 10000, 10001, 10002} {
		docs := map[string]string{
			"arr":       strings.Repeat("[", n) + strings.Repeat("]", n),
			"obj":       strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1),
			"objval":    strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n),
			"mixed":     strings.Repeat(`[{"a":`, n/2) + "[]" + strings.Repeat(`}]`, n/2),
			"arrval":    strings.Repeat("[", n) + "1" + strings.Repeat("]", n),
			"unclosed":  strings.Repeat("[", n),
			"sp":        strings.Repeat("[ ", n) + strings.Repeat(" ]", n),
			"emptyobjs": strings.Repeat("[", n-1) + "{ }" + strings.Repeat("]", n-1),
			"siblings":  strings.Repeat("[", n-1) + "[],[],{}" + strings.Repeat("]", n-1),
		}
		for name, d := range docs {
			if got, want := Valid([]byte(d)), json.Valid([]byte(d)); got != want {
				t.Errorf("depth %d %s: Valid=%v json=%v", n, name, got, want)
			}
		}
	}
}

// naivePlain is plain8 byte by byte.
func naivePlain(b []byte) bool {
	for _, c := range b {
		if c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

// TestPlain8 holds plain8 to naivePlain: every pair of byte values at
// every pair of places, and random words. It may report a stop byte where
// there is none (the scan then looks byte by byte), never the reverse.
func TestPlain8(t *testing.T) {
	special := []byte{0, 1, 2, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0x81, 0x9f, 0xa0, 0xa1, 0xa2, 0xdc, 0xdd, 0xe0, 0xfe, 0xff, 0x41}
	var w [8]byte
	// Every byte pair at every pair of places, the rest filled with
	// bytes near the stop bytes, at random.
	r := rand.New(rand.NewPCG(3, 4))
	falsePos := 0
	for p := 0; p < 8; p++ {
		for q := p; q < 8; q++ {
			for a := 0; a < 256; a++ {
				for c := 0; c < 256; c++ {
					for k := range w {
						w[k] = special[r.IntN(len(special))]
						if r.IntN(2) == 0 {
							w[k] = 'x'
						}
					}
					w[p], w[q] = byte(a), byte(c)
					got, want := plain8(binary.LittleEndian.Uint64(w[:])), naivePlain(w[:])
					if got && !want {
						t.Fatalf("plain8(%q) true, has a stop byte", w)
					}
					if !got && want {
						falsePos++
					}
				}
			}
		}
	}
	for range 2000000 {
		x := r.Uint64()
		binary.LittleEndian.PutUint64(w[:], x)
		if plain8(x) != naivePlain(w[:]) {
			if plain8(x) {
				t.Fatalf("plain8(%q) true wrongly", w)
			}
			falsePos++
		}
	}
	t.Logf("false positives (harmless): %d", falsePos)
}

// TestExhaustive compares the two on every input of up to 4 bytes over
// JSON's punctuation and a few bytes that break it.
func TestExhaustive(t *testing.T) {
	alpha := []byte(`{}[],:" \-01.eE+tu\x`)
	alpha = append(alpha, 0x1f)
	var b []byte
	var count int
	var rec func(int)
	rec = func(l int) {
		count++
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q)=%v json=%v", b, got, want)
		}
		if l == 0 {
			return
		}
		for _, c := range alpha {
			b = append(b, c)
			rec(l - 1)
			b = b[:len(b)-1]
		}
	}
	rec(4)
	t.Logf("%d inputs", count)
}

// TestStringEnd holds StringEnd to the scan it replaced in protocol on
// valid strings, and within [i, len(b)] on any bytes.
func TestStringEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pieces := []string{"a", "\\\"", "\\\\", "\\u00e9", "\\n", "\xff", "abcdefgh", "\x7f", "/", "\\/"}
	for range 200000 {
		var s strings.Builder
		s.WriteByte('"')
		for range r.IntN(12) {
			s.WriteString(pieces[r.IntN(len(pieces))])
		}
		s.WriteByte('"')
		body := s.String()
		pre := strings.Repeat(" ", r.IntN(3))
		doc := pre + body + ` , 1`
		end := StringEnd([]byte(doc), len(pre))
		if end != len(pre)+len(body) {
			t.Fatalf("StringEnd(%q) = %d want %d", doc, end, len(pre)+len(body))
		}
		// protocol's stringEnd before StringEnd
		old := func(b []byte, i int) int {
			for i++; i < len(b); i++ {
				switch b[i] {
				case '\\':
					i++
				case '"':
					return i + 1
				}
			}
			return len(b)
		}([]byte(doc), len(pre))
		if old != end {
			t.Fatalf("old %d new %d on %q", old, end, doc)
		}
	}
	// Within [i, len(b)] for any bytes and any i < len(b).
	for range 200000 {
		n := 1 + r.IntN(20)
		b := make([]byte, n)
		for k := range b {
			b[k] = "\"\\ua0\x01\xff"[r.IntN(7)]
		}
		i := r.IntN(n)
		if e := StringEnd(b, i); e > len(b) || e < i {
			t.Fatalf("StringEnd(%q,%d)=%d", b, i, e)
		}
	}
}
