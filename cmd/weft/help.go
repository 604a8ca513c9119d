package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Help comes from the command table (name, arguments, short text), the
// optional longer text of helpTexts, and the flags of the command's own
// flag.FlagSet: `weft CMD --help` runs the command, whose flag parsing
// stops at --help (flag.ErrHelp) with its flag set made, and run prints
// the help from it. So a command added to the table later has help (and
// completion) without anything else to do; a description and an example
// for it go in helpTexts.

// helpText is the longer help of a command.
type helpText struct {
	desc    string // paragraphs after the synopsis
	example string // command lines, one per line
}

// helpTexts holds the description and example of the commands that have
// one; the others show their short text.
var helpTexts = map[string]helpText{
	"daemon": {"Runs the weft daemon in the foreground: a libp2p node (Kademlia DHT and mDNS discovery, spaces over gossipsub, direct messages and calls) with its store in the home, and the local API on <home>/weft.sock that every other command uses. Logs go to stderr (for journald or docker); it stops on SIGINT or SIGTERM.",
		"weft daemon --listen /ip4/0.0.0.0/tcp/4001 --bootstrap /ip4/192.0.2.7/tcp/4001/p2p/12D3KooW...\nweft daemon --log-format json --no-mdns"},
	"status": {"One screen on the running node: its ID and addresses, whether peers can dial it, the peers connected (directly or through a relay), the spaces joined with their message counts, what history sync is doing, the direct messages waiting in the outbox, the handlers registered, its uptime and version.",
		"weft status\nweft status --json | jq .peers"},
	"id":      {"Prints this node's peer ID and the full multiaddrs peers can dial (ending in /p2p/ID); --addr prints one of them, for --bootstrap or weft connect on another machine.", "weft id\nweft id --addr"},
	"connect": {"Connects to a peer at a multiaddr ending in /p2p/ID and keeps the connection. The address is checked: a wrong port of a peer already connected is an error.", "weft connect /ip4/192.0.2.7/tcp/4001/p2p/12D3KooW..."},
	"join":    {"Joins a space by name: its messages are gossiped to the members and kept in the store. Joining twice is fine.", "weft join lab\nweft join lab --keep-age 720h"},
	"send":    {"Sends a message to a joined space and prints its ID. The content is {\"text\": TEXT} with --text, or a JSON object of your own.", "weft send lab --text \"hello\"\nweft send lab --type review --ref MSGID --text \"looks good\""},
	"read":    {"Prints a space's messages, oldest first; --follow keeps printing new ones as they arrive, and outlives a daemon restart (it resumes from the last message printed).", "weft read lab\nweft read lab --follow --json"},
	"dm":      {"Sends a direct message to a peer. It is queued in the outbox and retried until delivered or its TTL ends.", "weft dm 12D3KooW... --text \"ping\""},
	"inbox":   {"Prints the direct messages received; --follow keeps printing new ones, across daemon restarts.", "weft inbox --follow"},
	"invoke":  {"Calls a handler a peer serves and prints its result (with --stream, each delta as it arrives).", "weft invoke 12D3KooW... review --data '{\"diff\": \"...\"}'"},
	"handle":  {"Serves calls to NAME by running CMD with sh -c for each call: the input JSON on stdin, the result JSON on stdout (for a stream call, each line is a delta). It registers again when the daemon restarts. By default only trusted peers may call.", "weft handle review --exec ./review.sh\nweft handle echo --exec cat --allow anyone"},
	"completion": {"Prints a shell completion script for bash, zsh or fish, made from the command table and each command's flags.",
		"source <(weft completion bash)          # in ~/.bashrc\nweft completion zsh > \"${fpath[1]}/_weft\"  # then restart zsh\nweft completion fish > ~/.config/fish/completions/weft.fish"},
	"help": {"Prints the help of a command, or the list of commands.", "weft help send"},
}

// findCommand returns the table entry of name.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// flagSetOf returns the flag set the command makes, by running it with
// --help and its output discarded (it stops at flag parsing); nil if the
// command made none.
func flagSetOf(c command) *flag.FlagSet {
	e := &env{stdout: io.Discard, stderr: io.Discard}
	_ = c.run(context.Background(), e, []string{"--help"})
	return e.fs
}

// printHelp writes a command's help: synopsis with its arguments,
// description, flags (from fs, if not nil) and example.
func printHelp(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: weft %s %s\n\n", c.name, c.args)
	h := helpTexts[c.name]
	desc := h.desc
	if desc == "" {
		desc = strings.ToUpper(c.short[:1]) + c.short[1:] + "."
	}
	fmt.Fprintln(w, wrap(desc, 76))
	if fs != nil {
		fmt.Fprintln(w, "\nflags:")
		printFlags(w, fs)
	}
	if h.example != "" {
		fmt.Fprintln(w, "\nexample:")
		for _, line := range strings.Split(h.example, "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
}

// printFlags lists the flags of fs, as --name TYPE and their usage.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "[]" && d != "0s" && f.Name != "home" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintln(w, line)
		for _, l := range strings.Split(wrap(usage, 72), "\n") {
			fmt.Fprintln(w, "      "+l)
		}
	})
}

// wrap breaks text into lines of at most width characters.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		if n > 0 && n+1+len(word) > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

