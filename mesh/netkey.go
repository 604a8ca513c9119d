package mesh

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/libp2p/go-libp2p/core/pnet"
)

// NetworkKeySize is the size of a network key: libp2p's private network
// key (a pre-shared key for XSalsa20) is 32 bytes.
const NetworkKeySize = 32

// maxNetworkKeyFile bounds how much of a network key file is read; the
// base16 form is under 100 bytes.
const maxNetworkKeyFile = 1024

// NewNetworkKey returns a new random network key.
func NewNetworkKey() (pnet.PSK, error) {
	k := make(pnet.PSK, NetworkKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("network key: %w", err)
	}
	return k, nil
}

// EncodeNetworkKey returns k in the standard key file format that other
// libp2p programs (IPFS's swarm.key) read too:
//
//	/key/swarm/psk/1.0.0/
//	/base16/
//	<64 hex digits>
func EncodeNetworkKey(k pnet.PSK) []byte {
	return fmt.Appendf(nil, "/key/swarm/psk/1.0.0/\n/base16/\n%s\n", hex.EncodeToString(k))
}

// WriteNetworkKey writes a new random network key to path, a file that
// must not exist yet, with mode 0600.
func WriteNetworkKey(path string) (pnet.PSK, error) {
	k, err := NewNetworkKey()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("network key: %w", err)
	}
	_, err = f.Write(EncodeNetworkKey(k))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("network key: write %s: %w", path, err)
	}
	return k, nil
}

// LoadNetworkKey reads a network key file (the format of EncodeNetworkKey;
// base64 and binary bodies are read too). Like the identity file, a file
// open to other users is refused.
func LoadNetworkKey(path string) (pnet.PSK, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("network key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("network key: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("network key: %s has mode %04o, open to other users; fix with: chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxNetworkKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("network key: read %s: %w", path, err)
	}
	if len(b) > maxNetworkKeyFile {
		return nil, fmt.Errorf("network key: %s is not a network key (larger than %d bytes)", path, maxNetworkKeyFile)
	}
	k, err := pnet.DecodeV1PSK(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("network key: %s is not a network key (make one with weft network-key new): %w", path, err)
	}
	return k, nil
}

// NetworkKeyFingerprint names a network key without revealing it: the
// first 8 bytes of its SHA-256, in hex. Two nodes whose fingerprints differ
// cannot connect.
func NetworkKeyFingerprint(k pnet.PSK) string {
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:8])
}

var errNetworkKeySize = errors.New("network key must be 32 bytes")
