package localapi

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
)

// The fake has no private spaces: the routes are tested against real
// daemons (cmd/weft's private e2e test).

func (f *fake) CreatePrivate(context.Context, string, bool) (node.Space, error) {
	return node.Space{}, &node.Error{Code: api.CodeBadRequest, Msg: "fake: no private spaces"}
}

func (f *fake) Invite(string, node.InviteOptions) (member.Invite, string, error) {
	return member.Invite{}, "", &node.Error{Code: api.CodeUnknownSpace, Msg: "fake: no private spaces"}
}

func (f *fake) JoinInvite(context.Context, string) (node.Space, error) {
	return node.Space{}, &node.Error{Code: api.CodeBadInvite, Msg: "fake: no private spaces"}
}

func (f *fake) Members(string) (node.Space, []node.Member, error) {
	return node.Space{}, nil, &node.Error{Code: api.CodeUnknownSpace, Msg: "fake: no private spaces"}
}

func (f *fake) Remove(context.Context, string, peer.ID) (node.Message, error) {
	return node.Message{}, &node.Error{Code: api.CodeUnknownSpace, Msg: "fake: no private spaces"}
}
