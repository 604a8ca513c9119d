package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperSocketEnv, when set, makes TestPeerCredHelper act as a client of
// the socket it names (run as another user by TestSocketPeerCredentials).
const helperSocketEnv = "WEFT_TEST_PEERCRED_SOCKET"

// TestPeerCredHelper is not a test: run with helperSocketEnv set, it asks
// the daemon on that socket for GET /v1/node and prints the status and
// body, or the error.
func TestPeerCredHelper(t *testing.T) {
	socket := os.Getenv(helperSocketEnv)
	if socket == "" {
		t.Skip("a helper of TestSocketPeerCredentials")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://weft/v1/node", nil)
	resp, err := rawHTTP(socket).Do(req)
	if err != nil {
		fmt.Printf("result: error %v\n", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("result: status %d %s\n", resp.StatusCode, body)
}

// runAs runs TestPeerCredHelper as uid:gid against socket and returns
// what it printed after "result: ".
func runAs(t *testing.T, exe, socket string, uid, gid uint32) string {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestPeerCredHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperSocketEnv+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as %d:%d: %v\n%s", uid, gid, err, out)
	}
	_, result, ok := strings.Cut(string(out), "result: ")
	if !ok {
		t.Fatalf("helper as %d:%d printed no result:\n%s", uid, gid, out)
	}
	result, _, _ = strings.Cut(result, "\n")
	return result
}

// helperBinary copies the test binary where another user may run it.
func helperBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := tempHome(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "helper.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestSocketPeerCredentials: the socket admits only the daemon's user,
// root and the configured group, by the peer's credentials: with the
// socket opened to everyone (chmod 666 and a 755 home) another user is
// refused with a 403 all the same, while the daemon's own user is served.
// A member of the socket group (--socket-group) is served without any
// chmod. Needs root to run a process as another user.
func TestSocketPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user (uid 65534)")
	}
	const nobody = 65534
	exe := helperBinary(t)

	d, c := startNode(t, nil)
	socket := d.cfg.SocketPath()
	for path, mode := range map[string]os.FileMode{d.cfg.Home: 0o755, socket: 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	got := runAs(t, exe, socket, nobody, nobody)
	if !strings.HasPrefix(got, "status 403 ") || !strings.Contains(got, `"forbidden"`) || !strings.Contains(got, "uid 65534") {
		t.Errorf("another user on a chmod 666 socket: %s, want 403 forbidden naming uid 65534", got)
	}
	if _, err := c.Node(context.Background()); err != nil {
		t.Errorf("the daemon's own user: %v", err)
	}
	if got := runAs(t, exe, socket, 0, 0); !strings.HasPrefix(got, "status 200 ") {
		t.Errorf("root: %s, want 200", got)
	}

	g, _ := startNode(t, func(c *Config) { c.SocketGroup = "nogroup" })
	if got := runAs(t, exe, g.cfg.SocketPath(), nobody, nobody); !strings.HasPrefix(got, "status 200 ") {
		t.Errorf("a member of the socket group: %s, want 200", got)
	}
	if got := runAs(t, exe, g.cfg.SocketPath(), nobody-1, nobody-1); !strings.Contains(got, "permission denied") {
		t.Errorf("another user, socket group set: %s, want the file mode to refuse it", got)
	}
}

func TestCredListenerAdmits(t *testing.T) {
	l := &credListener{uid: 1000, group: -1}
	lg := &credListener{uid: 1000, group: 2000}
	for _, tc := range []struct {
		name string
		l    *credListener
		p    peerCred
		want bool
	}{
		{"own user", l, peerCred{uid: 1000, gid: 1000}, true},
		{"root", l, peerCred{uid: 0, gid: 0}, true},
		{"another user", l, peerCred{uid: 1001, gid: 1001}, false},
		{"another user in the gid of a group not configured", l, peerCred{uid: 1001, gid: 2000}, false},
		{"member of the socket group by gid", lg, peerCred{uid: 1001, gid: 2000}, true},
		{"another user, socket group set", lg, peerCred{uid: 1001, gid: 1001}, false},
	} {
		if got := tc.l.admits(tc.p); got != tc.want {
			t.Errorf("%s: admits %+v = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}
