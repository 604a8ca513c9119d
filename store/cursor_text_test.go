package store_test

import (
	"testing"

	"github.com/weftmesh/weft/store"
)

// TestCursorAppendText: AppendText appends String's text, nothing for the
// start, and the text parses back.
func TestCursorAppendText(t *testing.T) {
	for _, c := range []store.Cursor{0, 1, 255, 1 << 40, ^store.Cursor(0)} {
		got, err := c.AppendText([]byte("x"))
		if err != nil || string(got) != "x"+c.String() {
			t.Errorf("Cursor(%d).AppendText = %q, %v; want %q", c, got, err, "x"+c.String())
		}
		if back, err := store.ParseCursor(string(got[1:])); err != nil || back != c {
			t.Errorf("ParseCursor(%q) = %d, %v; want %d", got[1:], back, err, c)
		}
	}
}
