package node

import (
	"slices"
	"time"

	"github.com/weftmesh/weft/mesh"
)

// Status is one look at the node (weft status): who it is, whom it is
// connected to, its spaces, what waits to be delivered, what it serves.
type Status struct {
	Info
	Started  time.Time
	Peers    []mesh.PeerInfo
	Spaces   []Space
	Outbox   int      // direct messages waiting for delivery
	Handlers []string // the names agents serve calls to, sorted
	// Syncing is true while a history sync with a peer runs; Synced is
	// how many messages sync has fetched since the node started.
	Syncing bool
	Synced  int
}

// Status returns the node's status.
func (n *Node) Status() (Status, error) {
	spaces, err := n.Spaces()
	if err != nil {
		return Status{}, err
	}
	pending, err := n.store.OutboxLen()
	if err != nil {
		return Status{}, err
	}
	for i := range spaces {
		if st, ok := n.mesh.SpaceSync(spaces[i].ID); ok {
			spaces[i].Sync = &st
		}
	}
	return Status{
		Info:     n.Info(),
		Started:  n.started,
		Peers:    n.Peers(),
		Spaces:   spaces,
		Outbox:   pending,
		Handlers: n.handlers.names(),
		Syncing:  !n.mesh.SyncIdle(),
		Synced:   n.mesh.SyncStats().Received,
	}, nil
}

// names returns the names registered handlers serve, sorted.
func (hs *handlers) names() []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]string, 0, len(hs.byName))
	for name, list := range hs.byName {
		if len(list) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
