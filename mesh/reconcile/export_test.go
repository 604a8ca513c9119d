package reconcile

import (
	"bufio"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/protocol"
)

// ServeEvil makes h answer every sync session by replying to the hello
// with statusReconcile, sending the exchange frame built by frame, and
// then closing the session as if nothing were left, whatever the initiator
// says.
func ServeEvil(h host.Host, frame func(floor protocol.SyncKey) []byte) {
	h.SetStreamHandler(Protocol, func(s network.Stream) {
		defer s.Close()
		r, w, floor, ok := acceptHello(s)
		if !ok {
			return
		}
		_ = writeFrame(w, frame(floor))
		_ = w.Flush()
		// End as an honest peer would: the initiator's answer, then an
		// empty exchange. (An initiator that refused us has hung up.)
		if _, err := readFrame(r, maxFrame); err == nil {
			_ = writeFrame(w, (&exchange{}).encode(floor))
			_ = w.Flush()
		}
	})
}

// MessagesFrame returns a frame builder for an exchange carrying wires.
func MessagesFrame(wires ...[]byte) func(protocol.SyncKey) []byte { return msgsFrame(wires...) }

// acceptHello reads a session's hello from s and answers statusReconcile
// (buffered: the caller flushes w), as a test peer that plays along.
func acceptHello(s network.Stream) (r *bufio.Reader, w *bufio.Writer, floor protocol.SyncKey, ok bool) {
	r, w = bufio.NewReader(s), bufio.NewWriter(s)
	b, err := readFrame(r, maxFrame)
	if err != nil {
		return r, w, floor, false
	}
	h, err := decodeHello(b)
	if err != nil {
		return r, w, floor, false
	}
	return r, w, h.floor, writeFrame(w, (&reply{status: statusReconcile, floor: h.floor}).encode()) == nil
}
