package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// parseObjectSeeds are documents ParseObject's two readers must agree on.
var parseObjectSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, "{\n\t\"a\" :\r 1 , \"b\":[1,{\"c\":\"}\"}]}\n",
	`{"a":1,"a":2}`, `{"Type":"text"}`, `{"ſpace":1}`, `{"t\u0079pe":"x","type":"y"}`,
	`{"a":"\"}\\","b":{"c":[true,false,null,-1.5e3]}}`, `{"a":{}}{}`, `[1]`, `"x"`, `1`,
	`{"a":1,}`, `{"a" 1}`, `{"\u00e9":1,"é":2}`, `{"k":"\ud800"}`, `{"":0}`, `null`,
	`{"a":[[],[[]]],"b":"[{"}`, "{\"\x9b\":0}", `{"v":1,"space":"s","content":{"text":"hi"}}`,
}

// TestParseObjectReaders: the scanner ParseObject uses for valid documents
// reads every seed as the Decoder does: the same members, the same error.
func TestParseObjectReaders(t *testing.T) {
	for _, s := range parseObjectSeeds {
		if msg := compareObjectReaders([]byte(s)); msg != "" {
			t.Error(msg)
		}
	}
}

// FuzzParseObject: the scanner and the Decoder agree on every document.
func FuzzParseObject(f *testing.F) {
	for _, s := range parseObjectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if msg := compareObjectReaders(b); msg != "" {
			t.Error(msg)
		}
	})
}

func compareObjectReaders(b []byte) string {
	known := bodyFields
	want, werr := decodeObject(b, known)
	got, gerr := ParseObject(b, known)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		return fmt.Sprintf("%q: error %v, the Decoder says %v", b, gerr, werr)
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%q: %d members, the Decoder reads %d", b, len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			return fmt.Sprintf("%q: member %q = %s, the Decoder reads %s", b, k, g, v)
		}
	}
	if werr == nil && !json.Valid(b) {
		return fmt.Sprintf("%q: read, yet not valid JSON", b)
	}
	return ""
}
