package weft_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/weftmesh/weft"

// Paths the rules name. A path matches itself and every package under it;
// one ending in "/" matches only what is under it.
const (
	badger = "github.com/dgraph-io/badger"
	libp2p = "github.com/libp2p/"                  // everything of libp2p, core included
	p2p    = "github.com/libp2p/go-libp2p/p2p/"    // libp2p's host, transports, protocols
	pubsub = "github.com/libp2p/go-libp2p-pubsub"  // gossipsub
	kaddht = "github.com/libp2p/go-libp2p-kad-dht" // the DHT
)

// depRule forbids the packages that pkgs match to import forbid, except
// what allow names.
type depRule struct {
	// pkgs is an import path; ending in "/..." it also matches every
	// package under it, so packages added there later are covered.
	pkgs   string
	forbid []string
	allow  []string
	// direct checks only the package's own imports (its non-test Go
	// files), not everything it depends on.
	direct bool
}

// depRules are the layering rules of README.md ("How it works"): protocol
// is the wire contract and stands alone (it and its sub-packages may use
// protocol/jsonvalid, which imports only the standard library); store
// does not know libp2p's host; mesh does not know the store or the daemon;
// the API types, the Go client, the MCP server and the version string
// stay free of libp2p and Badger so any program can link them.
var depRules = []depRule{
	{pkgs: mod + "/protocol/...", forbid: []string{mod, p2p, pubsub, kaddht, badger}, allow: []string{mod + "/protocol", mod + "/protocol/jsonvalid"}},
	{pkgs: mod + "/protocol/api", forbid: []string{mod, libp2p, badger}},
	{pkgs: mod + "/store/...", forbid: []string{mod + "/mesh", mod + "/node", p2p, pubsub, kaddht}},
	{pkgs: mod + "/mesh/...", forbid: []string{mod + "/store", mod + "/node", badger}},
	{pkgs: mod + "/node/client", forbid: []string{mod + "/node", mod + "/mesh", mod + "/store", libp2p, badger}},
	{pkgs: mod + "/node/mcp/...", forbid: []string{mod + "/node", mod + "/mesh", mod + "/store", libp2p, badger}, allow: []string{mod + "/node/client", mod + "/node/mcp"}},
	{pkgs: mod + "/internal/version", forbid: []string{mod, libp2p, badger}},
	// The daemon's backend speaks no HTTP and knows none of its servers.
	{pkgs: mod + "/node", forbid: []string{"net/http", mod + "/node/localapi", mod + "/node/daemon", mod + "/node/mcp"}, direct: true},
	// The local API turns requests into backend calls: it touches neither
	// libp2p's host nor Badger, nor the daemon that serves it.
	{pkgs: mod + "/node/localapi", forbid: []string{p2p, pubsub, kaddht, badger, mod + "/node/daemon", mod + "/node/mcp"}, direct: true},
	// Who may reach a node: decisions only, with no network, store or HTTP.
	{pkgs: mod + "/node/policy", forbid: []string{mod, p2p, pubsub, kaddht, badger, "net/http"}, allow: []string{mod + "/node/policy", mod + "/internal/atomicfile"}},
	// The loopback listener guards routes that others mount: it knows
	// none of the daemon's parts.
	{pkgs: mod + "/node/a2abridge", forbid: []string{p2p, pubsub, kaddht, badger, mod + "/node/localapi", mod + "/node/daemon", mod + "/node/mcp"}, direct: true},
	{pkgs: mod + "/node/web", forbid: []string{mod, p2p, pubsub, kaddht, badger}, allow: []string{mod + "/node/web"}},
	// The web view is a page and its files: it reaches the node only
	// through the local API's handler that it is given.
	{pkgs: mod + "/node/webui", forbid: []string{mod, libp2p, badger}, allow: []string{mod + "/node/web", mod + "/node/webui"}, direct: true},
	// Metric definitions: Prometheus only, none of the daemon's parts.
	{pkgs: mod + "/node/metrics", forbid: []string{mod, p2p, pubsub, kaddht, badger}, allow: []string{mod + "/node/metrics"}},
	// Tracing set-up: OpenTelemetry only, none of the daemon's parts.
	{pkgs: mod + "/node/telemetry", forbid: []string{mod, libp2p, badger}, allow: []string{mod + "/node/telemetry"}},
	// The outbox sees the store and the network only through its own
	// interfaces.
	{pkgs: mod + "/node/outbox", forbid: []string{mod + "/mesh", mod + "/node", "net/http", p2p, badger}, allow: []string{mod + "/node/outbox"}, direct: true},
}

// unruled lists the packages under the layered folders that no rule
// restricts, and why. Every other package there must match a rule.
var unruled = map[string]string{
	mod + "/node/daemon": "runs the node with its local API and MCP on the socket: it wires everything",
}

// layered are the folders whose every package must be covered by a rule or
// listed in unruled.
var layered = []string{mod + "/protocol", mod + "/store", mod + "/mesh", mod + "/node"}

