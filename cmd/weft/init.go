package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// skillFiles holds the skills `weft init` writes: skills/NAME/SKILL.md,
// in the Agent Skills layout Claude Code reads.
//
//go:embed skills/*/SKILL.md
var skillFiles embed.FS

// skillFile is the name of a skill's file inside its directory.
const skillFile = "SKILL.md"

// defaultSkillsDir is where Claude Code looks for a project's skills.
var defaultSkillsDir = filepath.Join(".claude", "skills")

// skillNames returns the names of the embedded skills, sorted.
func skillNames() []string {
	entries, err := fs.ReadDir(skillFiles, "skills")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// skill returns the SKILL.md of the named embedded skill.
func skill(name string) ([]byte, error) {
	return skillFiles.ReadFile(path.Join("skills", name, skillFile))
}

// runInit writes SKILL.md files that teach an AI agent the mesh and the
// collaboration conventions: DIR/NAME/SKILL.md for each NAME (all when
// none is given). It refuses to overwrite a file without --force, and
// checks every target before writing any.
func runInit(_ context.Context, e *env, args []string) error {
	flags := e.flags("init")
	dir := flags.String("o", defaultSkillsDir, "write the skills into `DIR` (as DIR/NAME/SKILL.md)")
	force := flags.Bool("force", false, "overwrite SKILL.md files that exist")
	names, err := parseAny(flags, args)
	if err != nil {
		return err
	}
	known := skillNames()
	if len(names) == 0 {
		names = known
	}
	var want []string
	for _, n := range names {
		if !slices.Contains(known, n) {
			return usageError{fmt.Sprintf("unknown skill %q (known: %s)", n, strings.Join(known, ", "))}
		}
		if !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	if !*force {
		for _, n := range want {
			p := filepath.Join(*dir, n, skillFile)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s exists (use --force to overwrite it)", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, n := range want {
		p := filepath.Join(*dir, n, skillFile)
		if err := writeSkill(p, n, *force); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, p)
	}
	return nil
}

// writeSkill writes the named skill to p, creating its directory; without
// force it fails rather than replace a file that appeared meanwhile.
func writeSkill(p, name string, force bool) error {
	b, err := skill(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		mode = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(p, mode, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (use --force to overwrite it)", p)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}
