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
