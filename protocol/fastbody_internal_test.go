package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// readBodySeeds are bodies whose fields readBody must read as
// json.Unmarshal does (or leave to it).
var readBodySeeds = []string{
	`{"v":1,"space":"` + SpaceID("s").String() + `","from":"12D3KooW","created_at":1700000000000,"type":"text","content":{"text":"hi"}}`,
	`{"v":1,"prev":[],"content":{}}`,
	`{"v":1,"prev":null,"refs":null,"meta":null,"content":null}`,
	`{"v":1,"prev":[ "` + SpaceID("a").String() + `" , "` + SpaceID("b").String() + `" ],"content":{}}`,
	`{"v":1,"prev":["` + SpaceID("a").String() + `",1],"content":{}}`,
	`{"v":1,"prev":["nope"],"content":{}}`,
	`{"v":1,"prev":"` + SpaceID("a").String() + `","content":{}}`,
	`{"v":1.0,"content":{}}`, `{"v":1e0,"content":{}}`, `{"v":-0,"content":{}}`,
	`{"v":"1","content":{}}`, `{"v":99999999999999999999,"content":{}}`, `{"v":true}`,
	`{"created_at":-5,"ttl":9223372036854775807}`, `{"ttl":9223372036854775808}`,
	`{"from":"a\u0062c","type":"t\"","content":{}}`, `{"from":1}`, `{"type":["x"]}`,
	`{"space":"x"}`, `{"space":null,"from":null,"v":null,"created_at":null}`, `{"space":7}`,
	`{"refs":{"messages":["` + SpaceID("r").String() + `"],"nodes":["n"]},"meta":{"k":"v"}}`,
	`{"refs":{"messages":"x"}}`, `{"meta":{"k":1}}`, `{"meta":[]}`, `{"refs":[]}`,
	`{"x":{"y":[1,"\u00e9"]},"content":{"a":"}"}}`, `{"content":"x"}`, `{"content":[1]}`,
	`{"v":1,"content":{"a":1}} `, ` {"v" : 1 , "content" : { } } `,
}

// compareReadBody checks readBody against json.Unmarshal for b, if parse
// would read it (UTF-8 that checkTopLevel accepts); "" if they agree.
func compareReadBody(b []byte) string {
	if !utf8.Valid(b) {
		return ""
	}
	fields, err := checkTopLevel(b)
	if err != nil || fields == nil {
		return ""
	}
	got, ok := readBody(fields)
	if !ok {
		return "" // left to json.Unmarshal
	}
	var want body
	if err := json.Unmarshal(b, &want); err != nil {
		return "readBody read " + string(b) + ", json.Unmarshal: " + err.Error()
	}
	if !reflect.DeepEqual(got, want) {
		return "readBody of " + string(b) + " differs from json.Unmarshal"
	}
	return ""
}

// TestReadBody: readBody reads each seed as json.Unmarshal does, and
// reads the common shapes itself.
func TestReadBody(t *testing.T) {
	for _, s := range readBodySeeds {
		if msg := compareReadBody([]byte(s)); msg != "" {
			t.Error(msg)
		}
	}
	fields, err := checkTopLevel([]byte(readBodySeeds[3]))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readBody(fields); !ok {
		t.Error("readBody left a body of plain fields to json.Unmarshal")
	}
}

// FuzzReadBody: readBody never reads a body otherwise than json.Unmarshal.
func FuzzReadBody(f *testing.F) {
	for _, s := range readBodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if msg := compareReadBody(b); msg != "" {
			t.Fatal(msg)
		}
	})
}
