package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUI: `weft ui` prints the web view's URL with the token, which opens
// the page (the browser test in node/webui drives it); with the listener
// off it says so and fails; with --no-open it writes no redirect page.
func TestUI(t *testing.T) {
	on := newCLI(t)
	startDaemon(t, on, "--listen", "/ip4/127.0.0.1/tcp/0")
	url := strings.TrimSpace(on.OK("ui", "--no-open", "--space", "lab"))
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(url, "/?") || !strings.Contains(url, "token=") || !strings.Contains(url, "space=lab") {
		t.Fatalf("weft ui printed %q", url)
	}
	// The URL sets the session cookie and moves on to the page without
	// the token, which the cookie then opens.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	get := func(u string) (int, string) {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if status, body := get(url); status != http.StatusOK || !strings.Contains(body, `url=/?space=lab"`) {
		t.Fatalf("GET %s: %d %.200s", url, status, body)
	}
	page := url[:strings.Index(url, "/?")] + "/?space=lab"
	if status, body := get(page); status != http.StatusOK || !strings.Contains(body, "/ui/app.js") {
		t.Fatalf("GET %s: %d %.200s", page, status, body)
	}
	if _, err := os.Stat(filepath.Join(on.Home, uiOpenFile)); !os.IsNotExist(err) {
		t.Fatalf("--no-open wrote %s (%v)", uiOpenFile, err)
	}

	off := newCLI(t)
	startDaemon(t, off, "--listen", "/ip4/127.0.0.1/tcp/0", "--web", "off")
	_, errs, code := off.Run("ui", "--no-open")
	if code == 0 || !strings.Contains(errs, "--web off") {
		t.Fatalf("weft ui with the listener off: exit %d, stderr %q", code, errs)
	}
}
