package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	// A symlink planted where the temporary file goes is replaced, not
	// followed.
	target := filepath.Join(dir, "target")
	if err := os.Symlink(target, path+".new"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first", "second"} {
		if err := Write(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
		}
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the planted symlink's target was written: %v", err)
	}
	if _, err := os.Lstat(path + ".new"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}
