package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/weftmesh/weft/internal/version"
)

// TestVersion: `weft version` prints the release and, when the go command
// stamped the binary with a commit (go version -m shows it), that commit.
func TestVersion(t *testing.T) {
	c := newCLI(t)
	bin := c.Bin
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	want := "weft " + version.Release
	for _, line := range strings.Split(string(meta), "\n") {
		if rev, ok := strings.CutPrefix(strings.TrimSpace(line), "build\tvcs.revision="); ok {
			want += " (" + rev[:7]
			if strings.Contains(string(meta), "vcs.modified=true") {
				want += "+dirty"
			}
			want += ")"
		}
	}
	out := c.OK("version")
	if strings.TrimSpace(out) != want {
		t.Errorf("weft version printed %q, want %q (go version -m:\n%s)", out, want, meta)
	}
}
