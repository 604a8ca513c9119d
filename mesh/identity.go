package mesh

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// maxKeyFile bounds how much of an identity file is read.
const maxKeyFile = 4096

// LoadOrCreateIdentity reads the node's Ed25519 libp2p private key from path
// (crypto.MarshalPrivateKey format), or creates one if the file does not
// exist: the file with mode 0600, a missing parent directory with 0700.
// A key another user could have planted is refused, with an error that
// names the file and the fix: a file readable or writable by group or
// others, a file another user owns, or one in a directory that other users
// may write and that is not ours.
func LoadOrCreateIdentity(path string) (crypto.PrivKey, error) {
	key, err := loadIdentity(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("identity: create directory: %w", err)
	}
	if err := checkKeyDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	key, _, err = crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity: generate key: %w", err)
	}
	b, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("identity: marshal key: %w", err)
	}
	created, err := writeNew(path, b)
	if err != nil {
		return nil, fmt.Errorf("identity: write %s: %w", path, err)
	}
	if !created { // another process created it first: use theirs
		return loadIdentity(path)
	}
	return key, nil
}

func loadIdentity(path string) (crypto.PrivKey, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("identity: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("identity: key file %s has mode %04o, open to other users; fix with: chmod 600 %s", path, perm, path)
	}
	if err := checkKeyOwner(path, st); err != nil {
		return nil, err
	}
	if err := checkKeyDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("identity: read %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("identity: %s is not a libp2p private key (larger than %d bytes)", path, maxKeyFile)
	}
	key, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("identity: %s is not a libp2p private key (corrupt? move it away to make a new identity): %w", path, err)
	}
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("identity: %s holds a %s key, weft needs Ed25519", path, key.Type())
	}
	return key, nil
}

// writeNew writes b to a new file at path with mode 0600, atomically: the
// file appears complete or not at all. It reports false, and writes
// nothing, if path already exists.
func writeNew(path string, b []byte) (bool, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".identity-*") // mode 0600
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	// A hard link never replaces an existing file, unlike rename.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		// File systems without hard links: fall back to rename.
		if err := os.Rename(tmp.Name(), path); err != nil {
			return false, err
		}
	}
	return true, nil
}
