// Package jsonxtest holds what the tests of weft's hand-written JSON
// readers share: each reads a plain form by hand and leaves everything
// else to encoding/json, and must read what it accepts as encoding/json
// does.
package jsonxtest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// MatchesJSON fails t if parse accepts b (reports true) and encoding/json
// rejects b or reads a different value from it.
func MatchesJSON[T any](t testing.TB, b []byte, parse func([]byte, *T) bool) {
	t.Helper()
	var fast T
	if !parse(b, &fast) {
		return
	}
	var slow T
	if err := json.Unmarshal(b, &slow); err != nil {
		t.Fatalf("the hand reader accepted %q, which encoding/json rejects: %v", b, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("the hand reader read %q as %#v, encoding/json as %#v", b, fast, slow)
	}
}

// Table checks parse on docs with MatchesJSON, and that it takes (reports
// true for) the first plain of them, which are in the plain form, and
// none of the others.
func Table[T any](t testing.TB, docs []string, plain int, parse func([]byte, *T) bool) {
	t.Helper()
	for i, d := range docs {
		MatchesJSON(t, []byte(d), parse)
		var v T
		if took := parse([]byte(d), &v); took != (i < plain) {
			t.Errorf("the hand reader took %q: %v, want %v", d, took, i < plain)
		}
	}
}
