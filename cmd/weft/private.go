package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/weftmesh/weft/protocol/api"
)

// Private spaces: create, invite, join --invite, members, remove.

// hasInviteFlag reports whether join was called with --invite.
func hasInviteFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name := strings.TrimLeft(a, "-")
		if strings.HasPrefix(a, "-") && (name == "invite" || strings.HasPrefix(name, "invite=")) {
			return true
		}
	}
	return false
}

// joinInvite joins the private space of an invite token (weft join --invite).
func joinInvite(ctx context.Context, e *env, token string, asJSON bool) error {
	if token == "" {
		return usageError{"--invite needs a token"}
	}
	sp, err := e.client().JoinInvite(ctx, token)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(e.stdout, sp)
	}
	fmt.Fprintf(e.stdout, "joined private space %s (%s)\n", sp.Name, sp.ID)
	return nil
}

func runCreate(ctx context.Context, e *env, args []string) error {
	fs := e.flags("create")
	asJSON := fs.Bool("json", false, "print JSON")
	sealed := fs.Bool("sealed", false, "also encrypt the space's content end to end")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	sp, err := e.client().CreateSpace(ctx, api.CreateRequest{Name: pos[0], Sealed: *sealed})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, sp)
	}
	fmt.Fprintln(e.stdout, sp.ID)
	return nil
}

func runInvite(ctx context.Context, e *env, args []string) error {
	fs := e.flags("invite")
	asJSON := fs.Bool("json", false, "print JSON")
	role := fs.String("role", "member", "the role the invite grants: member or admin")
	expires := fs.Duration("expires", 0, "how long the invite lasts (default 24h)")
	pos, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageError{"usage: weft invite SPACE [PEER] [--role member|admin] [--expires 24h]"}
	}
	req := api.InviteRequest{Role: *role}
	if len(pos) == 2 {
		req.Peer = pos[1]
	}
	if *expires < 0 {
		return usageError{"--expires must be positive"}
	}
	if *expires > 0 {
		req.Expires = expires.String()
	}
	inv, err := e.client().Invite(ctx, pos[0], req)
	if err != nil {
		return err
	}
	if inv.Sealed && inv.Peer == "" {
		fmt.Fprintln(e.stderr, "note: this token carries the sealed space's key: whoever holds it can read the space (bind it to a peer: weft invite SPACE PEER)")
	}
	if *asJSON {
		return printJSON(e.stdout, inv)
	}
	fmt.Fprintln(e.stdout, inv.Token)
	return nil
}

func runMembers(ctx context.Context, e *env, args []string) error {
	fs := e.flags("members")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	ms, err := e.client().Members(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, ms)
	}
	for _, m := range ms.Members {
		fmt.Fprintf(e.stdout, "%s\t%s\n", m.Peer, m.Role)
	}
	return nil
}

func runRemove(ctx context.Context, e *env, args []string) error {
	fs := e.flags("remove")
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	m, err := e.client().RemoveMember(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, m.ID)
	return nil
}
