package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClosedMeshCLI: `weft network-key new` writes a key file (0600, the
// standard format) and never overwrites one; a daemon with --network-key
// refuses a QUIC listen address with a clear error; keyed daemons connect,
// and one without the key cannot; a daemon with --peers-file and
// --allow-peer lets in the peers listed and refuses one with the key that
// is not.
func TestClosedMeshCLI(t *testing.T) {
	a, b, c, d := newCLI(t), newCLI(t), newCLI(t), newCLI(t)
	key := filepath.Join(t.TempDir(), "network.key")
	out := a.OK("network-key", "new", key)
	if !strings.Contains(out, "fingerprint") {
		t.Errorf("network-key new printed %q", out)
	}
	st, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(key); !strings.HasPrefix(string(b), "/key/swarm/psk/1.0.0/\n/base16/\n") {
		t.Errorf("key file %q", b)
	}
	if _, errs, code := a.Run("network-key", "new", key); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("network-key new over an existing file: exit %d, %q", code, errs)
	}
	if _, errs, code := a.Run("daemon", "--no-mdns", "--network-key", key, "--listen", "/ip4/127.0.0.1/udp/0/quic-v1"); code == 0 || !strings.Contains(errs, "TCP only") {
		t.Errorf("a keyed daemon on QUIC: exit %d, %q", code, errs)
	}

	tcp := "/ip4/127.0.0.1/tcp/0"
	startDaemon(t, a, "--listen", tcp, "--network-key", key)
	startDaemon(t, c, "--listen", tcp, "--network-key", key)
	startDaemon(t, d, "--listen", tcp)
	aID, _ := a.id()
	cID, _ := c.id()
	peers := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(peers, []byte("# the team\n"+aID+" alice\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, b, "--listen", tcp, "--network-key", key, "--peers-file", peers, "--allow-peer", cID)
	_, bAddrs := b.id()
	_, aAddrs := a.id()

	a.OK("connect", bAddrs[0]) // on the list, with the key
	c.OK("connect", bAddrs[0]) // --allow-peer, with the key
	if _, errs, code := d.Run("connect", aAddrs[0]); code == 0 {
		t.Error("a daemon without the key connected to a keyed one")
	} else {
		t.Logf("without the key: %s", strings.TrimSpace(errs))
	}
	e := newCLI(t)
	startDaemon(t, e, "--listen", tcp, "--network-key", key)
	if _, errs, code := e.Run("connect", bAddrs[0]); code == 0 {
		t.Error("a keyed daemon off the list connected to one with a peers file")
	} else {
		t.Logf("off the list: %s", strings.TrimSpace(errs))
	}
}
