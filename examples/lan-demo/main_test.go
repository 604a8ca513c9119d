package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/internal/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// TestLANDemo runs the demo, the LAN scenario of the test bed: 4 hosts in
// their own network namespaces on one bridge, each running `weft daemon`
// with no flags but its home. They must find each other by mDNS, meet in
// a space, and every host must get every message. Nothing may be left
// behind: no namespace, no process.
func TestLANDemo(t *testing.T) {
	if err := netns.Check(); err != nil {
		t.Skip(err)
	}
	bin := testbed.Build(t, "github.com/weftmesh/weft/examples/lan-demo")
	p := testbed.Run(t, nil, nil, bin, "--weft", testbed.Weft(t), "--hosts", "4", "--messages", "25", "--timeout", "90s")
	if err := p.Wait(2 * time.Minute); err != nil {
		t.Fatalf("lan-demo: %v\nstdout:\n%s\nstderr:\n%s", err, p.Stdout, p.Stderr)
	}
	out := p.Stdout.String()
	for _, want := range []string{"every host found the 3 others, by mDNS alone", `all 4 hosts joined "lan-demo"`, "every host has every message: 100 sent, 300 deliveries"} {
		if !strings.Contains(out, want) {
			t.Fatalf("lan-demo did not print %q:\n%s", want, out)
		}
	}
	// Each of the 12 ordered pairs found each other.
	if got := strings.Count(out, " on the LAN\n"); got != 12 {
		t.Fatalf("%d \"found\" lines, want 12:\n%s", got, out)
	}
	summary := regexp.MustCompile(`summary: .*`).FindString(out)
	if summary == "" {
		t.Fatalf("no summary:\n%s", out)
	}
	t.Log(summary)
	// Other tests may build LANs at the same time: look only for the
	// demo's own namespaces, named after the LAN it printed.
	lan := regexp.MustCompile(`LAN (\S+):`).FindStringSubmatch(out)
	if lan == nil {
		t.Fatalf("no LAN name in the output:\n%s", out)
	}
	after, err := netns.Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	if left := slices.DeleteFunc(after, func(ns string) bool { return !strings.HasPrefix(ns, lan[1]+"-") }); len(left) > 0 {
		t.Fatalf("the demo left namespaces behind: %v", left)
	}
}
