package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The skills every `weft init` writes, and the conventions each teaches:
// for each message type, the content fields it must have (with their
// allowed values, if fixed) and how many refs.messages it carries.
var conventionTypes = map[string]map[string]msgShape{
	"checkpoint": {
		"checkpoint.request":  {keys: []string{"title", "details", "options"}},
		"checkpoint.response": {keys: []string{"decision"}, values: map[string][]string{"decision": {"approve", "reject"}}, replyTo: 1},
	},
	"handoff": {
		"handoff":         {keys: []string{"task", "context"}, to: 1},
		"handoff.accept":  {replyTo: 1},
		"handoff.decline": {keys: []string{"reason"}, replyTo: 1},
		"handoff.result":  {keys: []string{"status", "summary", "result"}, values: map[string][]string{"status": {"done", "failed"}}, replyTo: 1},
	},
	"team": {
		"team.hello":  {keys: []string{"name", "role", "capabilities"}},
		"team.task":   {keys: []string{"task"}},
		"team.status": {keys: []string{"state"}, values: map[string][]string{"state": {"working", "blocked", "done"}}, replyTo: 1},
	},
	"swarm": {
		"swarm.objective": {keys: []string{"objective", "scopes", "merge"}},
		"swarm.intro":     {keys: []string{"name", "capabilities"}, replyTo: 1},
		"swarm.claim":     {keys: []string{"scope"}, replyTo: 1},
		"swarm.finding":   {keys: []string{"scope", "result"}, replyTo: 2},
		"swarm.done":      {keys: []string{"result"}, replyTo: 1},
	},
	"weft": {},
}

// msgShape is what a convention's message must look like in an example.
type msgShape struct {
	keys    []string            // content fields it must have
	values  map[string][]string // allowed values of some of them
	replyTo int                 // at least this many refs.messages (MCP reply_to)
	to      int                 // exactly this many refs.nodes (MCP to), when > 0
}

// initRun runs `weft init` with args and returns its exit code and output.
func initRun(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"init"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// skillPath is where init writes a skill under dir.
func skillPath(dir, name string) string { return filepath.Join(dir, name, "SKILL.md") }

// listSkills returns the skills written under dir.
func listSkills(t testing.TB, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range matches {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	return names
}

func TestInitWrites(t *testing.T) {
	all := []string{"checkpoint", "handoff", "swarm", "team", "weft"}
	if got := skillNames(); !slices.Equal(got, all) {
		t.Fatalf("embedded skills = %v, want %v", got, all)
	}
	tests := []struct {
		name string
		args []string // skill names asked for
		want []string // skills written, in output order
	}{
		{"all", nil, all},
		{"one", []string{"weft"}, []string{"weft"}},
		{"subset", []string{"team", "checkpoint"}, []string{"team", "checkpoint"}},
		{"repeated", []string{"swarm", "swarm"}, []string{"swarm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "skills")
			code, out, errs := initRun(t, append([]string{"-o", dir}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var wantOut string
			for _, n := range tt.want {
				wantOut += skillPath(dir, n) + "\n"
			}
			if out != wantOut {
				t.Errorf("printed\n%s\nwant\n%s", out, wantOut)
			}
			if got, want := listSkills(t, dir), slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
				t.Errorf("wrote %v, want %v", got, want)
			}
			for _, n := range tt.want {
				got, err := os.ReadFile(skillPath(dir, n))
				if err != nil {
					t.Fatal(err)
				}
				want, err := skill(n)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the embedded skill", n)
				}
			}
		})
	}
}

func TestInitDefaultDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errs := initRun(t, "weft")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := filepath.Join(".claude", "skills", "weft", "SKILL.md")
	if out != want+"\n" {
		t.Errorf("printed %q, want %q", out, want+"\n")
	}
	if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
		t.Error(err)
	}
}

