package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromSettings(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
		commit   string
		dirty    bool
	}{
		{"not stamped", nil, Release, "", false},
		{"other settings only", []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs", Value: "git"}}, Release, "", false},
		{"clean", []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}},
			Release + " (0123456)", rev, false},
		{"dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}},
			Release + " (0123456+dirty)", rev, true},
		{"short revision", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, Release + " (abc)", "abc", false},
		{"modified without a revision", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, Release, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := fromSettings(tt.settings)
			if got := i.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if i.commit != tt.commit || i.dirty != tt.dirty {
				t.Errorf("commit %q dirty %v, want %q %v", i.commit, i.dirty, tt.commit, tt.dirty)
			}
		})
	}
}

// TestTestBinary: go test does not stamp VCS information, so in a test the
// version is the release alone.
func TestTestBinary(t *testing.T) {
	if got := String(); got != Release {
		t.Errorf("String() = %q in a test binary, want %q", got, Release)
	}
	if Commit() != "" || Dirty() {
		t.Errorf("Commit() = %q, Dirty() = %v in a test binary", Commit(), Dirty())
	}
}

// TestStampedBuild builds a program that prints String, Commit and Dirty
// from a git repository made for the test, holding this package's source,
// so the go command stamps a commit the test knows: clean, then with a
// change, then with stamping turned off. (It does not build in this
// checkout: go does not stamp builds in a linked git worktree,
// golang/go#58218.)
func TestStampedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program three times")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	repo := t.TempDir()
	// The module path is weft's, so the program may import the internal
	// package; the package's own source files are copied in as they are.
	write(t, filepath.Join(repo, "go.mod"), []byte("module github.com/weftmesh/weft\n\ngo 1.26\n"))
	srcs, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range srcs {
		if !strings.HasSuffix(f, "_test.go") {
			write(t, filepath.Join(repo, "internal", "version", f), read(t, f))
		}
	}
	mainGo := filepath.Join(repo, "cmd", "printversion", "main.go")
	write(t, mainGo, read(t, filepath.Join("testdata", "printversion", "main.go")))

	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		// No user or system git config (signing, hooks); no workspace and
		// no downloads for go (-buildvcs on its command line wins over
		// GOFLAGS).
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GOWORK=off", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(git, "init", "-q")
	run(git, "add", ".")
	run(git, "-c", "user.name=weft", "-c", "user.email=weft@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "test")
	head := run(git, "rev-parse", "HEAD")

	bin := filepath.Join(t.TempDir(), "printversion")
	printed := func(buildvcs string) string {
		t.Helper()
		run("go", "build", "-buildvcs="+buildvcs, "-o", bin, "./cmd/printversion")
		return run(bin)
	}
	if got, want := printed("true"), Release+" ("+head[:7]+")\n"+head+"\nfalse"; got != want {
		t.Errorf("clean build printed\n%s\nwant\n%s", got, want)
	}
	write(t, mainGo, append(read(t, mainGo), "\n// changed\n"...))
	if got, want := printed("true"), Release+" ("+head[:7]+"+dirty)\n"+head+"\ntrue"; got != want {
		t.Errorf("build with a change printed\n%s\nwant\n%s", got, want)
	}
	if got, want := printed("false"), Release+"\n\nfalse"; got != want {
		t.Errorf("unstamped build printed\n%s\nwant\n%s", got, want)
	}
}

func read(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func write(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}
