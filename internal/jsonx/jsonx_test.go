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
