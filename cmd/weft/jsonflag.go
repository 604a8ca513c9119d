package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// --json means JSON output, on every command. send, dm and invoke took
// their JSON input with --json once; that input is --data now, and an old
// command line still works: `--json VALUE` (a JSON value right after it)
// is taken as --data VALUE, with a note on stderr.

// jsonOut is the --json flag of a command whose --json used to take input.
// It is a boolean flag; a value given as --json=VALUE that is not a
// boolean is kept as the old input.
type jsonOut struct {
	on     bool
	legacy string // --json=VALUE: the old input
}

func (j *jsonOut) IsBoolFlag() bool { return true }
func (j *jsonOut) String() string   { return "" }
func (j *jsonOut) Set(v string) error {
	if b, err := strconv.ParseBool(v); err == nil {
		j.on = b
		return nil
	}
	j.legacy = v
	return nil
}

// addDataFlags adds --data (the JSON input), its other name --json-in, and
// --json (JSON output). what says what the input is.
func addDataFlags(fs *flag.FlagSet, what string) (data *string, out *jsonOut) {
	data = new(string)
	out = new(jsonOut)
	fs.StringVar(data, "data", "", what+" (JSON)")
	fs.StringVar(data, "json-in", "", "the same as --data")
	fs.Var(out, "json", "print the result as JSON")
	return data, out
}

// takeLegacyInput resolves the old `--json VALUE` form: when --json was given
// and the arguments hold one more than want, the last of them being JSON,
// that is the input (and --json is not output). It returns the positional
// arguments left and the input (from --data, or the old form).
func takeLegacyInput(e *env, pos []string, want int, data string, out *jsonOut) ([]string, string, error) {
	old := out.legacy
	if old == "" && out.on && len(pos) == want+1 && json.Valid([]byte(pos[want])) {
		old, pos = pos[want], pos[:want]
	}
	if old != "" {
		if data != "" {
			return nil, "", usageError{"give the input once: --data VALUE"}
		}
		out.on = false
		fmt.Fprintln(e.stderr, "weft: --json VALUE is now --data VALUE (--json alone prints JSON)")
		data = old
	}
	if len(pos) != want {
		return nil, "", usageError{fmt.Sprintf("want %d argument(s), got %d", want, len(pos))}
	}
	return pos, data, nil
}

// ttlFlag is a time to live: a duration (90s, 10m, 24h), or, as send took
// it once, a number of seconds.
type ttlFlag struct{ d time.Duration }

func (t *ttlFlag) String() string {
	if t == nil || t.d == 0 {
		return ""
	}
	return t.d.String()
}

func (t *ttlFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		t.d = time.Duration(n) * time.Second
	} else if t.d, err = time.ParseDuration(v); err != nil {
		return fmt.Errorf("want a duration such as 90s, 10m or 24h")
	}
	if t.d < 0 || (t.d > 0 && t.d < time.Second) {
		return fmt.Errorf("want at least 1s (or 0: none)")
	}
	return nil
}

// seconds is the TTL in whole seconds, as the API takes it.
func (t ttlFlag) seconds() int64 { return int64(t.d / time.Second) }
