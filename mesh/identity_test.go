package mesh

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestLoadOrCreateIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	path := filepath.Join(dir, "identity.key")

	k1, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if k1.Type() != crypto.Ed25519 {
		t.Fatalf("key type %s, want Ed25519", k1.Type())
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode %04o, want 0600", perm)
	}
	dst, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := dst.Mode().Perm(); perm != 0o700 {
		t.Errorf("created directory mode %04o, want 0700", perm)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".identity-*")); len(tmp) != 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}

	k2, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := peer.IDFromPrivateKey(k1)
	id2, _ := peer.IDFromPrivateKey(k2)
	if id1 != id2 {
		t.Errorf("reloaded identity %s, want %s", id2, id1)
	}
}

func TestLoadIdentityErrors(t *testing.T) {
	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secpBytes, err := crypto.MarshalPrivateKey(secp)
	if err != nil {
		t.Fatal(err)
	}
	good, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	goodBytes, _ := crypto.MarshalPrivateKey(good)

	for _, tc := range []struct {
		name    string
		data    []byte
		mode    os.FileMode
		wantErr string
	}{
		{"corrupt", []byte("not a key at all"), 0o600, "not a libp2p private key"},
		{"empty", nil, 0o600, "not a libp2p private key"},
		{"huge", make([]byte, 10000), 0o600, "larger than"},
		{"secp256k1", secpBytes, 0o600, "weft needs Ed25519"},
		{"group readable", goodBytes, 0o640, "chmod 600"},
		{"world readable", goodBytes, 0o604, "chmod 600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "identity.key")
			if err := os.WriteFile(path, tc.data, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil { // beat the umask
				t.Fatal(err)
			}
			_, err := LoadOrCreateIdentity(path)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q should name %s and contain %q", err, path, tc.wantErr)
			}
			// The bad file must be left alone, never replaced.
			b, _ := os.ReadFile(path)
			if string(b) != string(tc.data) {
				t.Error("bad identity file was modified")
			}
		})
	}
}
