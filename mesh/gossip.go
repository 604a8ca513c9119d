package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// maxRPCSize bounds one gossipsub RPC: the largest message plus room for the
// topic name, protobuf framing and piggybacked control messages.
const maxRPCSize = protocol.MaxWireSize + 64<<10

// newPubSub starts gossipsub for h, with peer scoring: the flood guard's
// penalties are its application-specific score, and board gets the
// scores once a second. Messages carry no libp2p signature or author (weft
// messages are signed by their sender), so message IDs must come from the
// content: see gossipID. The router stops when ctx ends.
func newPubSub(ctx context.Context, h host.Host, tr *meshTracer, g *floodGuard, board *scoreBoard, access func(protocol.ID, peer.ID) bool, log *slog.Logger) (*pubsub.PubSub, error) {
	opts := append(PubSubOptions(log), spaceAccessOptions(access)...)
	opts = append(opts,
		pubsub.WithRawTracer(tr),
		pubsub.WithPeerScore(peerScoreParams(g.score), peerScoreThresholds()),
		// After WithPeerScore, which it needs.
		pubsub.WithPeerScoreInspect(pubsub.ExtendedPeerScoreInspectFn(board.inspect), scoreInterval),
	)
	return pubsub.NewGossipSub(ctx, h, opts...)
}

// PubSubOptions are the gossipsub options every weft node must share: a
// gossipsub router built with them (and nothing of the mesh's scoring,
// access filters or validation) carries a space's messages as weft nodes
// do, which is how weft bench measures what gossip alone costs.
func PubSubOptions(log *slog.Logger) []pubsub.Option {
	return []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithMessageIdFn(gossipID),
		pubsub.WithMaxMessageSize(maxRPCSize),
		pubsub.WithPeerExchange(true),
		pubsub.WithFloodPublish(true),
		pubsub.WithGossipSubParams(gossipParams()),
		// Room for bursts: gossipsub drops what arrives while its
		// validation queue is full, and what is to be sent to a peer
		// whose outbound queue is full (32 each by default, which a
		// 10-daemon space at 2,000 msg/s overflowed; sync then fetches
		// the message). A queued message weighs its wire size.
		pubsub.WithValidateQueueSize(validateQueue),
		// One validation worker, so that a peer's messages reach the
		// space in the order they came: with one per CPU, two messages
		// of one RPC were validated at once and a reply could be handed
		// over before what it answers (a follower saw so in CI). The
		// validator is the signature check and a few lookups (~50 µs):
		// one core checks some 20,000 a second.
		pubsub.WithValidateWorkers(1),
		pubsub.WithPeerOutboundQueueSize(peerQueue),
		pubsub.WithSeenMessagesTTL(seenTTL),
		pubsub.WithLogger(log.With("component", "gossipsub")),
	}
}

// seenTTL is how long gossipsub remembers a message's ID to drop its
// duplicates. Its default, 2 minutes, held ~300 bytes per message (the ID
// is ~190 characters): 45 MB of a daemon's heap while 650 messages a second
// were written, and ~4× that at 2,000 a second. Copies of a message reach
// a node within the few heartbeats gossipsub keeps it for (5 s); a later
// copy is checked again, and the store knows it.
const seenTTL = 30 * time.Second

// validateQueue and peerQueue are the sizes of gossipsub's validation
// queue and of each peer's outbound queue (see PubSubOptions).
const (
	validateQueue = 256
	peerQueue     = 128
)

