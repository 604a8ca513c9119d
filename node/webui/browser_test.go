package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

func TestMain(m *testing.M) { testbed.Main(m) }

var absentPeer string

// absent returns the ID of a peer that no daemon runs.
func absent(t *testing.T) string {
	t.Helper()
	if absentPeer == "" {
		_, pub, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		absentPeer = id.String()
	}
	return absentPeer
}

// chromium returns the path of a Chromium (WEFT_CHROMIUM, or Debian's
// chromium package), or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WEFT_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("WEFT_CHROMIUM: %v", err)
		}
		return p
	}
	// Debian's /usr/bin/chromium is a shell wrapper around this binary.
	for _, p := range []string{"/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("no Chromium to drive the web view with: install Debian's (apt-get install -y chromium) or set WEFT_CHROMIUM")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// tab's context, cancelled (and the browser ended) when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium(t), err)
	}
	return ctx
}

// run runs chromedp actions, bounded in time.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates the JavaScript expression js in the page.
func eval[T any](ctx context.Context, js string) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js))
}

// mustEval is eval that fails the test on error.
func mustEval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := eval[T](ctx, js)
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitText waits until the text of the element sel shows want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	testbed.Poll(t, 30*time.Second, fmt.Sprintf("%q in %s", want, sel), func() (bool, string) {
		s, err := eval[string](ctx, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(s, want), s
	})
}

// screenshot saves the browser's view as docs/NAME.png when
// WEFT_UI_SCREENSHOTS names a folder (the README's pictures are made so).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("WEFT_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openUI runs `weft ui ARGS…` on a desktop whose xdg-open only notes the
// address it is given, and returns the URL weft ui printed and that
// address.
func openUI(t *testing.T, c testbed.CLI, args ...string) (url, opened string) {
	t.Helper()
	bin := t.TempDir()
	note := filepath.Join(bin, "opened")
	script := "#!/bin/sh\nprintf %s \"$1\" > " + note + ".new && mv " + note + ".new " + note + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := c.Command(append([]string{"ui"}, args...)...)
	cmd.Env = append(cmd.Env, "PATH="+bin+":"+os.Getenv("PATH"), "DISPLAY=:0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("weft ui: %v", err)
	}
	testbed.Poll(t, 10*time.Second, "xdg-open to be run", func() (bool, string) {
		b, err := os.ReadFile(note)
		opened = string(b)
		return err == nil, fmt.Sprint(err)
	})
	return strings.TrimSpace(string(out)), opened
}

