// Command weft is the weft daemon and its command-line client.
//
//	weft daemon [--listen MULTIADDR]... [--bootstrap MULTIADDR]... [--no-mdns]
//	weft status | id | peers | connect | join | spaces | leave | send | read | show | ...
//	weft help [COMMAND] | completion bash|zsh|fish | version
//
// Every command takes --home DIR (default $WEFT_HOME, else ~/.weft), before
// or after the command. Results go to stdout (as JSON with --json, where
// fields are only ever added), diagnostics to stderr; on failure a one-line
// error and a non-zero exit. The commands are the table of commands(); help
// and completion are made from it and each command's flag set.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/weftmesh/weft/node/client"
)

// command is one subcommand.
type command struct {
	name  string
	args  string // usage after the name
	short string
	run   func(ctx context.Context, env *env, args []string) error
}

// env is what every command gets: its streams and the client of the home's daemon.
type env struct {
	stdout, stderr io.Writer
	home           string
	fs             *flag.FlagSet     // the command's flags, once it made them (for its help)
	tty            bool              // stdout is a terminal (tests set it)
	names          map[string]string // peer ID → the name this node knows it by, for messages shown
}

func (e *env) client() *client.Client { return &client.Client{Home: e.home} }

// usageError is a mistake in how the command was called (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func commands() []command {
	return []command{
		{"daemon", "[--listen MULTIADDR]... [--bootstrap MULTIADDR]... [--no-mdns] [--dm-policy anyone|trusted]", "run the weft daemon (a libp2p node with the local API)", runDaemon},
		{"demo", "[--nodes N]", "start a small local mesh of real daemons and watch them talk", runDemo},
		{"bench", "[--quick] [--json] [--scenarios LIST]", "measure weft as users see it: real daemons on 127.0.0.1, driven through their sockets", runBench},
		{"status", "[--json]", "one screen on the node: ID, addresses, reachability, peers, spaces, sync, outbox, handlers, uptime, version", runStatus},
		{"id", "[--json]", "this node's peer ID and addresses", runID},
		{"peers", "[--json]", "connected peers", runPeers},
		{"connect", "MULTIADDR", "connect to a peer (multiaddr ending in /p2p/ID)", runConnect},
		{"join", "NAME [--json] | --invite TOKEN [--json]", "join a space (idempotent); with --invite, a private space by its invite", runJoin},
		{"create", "NAME [--sealed] [--json]", "make a private (members-only) space owned by this node, --sealed: content encrypted end to end; prints its ID", runCreate},
		{"invite", "SPACE [PEER] [--role member|admin] [--expires 24h] [--json]", "print an invite token to a private space (bound to PEER, or for any holder)", runInvite},
		{"members", "SPACE [--json]", "the members of a private space, with their roles", runMembers},
		{"remove", "SPACE PEER", "remove a member of a private space: it can no longer post or read what is sent after", runRemove},
		{"spaces", "[--json]", "joined spaces", runSpaces},
		{"leave", "NAME", "leave a space", runLeave},
		{"send", "NAME (--text TEXT | --data OBJECT) [--type T] [--ref ID]... [--to PEER]... [--ttl D] [--meta K=V]... [--json]", "send a message; prints its ID", runSend},
		{"read", "NAME [--after CURSOR] [--limit N] [--follow] [--json]", "read a space (replay, then follow with --follow)", runRead},
		{"show", "ID [--json]", "show one message", runShow},
		{"thread", "ID [--down] [--depth N] [--json]", "a message and what it replies to (or, with --down, its replies), nearest first", runThread},
		{"dm", "PEER (--text TEXT | --data OBJECT) [--kind K] [--reply-to ID] [--ttl D] [--meta K=V]... [--json]", "send a direct message (queued and retried until delivered or its TTL ends)", runDM},
		{"inbox", "[--after CURSOR] [--limit N] [--follow] [--json]", "direct messages received (replay, then follow with --follow)", runInbox},
		{"outbox", "[--dead | --sent] [--cancel ID] [--json]", "direct messages waiting for delivery, or (--dead) that could not be delivered, or (--sent) that were delivered", runOutbox},
		{"iacp", "(send FILE|- | show ID) [--json]", "send an IACP 1.x envelope as a direct message; show a direct message as one", runIACP},
		{"invoke", "(PEER NAME | --capability NAME) [--data INPUT] [--stream] [--timeout D] [--meta K=V]... [--json]", "call a peer's handler (or whichever peer offers a capability) and print its result (or its deltas)", runInvoke},
		{"handle", "NAME... (--exec CMD | --a2a URL [--a2a-auth CREDS]) [--allow trusted|anyone|PEER]... [--concurrency N] [--description D]", "serve calls to NAME by running CMD (input on stdin, result on stdout) or by forwarding them to an A2A agent; by default only trusted peers may call", runHandle},
		{"a2a", "(PEER [--skill NAME] | --capability NAME) [--json]", "the local A2A URL of a weft agent (its card and endpoints on this daemon's loopback listener), for any A2A client", runA2A},
		{"trust", trustUsage, "the peers this node trusts: they may call handlers that allow \"trusted\" (the default), and DM without limits", runTrust},
		{"discover", "CAPABILITY [--json] [--limit N] [--timeout D]", "find the peers that offer a capability, with their agent cards", runDiscover},
		{"card", "[PEER] [--name N] [--description D] [--capability C]... [--json]", "show an agent card (this node's, or a peer's); set this node's", runCard},
		{"health", "PEER [--json]", "a peer's heartbeat: status, load, round-trip time", runHealth},
		{"ui", "[--space NAME] [--no-open]", "print (and on a desktop open) the address of the daemon's live web view", runUI},
		{"mcp", "[--log-level L]", "serve MCP on stdin/stdout for an MCP client, bridged to the local daemon", runMCP},
		{"network-key", "new FILE", "make a network key for a closed mesh (give the file to every node: weft daemon --network-key FILE)", runNetworkKey},
		{"init", "[-o DIR] [--force] [NAME]...", "write SKILL.md files that teach an AI agent (e.g. Claude Code) weft and its conventions", runInit},
		{"version", "", "print the version", runVersion},
		{"help", "[COMMAND]", "a command's help: synopsis, description, flags, example", runHelp},
		{"completion", "bash|zsh|fish", "print a shell completion script", runCompletion},
	}
}

