package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/weftmesh/weft/internal/atomicfile"
	"github.com/weftmesh/weft/node/web"
)

// uiOpenFile is the file in the daemon's home that `weft ui` has the
// browser open: a page (mode 0600) that redirects to the web view's URL,
// so that the token never appears on a command line, where other users of
// the machine could read it (ps, /proc).
const uiOpenFile = "ui.html"

// runUI prints the address of the daemon's web view, with the token that
// admits the browser, and opens it on a desktop: `weft ui [--space NAME]
// [--no-open]`.
func runUI(ctx context.Context, e *env, args []string) error {
	fs := e.flags("ui")
	space := fs.String("space", "", "open this space")
	noOpen := fs.Bool("no-open", false, "print the address only; do not open a browser")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	n, err := e.client().Node(ctx)
	if err != nil {
		return err
	}
	if n.Web == "" {
		return errors.New("the daemon serves no web view: it was started with --web off (restart it without)")
	}
	home := n.Home
	if home == "" {
		home = e.home
	}
	b, err := os.ReadFile(filepath.Join(home, web.TokenFile))
	if err != nil {
		return fmt.Errorf("read the web view's token: %w", err)
	}
	u, err := url.Parse(n.Web + "/")
	if err != nil {
		return fmt.Errorf("the daemon's web address %q: %w", n.Web, err)
	}
	q := url.Values{web.TokenParam: {strings.TrimSpace(string(b))}}
	if *space != "" {
		q.Set("space", *space) // kept when the page drops the token
	}
	u.RawQuery = q.Encode()
	fmt.Fprintln(e.stdout, u.String())
	if *noOpen {
		return nil
	}
	opener := browserOpener()
	if opener == "" {
		return nil // no desktop: the address printed is the answer
	}
	page := filepath.Join(home, uiOpenFile)
	redirect := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` +
		html.EscapeString(u.String()) + `"><title>weft</title>` + "\n"
	if err := atomicfile.Write(page, []byte(redirect)); err != nil {
		return fmt.Errorf("write %s: %w", page, err)
	}
	cmd := exec.Command(opener, (&url.URL{Scheme: "file", Path: page}).String())
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "could not open a browser (%v): open the address above\n", err)
		return nil
	}
	return cmd.Process.Release() // the opener's exit says nothing about the page
}

// browserOpener returns the desktop's command that opens a URL, or "" on
// a machine without a desktop session.
func browserOpener() string {
	name := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		return ""
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return ""
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		return ""
	}
	return name
}