func TestInitUnknownSkill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skills")
	code, out, errs := initRun(t, "-o", dir, "team", "nope")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (usage); stderr: %s", code, errs)
	}
	if out != "" {
		t.Errorf("printed %q", out)
	}
	if !strings.Contains(errs, `unknown skill "nope"`) {
		t.Errorf("stderr does not name the unknown skill: %s", errs)
	}
	for _, n := range skillNames() {
		if !strings.Contains(errs, n) {
			t.Errorf("stderr does not list the known skill %s: %s", n, errs)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("wrote something: %v", err)
	}
}

func TestInitOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skills")
	mine := []byte("---\nname: team\ndescription: my own edits\n---\n")
	if err := os.MkdirAll(filepath.Join(dir, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skillPath(dir, "team"), mine, 0o644); err != nil {
		t.Fatal(err)
	}

	// Without --force: an error naming the file, and nothing written.
	code, out, errs := initRun(t, "-o", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, errs)
	}
	if out != "" {
		t.Errorf("printed %q", out)
	}
	if !strings.Contains(errs, skillPath(dir, "team")) || !strings.Contains(errs, "--force") {
		t.Errorf("stderr does not name the file and --force: %s", errs)
	}
	if got := listSkills(t, dir); !slices.Equal(got, []string{"team"}) {
		t.Errorf("wrote %v before failing", got)
	}
	if got, _ := os.ReadFile(skillPath(dir, "team")); !bytes.Equal(got, mine) {
		t.Errorf("overwrote the file without --force:\n%s", got)
	}
	// Skills not written yet are written without --force.
	if code, _, errs := initRun(t, "-o", dir, "weft"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}

	// With --force: everything written, the edited file replaced.
	code, out, errs = initRun(t, "-o", dir, "--force")
	if code != 0 {
		t.Fatalf("--force: exit %d: %s", code, errs)
	}
	if n := strings.Count(out, "\n"); n != len(skillNames()) {
		t.Errorf("--force printed %d paths, want %d:\n%s", n, len(skillNames()), out)
	}
	want, _ := skill("team")
	if got, _ := os.ReadFile(skillPath(dir, "team")); !bytes.Equal(got, want) {
		t.Errorf("--force did not replace the file")
	}
}

// yamlUnsafe matches what would make a front-matter value something other
// than a one-line YAML plain scalar.
var yamlUnsafe = regexp.MustCompile("^[-?:,\\[\\]{}#&*!|>'\"%@`\\s]|: |:$| #|\\s$")

// frontMatter parses a SKILL.md's front matter, which must be `key: value`
// lines between `---` lines, and returns it with the body after it.
func frontMatter(t testing.TB, doc string) (map[string]string, string) {
	t.Helper()
	rest, ok := strings.CutPrefix(doc, "---\n")
	if !ok {
		t.Fatalf("does not start with a front matter line ---")
	}
	head, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		t.Fatalf("front matter is not closed by ---")
	}
	fields := make(map[string]string)
	for _, line := range strings.Split(head, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || !regexp.MustCompile(`^[a-z][a-z0-9_-]*$`).MatchString(k) {
			t.Fatalf("front matter line %q is not `key: value`", line)
		}
		if _, dup := fields[k]; dup {
			t.Fatalf("front matter repeats %s", k)
		}
		if yamlUnsafe.MatchString(v) {
			t.Fatalf("front matter %s: %q is not a plain YAML scalar", k, v)
		}
		fields[k] = v
	}
	return fields, body
}

// jsonBlocks returns the contents of the ```json fences in a Markdown body.
func jsonBlocks(t testing.TB, body string) []string {
	t.Helper()
	var blocks []string
	lines := strings.Split(body, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```json" {
			continue
		}
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("a ```json block is not closed")
		}
		blocks = append(blocks, strings.Join(block, "\n"))
	}
	return blocks
}

