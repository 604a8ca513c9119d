package jsonx

import (
	"encoding/json"
	"testing"
)

func TestMarshal(t *testing.T) {
	b, err := Marshal(map[string]any{"html": "<b>&</b>", "raw": json.RawMessage(`{"a":"<"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"html":"<b>&</b>","raw":{"a":"<"}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Fatal("marshalled a func")
	}
}

// appendStringCases are strings AppendString must escape as Marshal does.
var appendStringCases = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnl\ncr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "héllo wörld ✓ 😀", "\u2028\u2029", "bad \xff\xfe utf8 \xc3", "\xe2\x80",
	"mixed <\u2028> \"q\" \x00 é",
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range appendStringCases {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got[1:], want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range appendStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}
