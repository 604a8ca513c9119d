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

// nobody is the uid and gid of the user "nobody" on Debian.
const nobody = 65534

// TestIdentityOwnership: a key another user owns, or one in a directory
// other users may write that is not ours, is refused with an error naming
// the path and the fix, and left alone. A world-writable home of our own
// is accepted (the key in it is still ours and 0600). Needs root to chown.
func TestIdentityOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user (uid 65534)")
	}
	good, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	goodBytes, _ := crypto.MarshalPrivateKey(good)
	for _, tc := range []struct {
		name      string
		dirOwner  int
		dirMode   os.FileMode
		keyOwner  int // -1: no key file
		wantErr   string
		wantNamed string // "key" or "dir": which path the error names
	}{
		{"key owned by another user", 0, 0o700, nobody, "owned by uid 65534", "key"},
		{"key in a world-writable dir of another user", nobody, 0o777, 0, "other users could plant a key", "dir"},
		{"key in a group-writable dir of another user", nobody, 0o770, 0, "other users could plant a key", "dir"},
		{"new key in a world-writable dir of another user", nobody, 0o777, -1, "other users could plant a key", "dir"},
		{"key in a world-writable dir of our own", 0, 0o777, 0, "", ""},
		{"key in a read-only dir of another user", nobody, 0o755, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "home")
			path := filepath.Join(dir, "identity.key")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.keyOwner >= 0 {
				if err := os.WriteFile(path, goodBytes, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(path, tc.keyOwner, tc.keyOwner); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chown(dir, tc.dirOwner, tc.dirOwner); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			k, err := LoadOrCreateIdentity(path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !k.Equals(good) {
					t.Fatal("loaded another key than the one in the file")
				}
				return
			}
			named := map[string]string{"key": path, "dir": dir}[tc.wantNamed]
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), named) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, named, tc.wantErr)
			}
			b, rerr := os.ReadFile(path)
			if tc.keyOwner >= 0 && string(b) != string(goodBytes) {
				t.Error("the refused key file was modified")
			}
			if tc.keyOwner < 0 && rerr == nil {
				t.Error("a key was created in a directory other users may write")
			}
		})
	}
}