// objects returns every JSON object inside v, v included.
func objects(v any) []map[string]any {
	var out []map[string]any
	switch x := v.(type) {
	case map[string]any:
		out = append(out, x)
		for _, e := range x {
			out = append(out, objects(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, objects(e)...)
		}
	}
	return out
}

// refCount returns how many entries msg's list of refs has, under its MCP
// name (reply_to, to) or in refs (messages, nodes).
func refCount(msg map[string]any, mcpKey, refsKey string) int {
	if l, ok := msg[mcpKey].([]any); ok {
		return len(l)
	}
	if refs, ok := msg["refs"].(map[string]any); ok {
		if l, ok := refs[refsKey].([]any); ok {
			return len(l)
		}
	}
	return 0
}

func TestInitSkillFiles(t *testing.T) {
	for _, name := range skillNames() {
		t.Run(name, func(t *testing.T) {
			b, err := skill(name)
			if err != nil {
				t.Fatal(err)
			}
			fields, body := frontMatter(t, string(b))
			if fields["name"] != name {
				t.Errorf("front matter name %q, want the directory's %q", fields["name"], name)
			}
			if !regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`).MatchString(name) || len(name) > 64 {
				t.Errorf("skill name %q: want lower-case letters, digits and hyphens, at most 64", name)
			}
			desc := fields["description"]
			if desc == "" || len(desc) > 1024 {
				t.Errorf("description is empty or over 1024 bytes: %q", desc)
			}
			if !strings.HasPrefix(desc, "Use when") && !strings.HasPrefix(desc, "Use before") {
				t.Errorf("description does not say when to use the skill: %q", desc)
			}

			var examples []map[string]any // messages of a convention type
			blocks := jsonBlocks(t, body)
			for i, blk := range blocks {
				var v any
				if err := json.Unmarshal([]byte(blk), &v); err != nil {
					t.Errorf("```json block %d does not parse: %v\n%s", i+1, err, blk)
					continue
				}
				for _, o := range objects(v) {
					if typ, ok := o["type"].(string); ok {
						if _, conv := conventionTypes[name][typ]; conv {
							examples = append(examples, o)
						}
					}
				}
			}
			if len(blocks) == 0 {
				t.Errorf("no ```json examples")
			}

			types, ok := conventionTypes[name]
			if !ok {
				t.Fatalf("skill %s has no entry in conventionTypes", name)
			}
			for typ, shape := range types {
				if !strings.Contains(body, "`"+typ+"`") && !strings.Contains(body, `"`+typ+`"`) {
					t.Errorf("type %s is not named", typ)
				}
				n := 0
				for _, ex := range examples {
					if ex["type"] != typ {
						continue
					}
					n++
					checkExample(t, typ, shape, ex)
				}
				if n == 0 {
					t.Errorf("no JSON example of a %s message (with its type and content)", typ)
				}
			}
		})
	}
}

// checkExample checks one example message of type typ against its shape.
func checkExample(t *testing.T, typ string, shape msgShape, ex map[string]any) {
	t.Helper()
	content, ok := ex["content"].(map[string]any)
	if !ok {
		t.Errorf("%s example has no content object: %v", typ, ex)
		return
	}
	for _, k := range shape.keys {
		if _, ok := content[k]; !ok {
			t.Errorf("%s example content lacks %q: %v", typ, k, content)
		}
	}
	for k, allowed := range shape.values {
		if s, _ := content[k].(string); !slices.Contains(allowed, s) {
			t.Errorf("%s example content %s = %v, want one of %v", typ, k, content[k], allowed)
		}
	}
	if got := refCount(ex, "reply_to", "messages"); got < shape.replyTo {
		t.Errorf("%s example refers to %d messages, want at least %d: %v", typ, got, shape.replyTo, ex)
	}
	if got := refCount(ex, "to", "nodes"); shape.to > 0 && got != shape.to {
		t.Errorf("%s example is addressed to %d peers, want %d: %v", typ, got, shape.to, ex)
	}
}
