package localapi

import (
	"context"

	"github.com/weftmesh/weft/node"
)

// FromNode returns n as a Backend.
func FromNode(n *node.Node) Backend { return nodeBackend{n} }

// nodeBackend adapts the methods of *node.Node that return concrete types
// to the interfaces of Backend.
type nodeBackend struct{ *node.Node }

func (b nodeBackend) RegisterHandler(spec node.HandlerSpec) (Handler, error) {
	h, err := b.Node.RegisterHandler(spec)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (b nodeBackend) StreamInvoke(ctx context.Context, inv node.Invocation) (CallStream, error) {
	cs, err := b.Node.StreamInvoke(ctx, inv)
	if err != nil {
		return nil, err
	}
	return cs, nil
}

func (b nodeBackend) StreamInvokeAny(ctx context.Context, inv node.Invocation) (CallStream, node.AnyResult, error) {
	cs, ar, err := b.Node.StreamInvokeAny(ctx, inv)
	if err != nil {
		return nil, ar, err
	}
	return cs, ar, nil
}
