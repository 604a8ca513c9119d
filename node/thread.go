package node

import (
	"cmp"
	"errors"
	"slices"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// Thread bounds.
const (
	DefaultThreadDepth = 100
	MaxThreadDepth     = 1000
	maxThreadSize      = 1000 // messages in one answer
)

// ThreadMessage is a message of a thread with its distance from the
// message the thread was asked for (0 for that message itself).
type ThreadMessage struct {
	Depth int
	Message
}

// Thread is a message and its ancestors or descendants, nearest first,
// and by creation time within one depth.
type Thread struct {
	Messages  []ThreadMessage
	Truncated bool // the depth, count or byte limit (MaxAnswerBytes) cut it short
}

// Thread walks the refs.messages links of id breadth-first to maxDepth:
// up (ancestors: what it replies to) or down (descendants: the replies to
// it), over the messages this node holds.
func (n *Node) Thread(id protocol.ID, up bool, maxDepth int) (Thread, error) {
	if maxDepth < 0 || maxDepth > MaxThreadDepth {
		return Thread{}, errorf(api.CodeBadRequest, "depth must be 0..%d", MaxThreadDepth)
	}
	th := Thread{Messages: []ThreadMessage{}}
	seen := map[protocol.ID]bool{id: true}
	level := []protocol.ID{id}
	size := 0 // bytes of the messages taken, as MaxAnswerBytes counts
	for depth := 0; len(level) > 0; depth++ {
		var found []ThreadMessage
		var next []protocol.ID
		full := false
		for _, mid := range level {
			m, err := n.Get(mid)
			if errors.Is(err, store.ErrNotFound) && depth > 0 {
				continue // a message this node does not hold (yet)
			}
			if err != nil {
				return th, err
			}
			w := m.AnswerBytes()
			if size+w > MaxAnswerBytes && depth > 0 {
				full = true // the rest of this depth, by link order, is left out
				break
			}
			size += w
			found = append(found, ThreadMessage{Depth: depth, Message: m})
			links := m.Refs.Messages
			if !up {
				if links, err = n.store.Replies(mid, maxThreadSize); err != nil {
					return th, err
				}
			}
			for _, l := range links {
				if !seen[l] {
					seen[l] = true
					next = append(next, l)
				}
			}
		}
		slices.SortFunc(found, func(a, b ThreadMessage) int {
			return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID.String(), b.ID.String()))
		})
		th.Messages = append(th.Messages, found...)
		if full {
			th.Truncated = true
			return th, nil
		}
		if len(th.Messages) >= maxThreadSize {
			th.Messages, th.Truncated = th.Messages[:maxThreadSize], true
			return th, nil
		}
		if depth == maxDepth {
			th.Truncated = len(next) > 0
			break
		}
		level = next
	}
	return th, nil
}
