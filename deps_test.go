package weft_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyRules enforces DESIGN.md's layering: protocol imports none of
// weft and neither a libp2p host nor Badger; store does not know libp2p's
// host; mesh does not know the store or the daemon; the outbox knows
// neither the mesh nor the daemon; the API types and the Go client stay free
// of libp2p and Badger so any program can link them.
func TestDependencyRules(t *testing.T) {
	const mod = "github.com/weftmesh/weft"
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{mod + "/protocol", []string{mod + "/store", mod + "/mesh", mod + "/node", "github.com/dgraph-io/badger", "github.com/libp2p/go-libp2p/p2p/", "github.com/libp2p/go-libp2p-pubsub", "github.com/libp2p/go-libp2p-kad-dht"}},
		{mod + "/protocol/api", []string{mod + "/protocol", "github.com/libp2p/", "github.com/dgraph-io/badger"}},
		{mod + "/node/client", []string{mod + "/node", mod + "/mesh", mod + "/store", "github.com/libp2p/", "github.com/dgraph-io/badger"}},
		{mod + "/store", []string{mod + "/mesh", mod + "/node", "github.com/libp2p/go-libp2p/p2p/", "github.com/libp2p/go-libp2p-pubsub"}},
		{mod + "/mesh", []string{mod + "/store", mod + "/node", "github.com/dgraph-io/badger"}},
		{mod + "/mesh/agent", []string{mod + "/store", mod + "/node", "github.com/dgraph-io/badger"}},
		{mod + "/node/outbox", []string{mod + "/mesh", mod + "/node", "github.com/libp2p/go-libp2p/p2p/"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", r.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", r.pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 2 {
			t.Fatalf("go list -deps %s listed %d packages", r.pkg, len(deps))
		}
		for _, d := range deps {
			if d == r.pkg {
				continue
			}
			for _, f := range r.forbidden {
				if d == f || strings.HasPrefix(d, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) {
					t.Errorf("%s imports %s (forbidden: %s)", r.pkg, d, f)
				}
			}
		}
	}
}
