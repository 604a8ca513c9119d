package jsonvalid

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// cases are inputs at the edges of the grammar; every test compares Valid
// with encoding/json.Valid on them.
var cases = []string{
	``, ` `, `{}`, `[]`, ` {} `, "\t[]\r\n", `{`, `}`, `[`, `]`, `{]`, `[}`,
	`null`, `true`, `false`, `nul`, `tru`, `fals`, `nulll`, `true1`, `True`, `NULL`,
	`0`, `-0`, `-`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e`, `1e5`, `1E+5`, `1e-5`, `1e+`, `1.5e3`,
	`1.e3`, `123456789012345678901234567890`, `-1.0E-0`, `+1`, `0x10`, `1 2`, `[1,]`, `[,1]`, `[1,,2]`,
	`{"a":1}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a" : 1 , "b" : [ ] }`, `{"a":1 "b":2}`,
	`{"a":{"b":{"c":[1,{"d":null}]}}}`, `[[[]]]`, `[[[]]`, `[{"a":[}]`,
	`""`, `"abc"`, `"a\"b"`, `"a\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u0041"`, `"\u00e9"`, `"\uD83D\uDE00"`,
	`"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`, `"abc`, `"abc\"`, `"a` + "\t" + `b"`, "\"a\x00b\"", "\"a\x1fb\"",
	"\"a\x7fb\"", "\"\xff\"", "\"\xc3\xa9\"", "\"\xed\xa0\x80\"", `"12345678"`, `"1234567"` + `"`,
	`"12345678\"12345678"`, "\"1234567\x01\"", "\"123456789012345\\\"\"",
	"\u00a01", "\ufeff{}", "{}\x00", `{} {}`, `[] x`, "\v1", "\f1",
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, c := range cases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", c, got, want)
		}
		checkSpaced(t, []byte(c))
	}
}

func TestDepth(t *testing.T) {
	for _, n := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		for _, pair := range []string{"[]", `{"a":}`} {
			var b []byte
			if pair == "[]" {
				b = []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
			} else {
				b = []byte(strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat("}", n-1))
			}
			if got, want := Valid(b), json.Valid(b); got != want {
				t.Errorf("%d deep %s: Valid %v, encoding/json %v", n, pair[:1], got, want)
			}
		}
	}
	if !Valid([]byte(strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth))) {
		t.Errorf("%d deep refused", MaxDepth)
	}
	if Valid([]byte(strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1))) {
		t.Errorf("%d deep accepted", MaxDepth+1)
	}
}

// pieces are what the random documents of TestRandomMatches are made of:
// tokens, near-tokens and bytes that end or break strings.
var pieces = []string{
	"{", "}", "[", "]", ",", ":", " ", "\n", "\t", "\r", `"`, `\`, `"a"`, `"k":`, `\u00`, `\n`, "0", "1", "9",
	"-", "+", ".", "e", "E", "true", "false", "null", "tru", "x", "\x00", "\x1f", "\x7f", "\xff", "\xc3\xa9",
	"abcdefgh", `"abcdefghijklmnop"`, `"a\"b"`, "1.5", "-0", "1e9", `{"a":[1,2,{"b":null}]}`,
}

// TestRandomMatches compares Valid with encoding/json.Valid on documents
// made at random of pieces, valid ones mutated, and random bytes.
func TestRandomMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 200000
	if testing.Short() {
		n = 20000
	}
	var b []byte
	for k := range n {
		b = b[:0]
		switch k % 3 {
		case 0:
			for range 1 + r.IntN(12) {
				b = append(b, pieces[r.IntN(len(pieces))]...)
			}
		case 1:
			b = append(b, cases[r.IntN(len(cases))]...)
			if len(b) > 0 {
				for range 1 + r.IntN(3) {
					switch i := r.IntN(len(b)); r.IntN(3) {
					case 0:
						b[i] = pieces[r.IntN(len(pieces))][0]
					case 1:
						b = append(b[:i], b[i+1:]...)
					default:
						b = append(b[:i], append([]byte(pieces[r.IntN(len(pieces))]), b[i:]...)...)
					}
					if len(b) == 0 {
						break
					}
				}
			}
		default:
			for range r.IntN(24) {
				b = append(b, byte(r.IntN(256)))
			}
		}
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		checkSpaced(t, b)
	}
}

// checkSpaced holds Check to Valid, and its spaced to whether json.Compact
// changes b.
func checkSpaced(t *testing.T, b []byte) {
	t.Helper()
	valid, spaced := Check(b)
	if valid != Valid(b) {
		t.Fatalf("Check(%q) valid %v, Valid %v", b, valid, !valid)
	}
	if !valid {
		return
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatalf("json.Compact(%q): %v", b, err)
	}
	if want := !bytes.Equal(c.Bytes(), b); spaced != want {
		t.Fatalf("Check(%q) spaced %v, json.Compact changes it: %v", b, spaced, want)
	}
}

// TestLongStrings crosses the 8-byte steps of the string scan with every
// kind of byte at every offset.
func TestLongStrings(t *testing.T) {
	for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, 'a', '/'} {
		for at := range 20 {
			b := bytes.Repeat([]byte("x"), 20)
			b[at] = c
			doc := append(append([]byte(`"`), b...), '"')
			if got, want := Valid(doc), json.Valid(doc); got != want {
				t.Errorf("Valid(%q) = %v, encoding/json says %v", doc, got, want)
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		checkSpaced(t, b)
	})
}

// benchDoc is a message body's shape: short fields and a content of
// prose with a few escapes.
var benchDoc = []byte(`{"v":1,"space":"ab2cdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrs","from":"12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN","created_at":1764201600123,"prev":["abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrs","bbcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrs"],"type":"chat","content":{"text":"` +
	strings.Repeat(`The quick brown fox jumps over the lazy dog, \"twice\".\n`, 40) + `","n":[1,2.5,-3e2,true,null]}}`)

func BenchmarkValid(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !Valid(benchDoc) {
			b.Fatal("refused")
		}
	}
}

func BenchmarkEncodingJSONValid(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !json.Valid(benchDoc) {
			b.Fatal("refused")
		}
	}
}
