// Package atomicfile writes small private files (keys, tokens, cards)
// so that a reader sees the old content or the new, never a part.
package atomicfile

import "os"

// Write writes b to path with mode 0600, replacing it atomically. The
// temporary file beside it is created anew, never opened through a
// planted symlink.
func Write(path string, b []byte) error {
	tmp := path + ".new"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
