package daemon

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftmesh/weft/node/web"
)

// TestWebListener: with WebListen the daemon serves the loopback HTTP
// listener, writes its token (mode 0600) and admits only requests that
// carry it; without, it serves none.
func TestWebListener(t *testing.T) {
	n, _ := startNode(t, func(c *Config) { c.WebListen = "127.0.0.1:0" })
	if n.WebAddr() == "" || n.Web() == nil {
		t.Fatal("no web listener")
	}
	n.Web().Handle("/probe", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "probe") }), web.Bearer)
	path := filepath.Join(n.cfg.Home, web.TokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(b))
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer x", 401}, {"Bearer " + token, 200}} {
		req, _ := http.NewRequest("GET", "http://"+n.WebAddr()+"/probe", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("auth %q: status %d, want %d", c.auth, resp.StatusCode, c.want)
		}
	}
	off, _ := startNode(t, nil)
	if off.WebAddr() != "" || off.Web() != nil {
		t.Fatal("web listener without WebListen")
	}
}
