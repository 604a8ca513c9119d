package node

import (
	"bytes"
	"sync"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// The messages a node received last, decoded. Each follower of a space
// (an event stream, `weft follow`, an agent waiting for messages) reads
// each new message back from the store; decoding it again was half of
// what serving a follower cost (a message's wire bytes are parsed and its
// content checked as JSON). Wire bytes are immutable and so is their
// decoding, so the messages gossip and sync deliver are kept decoded, by
// ID, for reads to take instead of decoding. A message is kept before it
// is stored, since storing it wakes its followers at once; one that is
// then not stored is never asked for (a read takes a kept message only
// for a stored entry of the same bytes). What is kept is the message
// as stored, below anything the read path makes of it (a sealed space's
// decryption): a reader must not change a message it gets.

// Bounds of the cache: the last recentMessages messages of at most
// recentMaxWire bytes each (larger ones are rare and decoded on each
// read), so it holds a few MB at most.
const (
	recentMessages = 2048
	recentMaxWire  = 4 << 10
)

// recentCache is the node's cache of received messages, decoded: a ring
// of the last recentMessages, first in first out. The zero value is
// ready; it is safe for concurrent use.
type recentCache struct {
	mu   sync.Mutex
	byID map[protocol.ID]*protocol.Message
	ring []protocol.ID // by insertion, oldest at next once full
	next int
}

// put keeps m, decoded, and reports whether it was kept already (a
// message received twice).
func (c *recentCache) put(m *protocol.Message) (again bool) {
	if len(m.Wire()) > recentMaxWire {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = make(map[protocol.ID]*protocol.Message, recentMessages)
		c.ring = make([]protocol.ID, 0, recentMessages)
	}
	if _, ok := c.byID[m.ID]; ok {
		return true
	}
	if len(c.ring) < recentMessages {
		c.ring = append(c.ring, m.ID)
	} else {
		delete(c.byID, c.ring[c.next])
		c.ring[c.next] = m.ID
		c.next = (c.next + 1) % recentMessages
	}
	c.byID[m.ID] = m
	return false
}

// get returns the decoded message of a stored entry, if kept: one whose
// wire bytes are the entry's.
func (c *recentCache) get(e store.Entry) (*protocol.Message, bool) {
	c.mu.Lock()
	m, ok := c.byID[e.ID]
	c.mu.Unlock()
	if !ok || !bytes.Equal(m.Wire(), e.Raw) {
		return nil, false
	}
	return m, true
}

// decode reads back a stored entry (see readStored), from the cache of
// received messages when it holds it.
func (n *Node) decode(e store.Entry) (Message, error) {
	if m, ok := n.recent.get(e); ok {
		return Message{Message: m, Cursor: e.Cursor}, nil
	}
	return readStored(e)
}
