package mesh

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetworkKeyFile: a written key file has mode 0600 and the standard
// format, reads back as the same key, is never overwritten, and is refused
// when open to other users or not a key.
func TestNetworkKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "swarm.key")
	k, err := WriteNetworkKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if lines := strings.Split(string(b), "\n"); len(lines) != 4 || lines[0] != "/key/swarm/psk/1.0.0/" || lines[1] != "/base16/" || len(lines[2]) != 64 {
		t.Errorf("file content %q", b)
	}
	got, err := LoadNetworkKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, k) || len(k) != NetworkKeySize {
		t.Errorf("read back %x, wrote %x", got, k)
	}
	if _, err := WriteNetworkKey(path); err == nil {
		t.Error("an existing key file was overwritten")
	}
	if again, _ := LoadNetworkKey(path); !bytes.Equal(again, k) {
		t.Error("the key changed")
	}
	if NetworkKeyFingerprint(k) == NetworkKeyFingerprint(make([]byte, 32)) || len(NetworkKeyFingerprint(k)) != 16 {
		t.Errorf("fingerprint %q", NetworkKeyFingerprint(k))
	}

	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadNetworkKey(open); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file open to others: %v", err)
	}
	junk := filepath.Join(dir, "junk.key")
	if err := os.WriteFile(junk, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadNetworkKey(junk); err == nil || !strings.Contains(err.Error(), "not a network key") {
		t.Errorf("a file that is not a key: %v", err)
	}
}
