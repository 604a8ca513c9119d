package mcp

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weftmesh/weft/protocol/api"
)

// Tools of private (members-only) spaces: create, invite, join by invite,
// members. send, read and wait work on them as on open spaces.

type (
	createArgs struct {
		Name   string `json:"name" jsonschema:"the new private space's name (members see it; it is not how outsiders find it)"`
		Sealed bool   `json:"sealed,omitempty" jsonschema:"also encrypt its content end to end: nodes that relay or store it without being members hold only ciphertext, and a removed member cannot read what is sent after its removal"`
	}
	inviteArgs struct {
		Space          string  `json:"space" jsonschema:"a private space's name or ID, which this node owns or administers"`
		Peer           string  `json:"peer,omitempty" jsonschema:"bind the invite to this peer ID; omit to let any holder of the token join"`
		Role           string  `json:"role,omitempty" jsonschema:"member (the default) or admin (may invite and remove members)"`
		ExpiresSeconds integer `json:"expires_seconds,omitempty" jsonschema:"how long the invite lasts (default one day)"`
	}
	joinInviteArgs struct {
		Invite string `json:"invite" jsonschema:"an invite token (weft-invite1.…) from a member of the private space"`
	}
	membersArgs struct {
		Space string `json:"space" jsonschema:"a private space's name or ID"`
	}
)

func (t *tools) registerPrivate(s *mcp.Server) {
	writes := &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)}
	local := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	addTool(s, &mcp.Tool{Name: "create_space", Annotations: writes,
		Description: "Create a private space: only members it invites can read or post in it, enforced by every node. This node owns it; sealed also encrypts its content end to end. Answers its name and id; invite others with invite."},
		t.createSpace)
	addTool(s, &mcp.Tool{Name: "invite", Annotations: writes,
		Description: "Make an invite token to a private space this node owns or administers, for one peer (peer) or for whoever holds it. Give the token to the invitee, who joins with join_invite; it works while this node is offline, until it expires."},
		t.invite, enum("role", "member", "admin"), limits(map[string][2]float64{"expires_seconds": {1, 365 * 24 * 3600}}))
	addTool(s, &mcp.Tool{Name: "join_invite", Annotations: writes,
		Description: "Join a private space by an invite token. Answers the space; its history arrives from its members."},
		t.joinInvite)
	addTool(s, &mcp.Tool{Name: "members", Annotations: local,
		Description: "The members of a private space, with their roles (owner, admin, member)."},
		t.members)
}

func (t *tools) createSpace(ctx context.Context, in createArgs) (any, error) {
	sp, err := t.c.CreateSpace(ctx, api.CreateRequest{Name: in.Name, Sealed: in.Sealed})
	if err != nil {
		return nil, err
	}
	return spaceOf(sp), nil
}

func (t *tools) invite(ctx context.Context, in inviteArgs) (any, error) {
	req := api.InviteRequest{Peer: in.Peer, Role: in.Role}
	if in.ExpiresSeconds > 0 {
		req.Expires = (time.Duration(in.ExpiresSeconds) * time.Second).String()
	}
	return t.c.Invite(ctx, in.Space, req)
}

func (t *tools) joinInvite(ctx context.Context, in joinInviteArgs) (any, error) {
	sp, err := t.c.JoinInvite(ctx, in.Invite)
	if err != nil {
		return nil, err
	}
	return spaceOf(sp), nil
}

func (t *tools) members(ctx context.Context, in membersArgs) (any, error) {
	return t.c.Members(ctx, in.Space)
}