// goPackage is what go list reports of a package.
type goPackage struct {
	ImportPath   string
	Name         string
	Dir          string
	Doc          string
	DepOnly      bool
	Imports      []string
	Deps         []string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// listPackages runs go list over the module once. It returns the module's
// packages (sorted) and every package they depend on, by import path.
func listPackages(tb testing.TB) (own []*goPackage, all map[string]*goPackage) {
	tb.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Name,Dir,Doc,DepOnly,Imports,Deps,GoFiles,CgoFiles,TestGoFiles,XTestGoFiles", "./...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			tb.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		tb.Fatalf("go list: %v", err)
	}
	all = make(map[string]*goPackage)
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(goPackage)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			tb.Fatalf("go list output: %v", err)
		}
		all[p.ImportPath] = p
		if !p.DepOnly {
			own = append(own, p)
		}
	}
	slices.SortFunc(own, func(a, b *goPackage) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	// A sanity check, so that a go list that lists nothing passes nothing.
	for _, want := range []string{mod, mod + "/protocol", mod + "/mesh/call", mod + "/node/client"} {
		if all[want] == nil || all[want].DepOnly {
			tb.Fatalf("go list ./... did not list %s (%d packages listed)", want, len(own))
		}
	}
	return own, all
}

// matches reports whether import path p matches pattern (see the consts).
func matches(p, pattern string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(p, pattern)
	}
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

// applies reports whether the rule covers package p.
func (r depRule) applies(p string) bool {
	if base, ok := strings.CutSuffix(r.pkgs, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == r.pkgs
}

// violations returns the imports of p the rule forbids, each with the chain
// of imports that leads to it. A forbidden package that only comes in
// through another forbidden one is counted, not listed.
func (r depRule) violations(p *goPackage, all map[string]*goPackage) []string {
	deps := p.Deps
	if r.direct {
		deps = p.Imports
	}
	forbidden := make(map[string]string) // dep -> the rule's path it matches
	for _, d := range deps {
		if d == p.ImportPath || slices.Contains(r.allow, d) {
			continue
		}
		for _, f := range r.forbid {
			if matches(d, f) {
				forbidden[d] = f
				break
			}
		}
	}
	var out []string
	hidden := 0
	for _, d := range slices.Sorted(maps.Keys(forbidden)) {
		chain := importChain(p.ImportPath, d, all)
		if len(chain) > 2 && forbidden[chain[len(chain)-2]] != "" {
			hidden++
			continue
		}
		out = append(out, fmt.Sprintf("%s (forbidden: %s) through %s", d, forbidden[d], strings.Join(chain, " -> ")))
	}
	if hidden > 0 && len(out) > 0 {
		out[len(out)-1] += fmt.Sprintf(", and %d more forbidden packages that these bring in", hidden)
	}
	return out
}

// importChain returns a shortest chain of imports from one package to
// another it depends on.
func importChain(from, to string, all map[string]*goPackage) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		if all[p] == nil {
			continue
		}
		for _, i := range all[p].Imports {
			if _, seen := prev[i]; !seen {
				prev[i] = p
				queue = append(queue, i)
			}
		}
	}
	return []string{from, "…", to}
}

// TestDependencyRules enforces depRules on every package of the module,
// through its non-test imports and everything they import in turn, and
// checks that every package under protocol/, store/, mesh/ and node/ is
// either covered by a rule or listed in unruled.
func TestDependencyRules(t *testing.T) {
	own, all := listPackages(t)
	for _, r := range depRules {
		n := 0
		for _, p := range own {
			if !r.applies(p.ImportPath) {
				continue
			}
			n++
			for _, v := range r.violations(p, all) {
				t.Errorf("%s imports %s", p.ImportPath, v)
			}
		}
		if n == 0 {
			t.Errorf("rule for %s matches no package: fix or remove it", r.pkgs)
		}
	}
	for _, p := range own {
		if !slices.ContainsFunc(layered, func(l string) bool { return matches(p.ImportPath, l) }) {
			continue
		}
		covered := slices.ContainsFunc(depRules, func(r depRule) bool { return r.applies(p.ImportPath) })
		_, exempt := unruled[p.ImportPath]
		switch {
		case !covered && !exempt:
			t.Errorf("%s matches no rule in deps_test.go: add one saying what it may not import (or list it in unruled, with the reason)", p.ImportPath)
		case covered && exempt:
			t.Errorf("%s is in unruled but a rule covers it: remove it from unruled", p.ImportPath)
		}
	}
	for p := range unruled {
		if all[p] == nil || all[p].DepOnly {
			t.Errorf("unruled lists %s, which go list ./... does not list", p)
		}
	}
}

// TestPackageDocs requires a package doc comment in every package of the
// module ("Package NAME …", or "Command NAME …" for a command). A package
// with only test files may carry it in one of them.
func TestPackageDocs(t *testing.T) {
	own, _ := listPackages(t)
	for _, p := range own {
		files := append(slices.Clone(p.GoFiles), p.CgoFiles...)
		if len(files) == 0 {
			files = append(slices.Clone(p.TestGoFiles), p.XTestGoFiles...)
		}
		doc, name := "", p.Name
		fset := token.NewFileSet()
		for _, f := range files {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatalf("%s: %v", p.ImportPath, err)
			}
			if af.Doc != nil {
				doc, name = af.Doc.Text(), af.Name.Name
				break
			}
		}
		switch {
		case doc == "":
			t.Errorf("%s (%s) has no package doc comment", p.ImportPath, p.Dir)
		case name == "main" && !strings.HasPrefix(doc, "Command "):
			t.Errorf("%s: the doc comment of a command starts %q, want \"Command NAME …\"", p.ImportPath, firstLine(doc))
		case name != "main" && !strings.HasPrefix(doc, "Package "+name+" "):
			t.Errorf("%s: the package doc comment starts %q, want \"Package %s …\"", p.ImportPath, firstLine(doc), name)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