func runHelp(_ context.Context, e *env, args []string) error {
	args, err := parseAny(e.flags("help"), args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		usage(e.stdout)
		return nil
	}
	if len(args) > 1 {
		return usageError{"give one command"}
	}
	c, ok := findCommand(args[0])
	if !ok {
		return usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
	printHelp(e.stdout, c, flagSetOf(c))
	return nil
}

// completionFlag is a flag of a command, for the completion scripts.
type completionFlag struct{ name, usage string }

// completionData returns, for each command, its flags.
func completionData() (cmds []command, flags map[string][]completionFlag) {
	flags = make(map[string][]completionFlag)
	for _, c := range commands() {
		cmds = append(cmds, c)
		if fs := flagSetOf(c); fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				u, _ := flag.UnquoteUsage(f)
				flags[c.name] = append(flags[c.name], completionFlag{f.Name, firstLine(u)})
			})
		}
		sort.Slice(flags[c.name], func(i, j int) bool { return flags[c.name][i].name < flags[c.name][j].name })
	}
	return cmds, flags
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func runCompletion(_ context.Context, e *env, args []string) error {
	fs := e.flags("completion")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	cmds, flags := completionData()
	switch pos[0] {
	case "bash":
		writeBash(e.stdout, cmds, flags)
	case "zsh":
		writeZsh(e.stdout, cmds, flags)
	case "fish":
		writeFish(e.stdout, cmds, flags)
	default:
		return usageError{fmt.Sprintf("shell %q: want bash, zsh or fish", pos[0])}
	}
	return nil
}

func names(cmds []command) string {
	var n []string
	for _, c := range cmds {
		n = append(n, c.name)
	}
	return strings.Join(n, " ")
}

func flagWords(fl []completionFlag) string {
	var w []string
	for _, f := range fl {
		w = append(w, "--"+f.name)
	}
	return strings.Join(w, " ")
}

func writeBash(w io.Writer, cmds []command, flags map[string][]completionFlag) {
	fmt.Fprintf(w, `# bash completion for weft (weft completion bash)
_weft() {
	local cur=${COMP_WORDS[COMP_CWORD]} cmd= i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--home) ((i++)) ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "%s --home --version --help" -- "$cur"))
		return
	fi
	local words=
	case $cmd in
	help) words="%s" ;;
	completion) words="bash zsh fish" ;;
`, names(cmds), names(cmds))
	for _, c := range cmds {
		if c.name != "help" && c.name != "completion" {
			fmt.Fprintf(w, "\t%s) words=%q ;;\n", c.name, flagWords(flags[c.name])+" --help")
		}
	}
	fmt.Fprint(w, `	esac
	if [[ $cur == -* || $cmd == help || $cmd == completion ]]; then
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o default -F _weft weft
`)
}

// zshQuote quotes s for a zsh single-quoted word, with : and [ ] escaped
// for _describe and _arguments specs.
func zshQuote(s string) string {
	s = strings.NewReplacer("'", "'\\''", ":", "\\:", "[", "\\[", "]", "\\]").Replace(s)
	return "'" + s + "'"
}

func writeZsh(w io.Writer, cmds []command, flags map[string][]completionFlag) {
	fmt.Fprintln(w, "#compdef weft\n# zsh completion for weft (weft completion zsh)\n_weft() {\n\tlocal -a cmds\n\tcmds=(")
	for _, c := range cmds {
		fmt.Fprintf(w, "\t\t%s\n", zshQuote(c.name+":"+c.short))
	}
	fmt.Fprintln(w, "\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe 'weft command' cmds\n\t\treturn\n\tfi\n\tcase $words[2] in")
	for _, c := range cmds {
		fmt.Fprintf(w, "\t%s)\n\t\t_arguments", c.name)
		for _, f := range flags[c.name] {
			fmt.Fprintf(w, " %s", zshQuote("*--"+f.name+"["+f.usage+"]"))
		}
		fmt.Fprintln(w, " '*:file:_files' ;;")
	}
	fmt.Fprintln(w, "\tesac\n}\ncompdef _weft weft 2>/dev/null || _weft \"$@\"")
}

// fishQuote quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func writeFish(w io.Writer, cmds []command, flags map[string][]completionFlag) {
	fmt.Fprintln(w, "# fish completion for weft (weft completion fish)\ncomplete -c weft -f")
	fmt.Fprintf(w, "complete -c weft -n '__fish_use_subcommand' -l home -r -d %s\n", fishQuote("data dir of the daemon"))
	fmt.Fprintf(w, "complete -c weft -n '__fish_use_subcommand' -l version -d %s\n", fishQuote("print the version"))
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c weft -n '__fish_use_subcommand' -a %s -d %s\n", c.name, fishQuote(c.short))
	}
	for _, c := range cmds {
		for _, f := range flags[c.name] {
			fmt.Fprintf(w, "complete -c weft -n '__fish_seen_subcommand_from %s' -l %s -d %s\n", c.name, f.name, fishQuote(f.usage))
		}
	}
	fmt.Fprintf(w, "complete -c weft -n '__fish_seen_subcommand_from help' -a %s\n", fishQuote(names(cmds)))
	fmt.Fprintln(w, "complete -c weft -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'")
}

// isHelp reports whether err is a request for help (-h, --help).
func isHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
