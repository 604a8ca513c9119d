package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestReviewExample: the README walkthrough's handler,
// examples/review/review.sh, serves calls through weft handle.
func TestReviewExample(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()
	script, err := filepath.Abs("../../examples/review/review.sh")
	if err != nil {
		t.Fatal(err)
	}
	b.OK("trust", "add", aID, "--name", "alice")
	startHandler(t, b, "review", "--exec", script)
	for _, tc := range []struct {
		input, verdict string
		marks          int
	}{
		{`{"pr": 42, "diff": "+ x := 1"}`, "approve", 0},
		{`{"pr": 43, "diff": "+ x := 1 // TODO: name it\n+ y := 2 // FIXME"}`, "changes_requested", 2},
	} {
		var out struct {
			Verdict string
			Marks   int
		}
		if err := json.Unmarshal([]byte(a.OK("invoke", bID, "review", "--data", tc.input)), &out); err != nil {
			t.Fatal(err)
		}
		if out.Verdict != tc.verdict || out.Marks != tc.marks {
			t.Errorf("review of %s: %+v, want %s with %d marks", tc.input, out, tc.verdict, tc.marks)
		}
	}
}