// gossipParams are gossipsub's defaults with a smaller mesh and less
// gossip. A node gets a full copy of each message from every mesh peer
// that has it first, and reads, decrypts and checks each copy's ID; with
// the default degree bounds (D 6, Dhi 12) every member of a space of up to
// 13 nodes was in every other's mesh, so a node of a 10-node space took
// 8–9 copies of each message (its publisher floods it to all of them
// besides). D 4 with Dhi 6 keeps a mesh connected (each node still has at
// least Dlo 3 mesh peers after a prune, the publisher's flood reaches
// every subscriber it knows) at about half the copies. Dout and Dscore are
// scaled down with D, as gossipsub requires (Dout < Dlo, Dout ≤ D/2,
// Dscore ≤ D).
//
// Gossip (IHAVE) is the backup of the mesh: at each heartbeat a node lists
// the IDs of the messages of the last HistoryGossip heartbeats to Dlazy
// peers outside its mesh (at least; GossipFactor of them if more). With
// the defaults (3 heartbeats, 6 peers) every non-mesh peer of a 10-node
// space heard each ID three times: 15 IDs in and out per message per node,
// more bytes than the message's own copies, each ID decoded, allocated and
// looked up. Advertising the last heartbeat's messages to 3 peers (each
// ID 3 times) still offers every message to peers outside the mesh once
// (a node that missed it asks: IWANT); sync repairs what both miss.
//
// UnsubscribeBackoff is the backoff a node that leaves a space asks of its
// mesh peers (in the PRUNE it sends them) and keeps towards them: 1 s, the
// least the PRUNE can carry (whole seconds; 0 means "use your own
// PruneBackoff", a minute), instead of 10 s. A node that left a space and
// joined it again after a restart GRAFTed inside the 10 s, which cost it a
// behaviour penalty at each peer and a fresh minute's backoff: out of the
// space's mesh for 74 s (TestLeaveRejoinGossip), with a few such cycles
// enough to have it graylisted. The trade-off: a leaver that rejoins at
// once (inside the second) still gets the penalty and the minute, and
// peers that leave and rejoin a space in a loop churn the mesh every
// second instead of every 10 (each GRAFT and PRUNE is one small control
// message; PruneBackoff, which keeps peers pruned for an over-full mesh or
// a bad score out, stays a minute). Without a restart the leaver's own
// backoff towards its old mesh peers lasts until gossipsub clears it (every
// 15 heartbeats): it gets the space by gossip (IHAVE) meanwhile.
func gossipParams() pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.D, p.Dlo, p.Dhi, p.Dscore, p.Dout = 4, 3, 6, 2, 1
	p.Dlazy, p.HistoryGossip = 3, 1
	p.UnsubscribeBackoff = time.Second
	return p
}

// gossipIDSize is how many bytes of a wire message's SHA-256 make its
// gossipsub message ID: 128 bits, as hard to collide with on purpose as
// to guess.
const gossipIDSize = 16

// gossipID is the gossipsub message ID of data: the first 16 bytes of its
// SHA-256, in unpadded URL-safe base64 (22 characters). It covers the
// whole wire message, signature included: an ID of the weft ID alone
// would let anyone suppress a message, since a copy with a corrupted
// signature has the same weft ID, is rejected, and would leave the ID
// marked as seen, so the real message arriving next would be dropped as a
// duplicate. The ID is computed for every copy of every message,
// duplicates included, kept in the seen-cache, and listed in every gossip
// (IHAVE) a node sends and receives, once per peer: it was the weft ID
// and the signature in hex (193 characters), and the gossip alone came
// to more bytes than the messages.
func gossipID(pm *pb.Message) string {
	sum := sha256.Sum256(pm.Data)
	return base64.RawURLEncoding.EncodeToString(sum[:gossipIDSize])
}

// Gate is what a Sink may also implement to have a say in what gossip
// accepts of its space, beyond the protocol's checks. Its methods are
// called for every message gossip brings, concurrently: they must be
// cheap and safe for concurrent use.
type Gate interface {
	// Known reports whether author is a known member of space: it gets a
	// publish rate of its own (RateLimits.Author), while the authors it
	// does not know share one (RateLimits.Strangers). A peer ID costs
	// nothing, so "known" should take more than one accepted message.
	Known(space protocol.ID, author peer.ID) bool
	// Admit reports (with an error saying why) that this node would not
	// store m: over a size limit or a quota of its own. Gossip then
	// ignores m: it is neither stored nor forwarded, and the peer that
	// sent it is not penalised, since another node's policy may differ.
	Admit(m *protocol.Message) error
}

// Refusals is what a Sink may also implement to hear of the gossip
// messages of its space that were not accepted (rejected or ignored), with
// the reason: a protocol error code (bad_signature, expired, …),
// "rate_peer", "rate_author", "rate_strangers", "wrong_space" or
// "declined" (by the Gate). Messages this node publishes are not reported.
// Refused is called concurrently from the validators: it must be cheap.
type Refusals interface {
	Refused(space protocol.ID, reason string)
}