func main() {
	if dir := os.Getenv(floorPeerEnv); dir != "" { // weft bench's own peer
		os.Exit(serveFloorPeer(dir, os.Stdin, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	home, args, err := globalFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "weft: %s\nusage: weft [--home DIR] COMMAND [flags]   (see weft help)\n", err)
		return 2
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	cmds := commands()
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		if len(args) > 1 && (args[1] == "-h" || args[1] == "-help" || args[1] == "--help") {
			printHelp(stdout, c, flagSetOf(c))
			return 0
		}
		e := &env{stdout: stdout, stderr: stderr, home: home}
		err := c.run(ctx, e, args[1:])
		var ue usageError
		switch {
		case err == nil:
			return 0
		case isHelp(err):
			printHelp(stdout, c, e.fs)
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "weft %s: %s\nusage: weft %s %s\n", c.name, ue.msg, c.name, c.args)
			return 2
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			return 130
		default:
			fmt.Fprintf(stderr, "weft %s: %s\n", c.name, oneLine(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(stderr, "weft: unknown command %q (see weft help)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "weft: a peer-to-peer mesh for AI agents, with no server.")
	fmt.Fprintln(w, "\nusage: weft COMMAND [flags]   (every command takes --home DIR; default $WEFT_HOME or ~/.weft)")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w, "\nweft help COMMAND (or weft COMMAND --help) shows a command's arguments, flags and an example.")
}

// globalFlags takes the flags given before the command: --home DIR (the
// command's own --home wins). --version and --help are left for run.
func globalFlags(args []string) (home string, rest []string, err error) {
	home = client.DefaultHome()
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch name {
		case "home":
			if !hasValue {
				if len(args) < 2 {
					return "", nil, fmt.Errorf("flag needs an argument: --home")
				}
				value, args = args[1], args[1:]
			}
			home = value
			args = args[1:]
		case "version", "h", "help":
			return home, args, nil
		default:
			return "", nil, fmt.Errorf("unknown flag %s before the command (only --home, --version and --help go there)", args[0])
		}
	}
	return home, args, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// flags returns a flag set for a command with the flags every command has.
func (e *env) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("weft "+name, flag.ContinueOnError)
	// The flag package's own messages are not printed: a mistake is one
	// line and the synopsis, --help the command's help (run prints both).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&e.home, "home", e.home, "data dir of the daemon (default $WEFT_HOME or ~/.weft)")
	e.fs = fs
	return fs
}

// parse parses flags anywhere among the arguments and returns the
// positional ones; want is how many positionals the command takes.
func parse(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	pos, err := parseAny(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != want {
		if want == 0 {
			return nil, usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
		}
		return nil, usageError{fmt.Sprintf("want %d argument(s), got %d", want, len(pos))}
	}
	return pos, nil
}

// parseAny parses flags anywhere among the arguments and returns the
// positional ones, however many.
func parseAny(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return pos, nil
}

// strings is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// flagsSet returns the names of the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
