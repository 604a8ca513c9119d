// Package version is weft's one version string: the release version, and
// the commit the binary was built from when the go command stamped it. go
// build and go install stamp it in a git checkout unless -buildvcs=false,
// but not in a linked git worktree (golang/go#58218); go test and go run
// never do.
//
// Everything that reports weft's version (the CLI, the MCP server, the
// daemon's GET /v1/node) takes it from here, so they all say the same.
package version

import (
	"runtime/debug"
	"sync"
)

// Release is weft's release version (semantic versioning): "-dev" until a
// release is tagged.
const Release = "0.1.0-dev"

// shortLen is how many hex digits of the commit String shows.
const shortLen = 7

// String returns the release version, followed by the short commit in
// parentheses when the build was stamped with one, marked "+dirty" when the
// tree had uncommitted changes: "0.1.0-dev (abc1234)",
// "0.1.0-dev (abc1234+dirty)", or "0.1.0-dev" alone.
func String() string { return stamp().String() }

// Commit returns the full VCS revision the binary was built from, or "" if
// the build was not stamped with one (as in go test, go run, or go build
// -buildvcs=false).
func Commit() string { return stamp().commit }

// Dirty reports whether the binary was built from a tree with uncommitted
// changes. It is false when the build was not stamped.
func Dirty() bool { return stamp().dirty }

// info is what the build stamped.
type info struct {
	commit string
	dirty  bool
}

var stamp = sync.OnceValue(func() info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info{}
	}
	return fromSettings(bi.Settings)
})

// fromSettings reads the vcs.revision and vcs.modified build settings.
func fromSettings(settings []debug.BuildSetting) info {
	var i info
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			i.commit = s.Value
		case "vcs.modified":
			i.dirty = s.Value == "true"
		}
	}
	if i.commit == "" {
		i.dirty = false // a mark with no commit to qualify says nothing
	}
	return i
}

func (i info) String() string {
	if i.commit == "" {
		return Release
	}
	c := i.commit
	if len(c) > shortLen {
		c = c[:shortLen]
	}
	if i.dirty {
		c += "+dirty"
	}
	return Release + " (" + c + ")"
}
