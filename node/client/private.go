package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/weftmesh/weft/protocol/api"
)

// CreatePrivate makes a members-only space owned by this node.
func (c *Client) CreatePrivate(ctx context.Context, name string) (api.Space, error) {
	return c.CreateSpace(ctx, api.CreateRequest{Name: name})
}

// CreateSealed makes a members-only space owned by this node whose content
// is encrypted end to end.
func (c *Client) CreateSealed(ctx context.Context, name string) (api.Space, error) {
	return c.CreateSpace(ctx, api.CreateRequest{Name: name, Sealed: true})
}

// CreateSpace makes a members-only space as req says.
func (c *Client) CreateSpace(ctx context.Context, req api.CreateRequest) (api.Space, error) {
	var s api.Space
	return s, c.do(ctx, http.MethodPost, "/v1/private", req, &s)
}

// Invite issues an invite token to a private space (by name or ID).
func (c *Client) Invite(ctx context.Context, space string, req api.InviteRequest) (api.Invite, error) {
	var inv api.Invite
	return inv, c.do(ctx, http.MethodPost, "/v1/spaces/"+url.PathEscape(space)+"/invites", req, &inv)
}

// JoinInvite joins a private space by an invite token.
func (c *Client) JoinInvite(ctx context.Context, token string) (api.Space, error) {
	var s api.Space
	return s, c.do(ctx, http.MethodPost, "/v1/join", api.JoinInviteRequest{Invite: token}, &s)
}

// Members lists a private space's members with their roles.
func (c *Client) Members(ctx context.Context, space string) (api.Members, error) {
	var m api.Members
	return m, c.do(ctx, http.MethodGet, "/v1/spaces/"+url.PathEscape(space)+"/members", nil, &m)
}

// RemoveMember removes a member of a private space; it returns the
// control message that removed it.
func (c *Client) RemoveMember(ctx context.Context, space, peer string) (api.Message, error) {
	var m api.Message
	return m, c.do(ctx, http.MethodDelete, "/v1/spaces/"+url.PathEscape(space)+"/members/"+url.PathEscape(peer), nil, &m)
}
