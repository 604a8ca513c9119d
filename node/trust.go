package node

import (
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol/api"
)

// trustFile is the trust list's file in the node's home. The trust list is
// configuration the user edits, like the card, not message data: a small
// JSON file (written atomically) that a person can read, back up and keep
// when the store is wiped.
const trustFile = "trust.json"

// Trust puts p on the trust list under name (a trusted peer's name is
// replaced) and reports whether p is new to the list. Trusted peers may
// call the handlers whose policy is "trusted" (the default) and write to
// the inbox without the strangers' rate and quota.
func (n *Node) Trust(p peer.ID, name string) (policy.Trusted, bool, error) {
	if p == "" || p.Validate() != nil {
		return policy.Trusted{}, false, errorf(api.CodeBadPeer, "peer: %q is not a peer ID", p)
	}
	if p == n.mesh.ID() {
		return policy.Trusted{}, false, errorf(api.CodeBadPeer, "peer: that is this node")
	}
	if len(name) > policy.MaxTrustName {
		return policy.Trusted{}, false, errorf(api.CodeBadRequest, "name over %d bytes", policy.MaxTrustName)
	}
	t, added, err := n.trust.Add(p, name, time.Now())
	if err != nil {
		return policy.Trusted{}, false, err
	}
	n.gate.Forget(p) // its messages in the inbox no longer count as a stranger's
	if added {
		n.log.Info("peer trusted", "peer", p, "name", name)
	}
	return t, added, nil
}

// Untrust takes p off the trust list and reports whether it was on it.
// Its messages in the inbox count against the strangers' quotas from now
// on.
func (n *Node) Untrust(p peer.ID) (bool, error) {
	removed, err := n.trust.Remove(p)
	if err != nil || !removed {
		return false, err
	}
	n.log.Info("peer no longer trusted", "peer", p)
	if err := n.recountInbox(context.Background()); err != nil {
		return true, fmt.Errorf("untrusted, but the inbox recount failed: %w", err)
	}
	return true, nil
}

// Trusted returns the trust list, sorted by peer ID.
func (n *Node) Trusted() []policy.Trusted { return n.trust.List() }

// IsTrusted reports whether p is on the trust list.
func (n *Node) IsTrusted(p peer.ID) bool { return n.trust.IsTrusted(p) }

// DMPolicy returns the inbox's DM policy, with defaults filled in.
func (n *Node) DMPolicy() policy.DMConfig { return n.gate.Config() }
