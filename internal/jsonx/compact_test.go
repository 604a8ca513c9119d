package jsonx

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// compactCases are values with and without white space, in and out of
// strings, valid and not.
var compactCases = []string{
	`{}`, `{"a":1}`, `{ "a" : 1 }`, "{\n\t\"a\": [1, 2,\r\n3]\n}", `"a b"`, `" "`, `{"t":"x y\n z"}`,
	`{"t":"x \" y"}`, `{"t":"x \\" }`, `[1,2]`, `[1, 2]`, ` 1`, `1 `, `null`, `{"a":}`, `{"a" 1}`,
	`{"a":1`, `"unterminated`, "\"a\x01b\"", `{"a":"b"} x`, ``, ` `, `[ ]`, `{"a":"\u00e9 \/"}`,
	`{"t":"` + strings.Repeat("quick brown fox ", 20) + `"}`,
}

func checkCompact(t *testing.T, v []byte) {
	t.Helper()
	prefix := []byte("prefix:")
	got, gerr := AppendCompact(bytes.Clone(prefix), v)
	var want bytes.Buffer
	want.Write(prefix)
	werr := json.Compact(&want, v)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("AppendCompact(%q): error %v, json.Compact's %v", v, gerr, werr)
	}
	if werr != nil {
		if string(got) != string(prefix) {
			t.Fatalf("AppendCompact(%q) failed but changed dst to %q", v, got)
		}
		return
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("AppendCompact(%q) = %q, json.Compact %q", v, got, want.Bytes())
	}
}

func TestAppendCompactMatchesEncodingJSON(t *testing.T) {
	for _, c := range compactCases {
		checkCompact(t, []byte(c))
	}
	pieces := []string{"{", "}", "[", "]", ",", ":", " ", "\n", "\t", `"`, `\`, `"a b"`, `"k":`, "1", "-", "true", "null", "\x01", "\xff", "x"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 50000 {
		var b []byte
		if r.IntN(2) == 0 {
			b = []byte(compactCases[r.IntN(len(compactCases))])
			if len(b) > 0 {
				i := r.IntN(len(b))
				b = append(b[:i:i], append([]byte(pieces[r.IntN(len(pieces))]), b[i:]...)...)
			}
		} else {
			for range 1 + r.IntN(10) {
				b = append(b, pieces[r.IntN(len(pieces))]...)
			}
		}
		checkCompact(t, b)
	}
}

func FuzzAppendCompact(f *testing.F) {
	for _, c := range compactCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, v []byte) { checkCompact(t, v) })
}
