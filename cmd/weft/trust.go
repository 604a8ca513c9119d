package main

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/protocol/api"
)

const trustUsage = "add PEER [--name N] | remove PEER | list [--json]"

// runTrust manages the trust list: the peers that may call this node's
// handlers that allow "trusted" (the default) and write to its inbox
// without the strangers' limits.
func runTrust(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{"give add, remove or list"}
	}
	sub, args := args[0], args[1:]
	fs := e.flags("trust " + sub)
	asJSON := fs.Bool("json", false, "print JSON")
	c := e.client()
	switch sub {
	case "add":
		name := fs.String("name", "", "your name for the peer")
		pos, err := parse(fs, args, 1)
		if err != nil {
			return err
		}
		t, err := c.Trust(ctx, pos[0], *name)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.stdout, t)
		}
		fmt.Fprintf(e.stdout, "trusted %s%s\n", t.Peer, nameText(t.Name))
		return nil
	case "remove":
		pos, err := parse(fs, args, 1)
		if err != nil {
			return err
		}
		removed, err := c.Untrust(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.stdout, api.Untrusted{Peer: pos[0], Removed: removed})
		}
		if removed {
			fmt.Fprintf(e.stdout, "%s is no longer trusted\n", pos[0])
		} else {
			fmt.Fprintf(e.stdout, "%s was not trusted\n", pos[0])
		}
		return nil
	case "list":
		if _, err := parse(fs, args, 0); err != nil {
			return err
		}
		list, err := c.Trusted(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.stdout, list)
		}
		if len(list.Peers) == 0 {
			e.empty("no trusted peers (weft trust add PEER)")
		}
		for _, t := range list.Peers {
			fmt.Fprintf(e.stdout, "%s  added %s%s\n", t.Peer, t.Added.Local().Format("2006-01-02 15:04"), nameText(t.Name))
		}
		if d := list.DM; d != nil {
			fmt.Fprintf(e.stderr, "direct messages from %s; from each other peer at most %g/s (bursts of %d) and %d held, from all of them %g/s (bursts of %d) and %d held\n",
				dmWho(d.Policy), d.Rate, d.Burst, d.Quota, d.AllRate, d.AllBurst, d.AllQuota)
		}
		return nil
	}
	return usageError{fmt.Sprintf("unknown subcommand %q: give add, remove or list", sub)}
}

func nameText(name string) string {
	if name == "" {
		return ""
	}
	return "  (" + name + ")"
}

func dmWho(policy string) string {
	if policy == "trusted" {
		return "trusted peers only"
	}
	return "anyone"
}
