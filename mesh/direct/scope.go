package direct

import (
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/protocol"
)

// ServiceName is the libp2p resource manager service the direct message
// streams this node serves belong to: its limits (set by the host, see
// mesh) bound the streams and their memory, per peer and in all.
const ServiceName = "weft.direct"

// bufMemory is what a served stream's buffered reader and writer hold.
const bufMemory = 2 * 4096

// MaxStreamMemory is the most a served stream reserves in its scope, for
// its life: one frame at the largest message size allowed, which the
// handler may hold at any time, and its buffers.
const MaxStreamMemory = protocol.MaxMessageSize + frameOverhead + bufMemory

// scoped wraps handle: before it runs, the stream is attached to
// ServiceName and the memory of one frame at the configured size limit is
// reserved in its scope. A stream the resource manager refuses is reset;
// the sender's outbox tries again later.
func (s *Service) scoped(handle network.StreamHandler) network.StreamHandler {
	mem := s.cfg.limits.MaxSize + frameOverhead + bufMemory
	return func(st network.Stream) {
		if err := st.Scope().SetService(ServiceName); err != nil {
			s.cfg.log.Debug("direct: stream refused by the resource manager", "peer", st.Conn().RemotePeer(), "err", err)
			st.Reset()
			return
		}
		if err := st.Scope().ReserveMemory(mem, network.ReservationPriorityAlways); err != nil {
			s.cfg.log.Debug("direct: no memory for the stream", "peer", st.Conn().RemotePeer(), "err", err)
			st.Reset()
			return
		}
		defer st.Scope().ReleaseMemory(mem)
		handle(st)
	}
}
