package mesh

import (
	"net"
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
)

// coalesceMax bounds the bytes a coalescing connection holds that are not
// yet written: a writer waits while more than this is pending. A larger
// single write is taken whole once the pending bytes are written.
const coalesceMax = 256 << 10

// coalesceKeep is the largest buffer a coalescing connection keeps for
// its next batch; a larger one (after a burst) is left to the GC.
const coalesceKeep = 16 << 10

// coalescingMuxer is the stream multiplexer (yamux) with its connection's
// writes coalesced (see coalescingConn). What goes on the wire is the
// same byte stream, so any libp2p node reads it: only how many bytes each
// encrypted frame and each write system call carries changes.
type coalescingMuxer struct {
	network.Multiplexer
}

// NewConn wraps nc, the secured connection, before the multiplexer gets it.
func (m coalescingMuxer) NewConn(nc net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	cc := newCoalescingConn(nc)
	mc, err := m.Multiplexer.NewConn(cc, isServer, scope)
	if err != nil {
		cc.Close()
		return nil, err
	}
	return mc, nil
}

// coalescingConn is a net.Conn whose writes are handed to a goroutine of
// its own, which writes all that has accumulated since its last write in
// one write. yamux writes each frame with a write of its own on the
// secured connection, so each frame cost an encryption, a length prefix
// and a write system call (on loopback, the receiver's kernel work
// besides): one per copy of every gossip message sent to every peer, the
// largest single item of a broadcasting daemon's CPU profile. Nothing is
// delayed to make batches: while the connection is idle each frame is
// written at once (one goroutine hand-off later); the frames that arrive
// while a write is under way go out together in the next.
//
// A write error is returned by the next Write (the bytes of the failed
// write and those pending are lost, as they would be when the error is
// returned directly, since the connection is then closed). Deadlines are
// the underlying connection's: the writing goroutine's write obeys the
// write deadline.
type coalescingConn struct {
	net.Conn

	mu      sync.Mutex
	cond    sync.Cond
	pending []byte // bytes not yet handed to the underlying Write
	spare   []byte // the buffer of the last write, reused for the next batch
	busy    bool   // the underlying Write is under way
	closed  bool
	err     error // of the underlying Write; the connection is closed
}

func newCoalescingConn(nc net.Conn) *coalescingConn {
	c := &coalescingConn{Conn: nc}
	c.cond.L = &c.mu
	go c.writeLoop()
	return c
}

// Write queues p to be written and returns at once, unless more than
// coalesceMax bytes are already pending: then it waits for them to be
// written. A p larger than coalesceKeep that finds the connection idle
// is written by Write itself, not copied.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && !c.closed && len(c.pending) > 0 && len(c.pending)+len(p) > coalesceMax {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closed:
		return 0, net.ErrClosed
	}
	if !c.busy && len(c.pending) == 0 && len(p) > coalesceKeep {
		// A large frame on an idle connection (a sync exchange's) is
		// written as it is, without copying it first.
		c.busy = true
		c.mu.Unlock()
		n, err := c.Conn.Write(p)
		c.mu.Lock()
		c.busy = false
		c.cond.Broadcast() // for the writing goroutine: bytes may have come meanwhile
		if err != nil && c.err == nil {
			c.err = err
		}
		return n, err
	}
	c.pending = append(c.pending, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// writeLoop writes what is pending, all of it in one write, until the
// connection is closed or a write fails.
func (c *coalescingConn) writeLoop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for (len(c.pending) == 0 || c.busy) && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if c.closed || c.err != nil {
			return
		}
		out := c.pending
		c.pending, c.spare = c.spare[:0], nil
		c.busy = true
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		c.busy = false
		if cap(out) <= coalesceKeep {
			c.spare = out
		}
		c.cond.Broadcast()
		if err != nil {
			c.err = err
			c.pending = nil
			c.mu.Unlock()
			c.Conn.Close() // the reader learns of it too
			c.mu.Lock()
			return
		}
	}
}

// Close closes the connection. What is pending is written first (within
// the write deadline set, as yamux does for its go-away frame) if no write
// is under way; otherwise the write under way is cut short and the
// pending bytes are dropped.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.Conn.Close()
	}
	c.closed = true
	last := c.pending
	c.pending = nil
	idle := !c.busy && c.err == nil
	c.cond.Broadcast()
	c.mu.Unlock()
	if idle && len(last) > 0 {
		_, _ = c.Conn.Write(last) // best effort: the connection is going away
	}
	return c.Conn.Close()
}
