package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/weftmesh/weft/protocol/api"
)

func runDiscover(ctx context.Context, e *env, args []string) error {
	fs := e.flags("discover")
	limit := fs.Int("limit", 0, "at most N providers (0: all)")
	wait := fs.Duration("timeout", 0, "how long to search (default 10s)")
	asJSON := fs.Bool("json", false, "print one JSON provider (card and addresses) per line")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *limit < 0 || *wait < 0 {
		return usageError{"--limit and --timeout must not be negative"}
	}
	found, err := e.client().Discover(ctx, pos[0], *limit, *wait)
	if err != nil {
		return err
	}
	for _, p := range found {
		if *asJSON {
			if err := printJSON(e.stdout, p); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(e.stdout, "%s  %s\n", p.Card.ID, cardLine(p.Card))
	}
	return nil
}

// cardLine is a card for a person: name, description, capabilities.
func cardLine(c api.Card) string {
	var caps []string
	for _, cp := range c.Capabilities {
		caps = append(caps, cp.Name)
	}
	parts := []string{}
	if c.Name != "" {
		parts = append(parts, c.Name)
	}
	if c.Description != "" {
		parts = append(parts, "— "+c.Description)
	}
	parts = append(parts, "["+strings.Join(caps, ", ")+"]")
	return strings.Join(parts, " ")
}

func runCard(ctx context.Context, e *env, args []string) error {
	fs := e.flags("card")
	name := fs.String("name", "", "set this node's agent name")
	desc := fs.String("description", "", "set this node's description")
	var caps stringList
	fs.Var(&caps, "capability", "set the static capabilities this node offers (repeatable; replaces the list)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	c := e.client()
	set := flagsSet(fs)
	var card api.Card
	switch {
	case len(pos) > 1:
		return usageError{"give at most one peer"}
	case len(pos) == 1:
		if set["name"] || set["description"] || set["capability"] {
			return usageError{"--name, --description and --capability set this node's card; give no peer"}
		}
		card, err = c.PeerCard(ctx, pos[0])
	case set["name"] || set["description"] || set["capability"]:
		var u api.CardUpdate
		if set["name"] {
			u.Name = name
		}
		if set["description"] {
			u.Description = desc
		}
		if set["capability"] {
			list := []api.Capability{}
			for _, n := range caps {
				list = append(list, api.Capability{Name: n})
			}
			u.Capabilities = &list
		}
		card, err = c.SetCard(ctx, u)
	default:
		card, err = c.Card(ctx)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, card)
	}
	fmt.Fprintf(e.stdout, "%s  %s\n", card.ID, cardLine(card))
	return nil
}

func runHealth(ctx context.Context, e *env, args []string) error {
	fs := e.flags("health")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	h, err := e.client().Health(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, h)
	}
	fmt.Fprintf(e.stdout, "%s  %s  load %.2f  calls %d  handlers %d  up %ds  rtt %.2fms\n",
		h.Peer, h.Status, h.Load, h.ActiveCalls, h.Handlers, h.UptimeS, h.RTTMillis)
	return nil
}