// validator returns the gossipsub validator of space: only a valid weft
// message of that space, within the rate limits (g) and admitted by gate
// (if not nil), is accepted, and it is handed on, decoded, in
// ValidatorData. Messages this node publishes (from self) are accepted
// as they are: the node built and signed them (Mesh.Publish takes only a
// *protocol.Message), its receive loop skips them, and checking them
// again cost a signature verification per send, a fifth of the send
// path's CPU.
//
// Reject, which costs the sender gossip score, is only for what no honest
// node forwards: a message that fails the protocol's own checks. What
// only this node's policy refuses is ignored: a message over its size
// limit (but within the protocol's), over a rate (the sender's score
// drops through the flood guard, if it is to blame), refused by the gate.
// Expired or future-dated messages are ignored too: the relaying peer may
// only have a different clock.
//
// refused, if not nil, is told why each message from a peer was not
// accepted (see Refusals).
//
// Each message accepted is noted in fl (if not nil) as on its way to the
// Sink, for gap repair (see inflight).
func validator(space protocol.ID, self peer.ID, lim protocol.Limits, now func() time.Time, v *protocol.Verifier, g *floodGuard, gate Gate, refused func(reason string), fl *inflight, log *slog.Logger) pubsub.ValidatorEx {
	if refused == nil {
		refused = func(string) {}
	}
	return func(_ context.Context, from peer.ID, pm *pubsub.Message) pubsub.ValidationResult {
		if from == self {
			return pubsub.ValidationAccept // built and signed here; its receive loop skips it
		}
		if v := g.forwarded(space, from, len(pm.Data)); v != within {
			refused(v.reason())
			return pubsub.ValidationIgnore
		}
		msg, err := v.Validate(pm.Data, now(), lim)
		switch {
		case errors.Is(err, protocol.ErrExpired), errors.Is(err, protocol.ErrClockSkew):
			log.Debug("gossip message ignored", "space", space, "peer", from, "reason", protocol.Code(err), "err", err)
			refused(protocol.Code(err))
			return pubsub.ValidationIgnore
		case err != nil && policyOnly(pm.Data, now()):
			log.Debug("gossip message ignored: over this node's limits", "space", space, "peer", from, "reason", protocol.Code(err), "err", err)
			refused(protocol.Code(err))
			return pubsub.ValidationIgnore
		case err != nil:
			log.Debug("gossip message rejected", "space", space, "peer", from, "reason", protocol.Code(err), "err", err)
			refused(protocol.Code(err))
			return pubsub.ValidationReject
		case msg.Space != space:
			log.Debug("gossip message rejected", "space", space, "peer", from, "reason", "wrong_space", "msg_space", msg.Space, "id", msg.ID)
			refused("wrong_space")
			return pubsub.ValidationReject
		}
		known := gate == nil || gate.Known(space, msg.Sender())
		if v := g.authored(space, msg.Sender(), from, known, len(pm.Data)); v != within {
			log.Debug("gossip message ignored", "space", space, "peer", from, "reason", v.String(), "author", msg.Sender(), "id", msg.ID)
			refused(v.reason())
			return pubsub.ValidationIgnore
		}
		if gate != nil {
			if err := gate.Admit(msg); err != nil {
				log.Debug("gossip message ignored: not admitted", "space", space, "peer", from, "id", msg.ID, "err", err)
				refused("declined")
				return pubsub.ValidationIgnore
			}
		}
		pm.ValidatorData = &accepted{msg: msg, known: known}
		fl.add(msg.ID)
		return pubsub.ValidationAccept
	}
}

// accepted is what the validator hands on in a message's ValidatorData.
type accepted struct {
	msg   *protocol.Message
	known bool // its author is a known member of the space (see Gate.Known)
}

// policyOnly reports whether wire, refused under this node's limits, is
// a valid message under the widest limits the protocol allows: another
// node may accept and forward it in good faith. Only refusals are checked
// again, so an honest message costs one validation.
func policyOnly(wire []byte, now time.Time) bool {
	_, err := protocol.Validate(wire, now, protocol.StoredLimits())
	return err == nil || errors.Is(err, protocol.ErrExpired) || errors.Is(err, protocol.ErrClockSkew)
}
