package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
)

// Tests of the rough edges a newcomer hit (issue 17): each runs the real
// weft binary as a user would.

// oneLineErr checks that a failed command printed exactly one line on
// stderr, containing want, and returns it.
func oneLineErr(t *testing.T, stderr, want string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("stderr is %d line(s), want one line containing %q:\n%s", len(lines), want, stderr)
	}
	return lines[0]
}

// TestListenPortTaken: a daemon refuses a TCP port another weft daemon
// listens on (libp2p listens with SO_REUSEPORT, and two daemons shared a
// port) or another program does, and an address no interface has, each
// with one line on stderr (not libp2p's framework log lines first).
func TestListenPortTaken(t *testing.T) {
	a := newCLI(t)
	addr := testbed.FreeListen(t)
	startDaemon(t, a, "--listen", addr)

	b := newCLI(t)
	_, errs, code, _ := b.RunWithin(30*time.Second, "daemon", "--no-mdns", "--listen", addr)
	if code != 1 {
		t.Fatalf("a second daemon on %s: exit %d, want 1; stderr:\n%s", addr, code, errs)
	}
	oneLineErr(t, errs, "the port is in use")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other := "/ip4/127.0.0.1/tcp/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_, errs, code, _ = b.RunWithin(30*time.Second, "daemon", "--no-mdns", "--listen", other)
	if code != 1 {
		t.Fatalf("a daemon on a port another program holds: exit %d; stderr:\n%s", code, errs)
	}
	oneLineErr(t, errs, "the port is in use")

	// 192.0.2.1 (TEST-NET-1) is no interface's address.
	_, errs, code, _ = b.RunWithin(30*time.Second, "daemon", "--no-mdns", "--listen", "/ip4/192.0.2.1/tcp/0")
	if code != 1 {
		t.Fatalf("a daemon on an address of no interface: exit %d; stderr:\n%s", code, errs)
	}
	oneLineErr(t, errs, "no interface of this machine has that address")
}

// TestSecondDaemonSameHome: a second daemon on a home in use says which
// daemon holds it, by its process ID.
func TestSecondDaemonSameHome(t *testing.T) {
	a := newCLI(t)
	d := startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	_, errs, code, _ := a.RunWithin(30*time.Second, "daemon", "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0")
	if code != 1 {
		t.Fatalf("second daemon: exit %d; stderr:\n%s", code, errs)
	}
	oneLineErr(t, errs, "a weft daemon already runs with home "+a.Home+" (pid "+strconv.Itoa(d.Pid())+")")
	// The first one is unharmed.
	a.OK("id")
}

// TestLongHome: a home whose socket path is over the Unix socket limit is
// refused by the daemon and the clients with what is wrong and what to do
// (the system says "invalid argument").
func TestLongHome(t *testing.T) {
	home := filepath.Join(testbed.Home(t), strings.Repeat("h", 110))
	c := cli{testbed.CLI{T: t, Bin: testbed.Weft(t), Home: home}}
	_, errs, code, _ := c.RunWithin(30*time.Second, "daemon", "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0")
	if code != 1 {
		t.Fatalf("daemon: exit %d; stderr:\n%s", code, errs)
	}
	oneLineErr(t, errs, "too long for a Unix socket")
	if _, err := os.Stat(filepath.Join(home, "store")); err == nil {
		t.Errorf("the daemon opened its store before refusing the home")
	}
	_, errs, code = c.Run("id")
	if code != 1 {
		t.Fatalf("weft id: exit %d", code)
	}
	oneLineErr(t, errs, "use a home with a shorter path")
}

// TestConnectWrongPort: `weft connect` to a peer it is connected to
// already, at a port the peer does not listen on, fails and says so.
func TestConnectWrongPort(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	wrong := "/ip4/127.0.0.1/tcp/" + strconv.Itoa(port) + "/p2p/" + aID
	out, errs, code := b.Run("connect", wrong)
	if code != 1 || strings.Contains(out, "connected") {
		t.Fatalf("connect to a wrong port: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLineErr(t, errs, "not reachable at")
	// The right address still works.
	_, aAddrs := a.id()
	b.OK("connect", aAddrs[0])
}

// TestBootstrapLater: a daemon started before its bootstrap peer connects
// to it within seconds of the peer starting (not libp2p's dial backoff of
// minutes), and logs that it did.
func TestBootstrapLater(t *testing.T) {
	a := newCLI(t)
	aListen := testbed.FreeListen(t)
	da := startDaemon(t, a, "--listen", aListen)
	aAddr := aListen + "/p2p/" + da.ID
	if err := da.Stop(); err != nil {
		t.Fatal(err)
	}
	b := newCLI(t)
	db := startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", aAddr)
	// Let b fail a few dials first, as it would while a is down for a while.
	testbed.Poll(t, 30*time.Second, "b to retry its bootstrap peer", func() (bool, string) {
		return strings.Contains(db.Log.String(), "bootstrap peer unreachable"), db.Log.String()
	})
	time.Sleep(5 * time.Second) // the time a is away: b's dials fail (not a sync wait)
	startDaemon(t, a, "--listen", aListen)
	testbed.Poll(t, 20*time.Second, "b connected to a", func() (bool, string) {
		return strings.Contains(db.Log.String(), "connected to bootstrap peer"), db.Log.String()
	})
	b.waitConnected(da.ID)
}

// TestNoMulticastLogs: on a host with no multicast interface (a network
// namespace with only loopback), every line the daemon logs is in its own
// format (zeroconf's too), and it says mdns=false once mDNS could not
// start. Needs root (unshare -n).
func TestNoMulticastLogs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace (unshare -n)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	wrap := func(name string, args ...string) []string {
		return append([]string{unshare, "-n", "sh", "-c", `ip link set lo up && exec "$@"`, "sh", name}, args...)
	}
	d := testbed.StartVia(t, wrap, testbed.Home(t), "--listen", "/ip4/127.0.0.1/tcp/0")
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	log := d.Log.String()
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("a log line not in the daemon's format: %q", line)
		}
	}
	if !logHas(log, `msg="mDNS unavailable`) || !logHas(log, `msg="mesh started"`, "mdns=false") {
		t.Errorf("want mDNS unavailable, then mesh started with mdns=false:\n%s", log)
	}
}
