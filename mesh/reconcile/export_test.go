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
		r, w := bufio.NewReader(s), bufio.NewWriter(s)
		b, err := readFrame(r, maxFrame)
		if err != nil {
			return
		}
		hl, err := decodeHello(b)
		if err != nil {
			return
		}
		_ = writeFrame(w, (&reply{status: statusReconcile, floor: hl.floor}).encode())
		_ = writeFrame(w, frame(hl.floor))
		_ = w.Flush()
		// End as an honest peer would: the initiator's answer, then an
		// empty exchange. (An initiator that refused us has hung up.)
		if _, err := readFrame(r, maxFrame); err == nil {
			_ = writeFrame(w, (&exchange{}).encode(hl.floor))
			_ = w.Flush()
		}
	})
}

// MessagesFrame returns a frame builder for an exchange carrying wires.
func MessagesFrame(wires ...[]byte) func(protocol.SyncKey) []byte { return msgsFrame(wires...) }