// TestBrowser drives the web view in a real browser against a mesh of two
// real daemons: the page loads and shows the peer and the space; a
// message sent with the CLI on the other daemon appears without a reload,
// with its sender's card name; a reply sent from the page reaches the
// other daemon, with its ref; and requests without the token, or from a
// foreign origin (a page elsewhere on 127.0.0.1, where the browser holds
// the session cookie), are refused.
func TestBrowser(t *testing.T) {
	chromium(t)              // skips here without one
	ds := testbed.Mesh(t, 2) // skips with -short
	ctx := browser(t)
	a, b := ds[0].CLI(t), ds[1].CLI(t)
	a.OK("card", "--name", "alice")
	b.OK("card", "--name", "bob")
	a.OK("join", "lab")
	b.OK("join", "lab")
	first := strings.TrimSpace(a.OK("send", "lab", "--text", "hello from alice"))

	// weft ui on a desktop: it hands the browser (here a stand-in
	// xdg-open that notes what it was given) a file that leads to the page,
	// never the token itself; the browser opens that.
	url, opened := openUI(t, a, "--space", "lab")
	if !strings.Contains(url, "token=") || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("weft ui printed %q", url)
	}
	if token := url[strings.Index(url, "token=")+6:]; strings.Contains(opened, token[:16]) || !strings.HasPrefix(opened, "file://") {
		t.Fatalf("weft ui had the browser open %q", opened)
	}
	base := url[:strings.Index(url, "/?")]

	run(t, ctx, "open the page", chromedp.Navigate(opened))
	waitText(t, ctx, "#top", "alice")
	loc := mustEval[string](t, ctx, `location.href`)
	if !strings.HasSuffix(loc, "/?space=lab") {
		t.Fatalf("the page is at %s", loc)
	}
	mustEval[int](t, ctx, `window.weftMarker = 42`)
	if strings.Contains(loc, "token=") {
		t.Fatalf("the token stayed in the address bar: %s", loc)
	}
	// The space named in the URL opens, with the message sent before.
	waitText(t, ctx, "#spaces", "lab")
	waitText(t, ctx, "#messages", "hello from alice")

	// The mesh: this node and its peer, by card name.
	run(t, ctx, "mesh tab", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="mesh"]`)))
	waitText(t, ctx, "#peers", ds[1].ID)
	waitText(t, ctx, "#peers", "bob")
	waitText(t, ctx, "#node-detail", ds[0].ID)
	screenshot(t, ctx, "ui-mesh")
	run(t, ctx, "spaces tab", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="spaces"]`)))

	// A message sent through the CLI of the other daemon appears live.
	second := strings.TrimSpace(b.OK("send", "lab", "--text", "hello from bob's CLI", "--ref", first))
	waitText(t, ctx, "#messages", "hello from bob's CLI")
	waitText(t, ctx, fmt.Sprintf(`#messages li[data-id=%q] .msg-from`, second), "bob")

	// Answer it from the page: the reply reaches the other daemon.
	run(t, ctx, "reply from the page",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#messages li[data-id=%q] button.link`, second))),
		chromedp.SetValue(chromedp.CSS("#send-text"), "answer typed in the browser"),
		chromedp.Click(chromedp.CSS("#send-btn")),
	)
	testbed.Poll(t, 30*time.Second, "the page's reply at the other daemon", func() (bool, string) {
		out, errs, code := b.Run("read", "lab", "--json")
		if code != 0 {
			return false, errs
		}
		for _, line := range strings.Split(out, "\n") {
			var m api.Message
			if json.Unmarshal([]byte(line), &m) != nil || !strings.Contains(string(m.Content), "answer typed in the browser") {
				continue
			}
			if m.From != ds[0].ID || m.Refs == nil || len(m.Refs.Messages) != 1 || m.Refs.Messages[0] != second {
				t.Fatalf("the reply arrived as %s", line)
			}
			return true, ""
		}
		return false, out
	})
	// The space's own history sync: in sync, its last session with bob.
	waitText(t, ctx, "#space-meta", "in sync")
	waitText(t, ctx, "#space-meta", "with bob")
	screenshot(t, ctx, "ui-space")

	// Two messages sent at once on both daemons (each follows what its
	// sender had seen: the graph may fork), then one that follows both.
	var wg sync.WaitGroup
	for _, c := range []struct {
		cli  testbed.CLI
		text string
	}{{a, "I'll take the tests"}, {b, "I'll write the docs"}} {
		wg.Go(func() { c.cli.Run("send", "lab", "--text", c.text) })
	}
	wg.Wait()
	waitText(t, ctx, "#messages", "I'll write the docs")
	waitText(t, ctx, "#messages", "I'll take the tests")
	a.OK("send", "lab", "--text", "both done")

	// The graph draws the messages, the reply edges among them.
	run(t, ctx, "graph", chromedp.Click(chromedp.CSS(`.seg button[data-view="graph"]`)))
	testbed.Poll(t, 10*time.Second, "the graph", func() (bool, string) {
		nodes, err := eval[int](ctx, `document.querySelectorAll('#graph g.node').length`)
		if err != nil {
			return false, err.Error()
		}
		replies, err := eval[int](ctx, `document.querySelectorAll('#graph path.edge-reply').length`)
		if err != nil {
			return false, err.Error()
		}
		return nodes == 6 && replies == 2, fmt.Sprintf("%d nodes, %d reply edges", nodes, replies)
	})
	screenshot(t, ctx, "ui-graph")

	// Handlers and calls in flight: a slow handler here, called by the
	// other daemon. It answers once the page has shown the call (the
	// file go exists), however long a loaded machine takes to get there.
	goFile := filepath.Join(t.TempDir(), "go")
	a.Start("handle", "slow", "--exec", fmt.Sprintf("while [ ! -e %q ]; do sleep 0.1; done; cat", goFile), "--allow", "anyone")
	b.Start("handle", "summarize", "--exec", "cat", "--allow", "anyone", "--description", "summarizes text")
	run(t, ctx, "calls tab", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="calls"]`)))
	waitText(t, ctx, "#handlers", "slow")
	call := b.Start("invoke", ds[0].ID, "slow", "--data", `{"n":1}`)
	waitText(t, ctx, "#serving", "slow")
	waitText(t, ctx, "#serving", "bob")
	screenshot(t, ctx, "ui-calls")
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := call.Wait(30 * time.Second); err != nil {
		t.Fatalf("invoke: %v\n%s", err, call.Stderr)
	}
	waitText(t, ctx, "#serving", "none in flight")

	// Direct messages: one from the other daemon arrives live in the
	// inbox; one sent from the page to a peer nobody runs waits in the
	// outbox.
	run(t, ctx, "direct tab", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="direct"]`)))
	b.OK("dm", ds[0].ID, "--text", "a direct hello")
	waitText(t, ctx, "#inbox", "a direct hello")
	waitText(t, ctx, "#inbox", "bob")
	run(t, ctx, "answer the DM from the page",
		chromedp.Click(chromedp.CSS(`#inbox li button.link`)),
		chromedp.SetValue(chromedp.CSS("#dm-text"), "yes, I got it"),
		chromedp.Click(chromedp.CSS(`#dm-form button`)),
	)
	waitText(t, ctx, "#dm-result", "delivered")
	waitText(t, ctx, "#sent", "response") // the answer, in the sent log
	waitText(t, ctx, "#sent", "bob")
	testbed.Poll(t, 30*time.Second, "the page's answer in the other daemon's inbox", func() (bool, string) {
		out := b.OK("inbox", "--json")
		for _, line := range strings.Split(out, "\n") {
			var m api.Message
			if json.Unmarshal([]byte(line), &m) != nil || !strings.Contains(string(m.Content), "yes, I got it") {
				continue
			}
			if m.From != ds[0].ID || m.Type != "response" || m.Refs == nil || len(m.Refs.Messages) != 1 {
				t.Fatalf("the answer arrived as %s", line)
			}
			return true, ""
		}
		return false, out
	})
	run(t, ctx, "a DM from the page",
		chromedp.SetValue(chromedp.CSS("#dm-to"), absent(t)),
		chromedp.SetValue(chromedp.CSS("#dm-text"), "are you there?"),
		chromedp.Click(chromedp.CSS(`#dm-form button`)),
	)
	waitText(t, ctx, "#dm-result", "queued")
	waitText(t, ctx, "#outbox", absent(t)[:6])
	screenshot(t, ctx, "ui-direct")

	// Discovery by capability finds the other daemon's handler.
	run(t, ctx, "discover",
		chromedp.Click(chromedp.CSS(`#tabs button[data-tab="discover"]`)),
		chromedp.SetValue(chromedp.CSS("#discover-cap"), "summarize"),
		chromedp.Click(chromedp.CSS(`#discover-form button`)),
	)
	waitText(t, ctx, "#providers", ds[1].ID)
	waitText(t, ctx, "#providers", "bob")
	screenshot(t, ctx, "ui-discover")

	// No reload happened all along.
	if mustEval[int](t, ctx, `window.weftMarker || 0`) != 42 {
		t.Fatal("the page was reloaded")
	}

	// Without the token: refused.
	for _, path := range []string{"/", "/api/v1/node", "/api/v1/spaces/lab/events", "/ui/app.js"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s without the token: %d, want 401", path, resp.StatusCode)
		}
	}

	// From a foreign page on 127.0.0.1 (same site, so the browser sends
	// the session cookie): a form-like POST that needs no preflight must
	// not join a space, and a cross-origin read must fail.
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><script>
fetch(%[1]q, {method: 'POST', mode: 'no-cors', credentials: 'include', headers: {'Content-Type': 'text/plain'}, body: '{"name":"evil"}'})
  .catch(() => {})
  .then(() => fetch(%[2]q, {credentials: 'include'}))
  .then(r => r.text()).then(t => { document.title = 'read:' + t; }, e => { document.title = 'refused'; });
</script>`, base+"/api/v1/spaces", base+"/api/v1/node")
	}))
	defer foreign.Close()
	run(t, ctx, "the foreign page", chromedp.Navigate(foreign.URL))
	testbed.Poll(t, 20*time.Second, "the foreign page's requests", func() (bool, string) {
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			return false, err.Error()
		}
		if strings.HasPrefix(title, "read:") {
			t.Fatalf("a foreign page read the API: %s", title)
		}
		return title == "refused", title
	})
	if out := a.OK("spaces"); strings.Contains(out, "evil") {
		t.Fatalf("a foreign page joined a space:\n%s", out)
	}
	// The same with a Go client: a foreign Origin or Host with the token.
	token, _ := os.ReadFile(filepath.Join(ds[0].Home, "web.token"))
	for _, c := range []struct{ header, value string }{{"Origin", "http://evil.example"}, {"Host", "evil.example"}} {
		req, _ := http.NewRequest("POST", base+"/api/v1/spaces", strings.NewReader(`{"name":"evil"}`))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		if c.header == "Host" {
			req.Host = c.value
		} else {
			req.Header.Set(c.header, c.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a foreign %s: %d, want 403", c.header, resp.StatusCode)
		}
	}
}
