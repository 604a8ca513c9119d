package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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

// newPubSub starts gossipsub for h. Messages carry no libp2p signature or
// author (weft messages are signed by their sender), so message IDs must
// come from the content: see gossipID. The router stops when ctx ends.
func newPubSub(ctx context.Context, h host.Host, tr *meshTracer, log *slog.Logger) (*pubsub.PubSub, error) {
	return pubsub.NewGossipSub(ctx, h, append(pubsubOptions(log), pubsub.WithRawTracer(tr))...)
}

// pubsubOptions are the gossipsub options every weft node must share.
func pubsubOptions(log *slog.Logger) []pubsub.Option {
	return []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithMessageIdFn(gossipID),
		pubsub.WithMaxMessageSize(maxRPCSize),
		pubsub.WithPeerExchange(true),
		pubsub.WithFloodPublish(true),
		pubsub.WithLogger(log.With("component", "gossipsub")),
	}
}

// gossipID is the gossipsub message ID of a weft wire message: its weft ID
// followed by its signature. Keying the seen-cache by weft ID alone would
// let anyone suppress a message: a copy with a corrupted signature has the
// same weft ID, is rejected, and would leave the ID marked as seen, so the
// real message arriving next would be dropped as a duplicate. Only the
// sender can make another valid signature over the same body. Data that is
// not a weft frame gets the SHA-256 of its bytes, in hex.
func gossipID(pm *pb.Message) string {
	body, sig, ok := splitWire(pm.Data)
	if !ok {
		sum := sha256.Sum256(pm.Data)
		return hex.EncodeToString(sum[:])
	}
	return protocol.MessageID(body).String() + "." + hex.EncodeToString(sig)
}

// splitWire cuts a wire message into body and signature without parsing
// the body: the ID function runs on every copy of every message, duplicates
// included, so it must be cheap. It follows protocol.Decode's framing; a
// test checks the two agree.
func splitWire(wire []byte) (body, sig []byte, ok bool) {
	if len(wire) == 0 || wire[0] != 0x01 {
		return nil, nil, false
	}
	n, k := binary.Uvarint(wire[1:])
	if k <= 0 {
		return nil, nil, false
	}
	rest := wire[1+k:]
	if n > uint64(len(rest)) || uint64(len(rest))-n != protocol.SignatureSize {
		return nil, nil, false
	}
	return rest[:n], rest[n:], true
}

// validator returns the gossipsub validator of space: only a valid weft
// message of that space is accepted, and it is handed on, decoded, in
// ValidatorData. Expired or future-dated messages are ignored rather than
// rejected: the relaying peer may only have a different clock.
func validator(space protocol.ID, lim protocol.Limits, now func() time.Time, log *slog.Logger) pubsub.ValidatorEx {
	return func(_ context.Context, from peer.ID, pm *pubsub.Message) pubsub.ValidationResult {
		msg, err := protocol.Validate(pm.Data, now(), lim)
		switch {
		case errors.Is(err, protocol.ErrExpired), errors.Is(err, protocol.ErrClockSkew):
			log.Debug("gossip message ignored", "space", space, "peer", from, "reason", protocol.Code(err), "err", err)
			return pubsub.ValidationIgnore
		case err != nil:
			log.Debug("gossip message rejected", "space", space, "peer", from, "reason", protocol.Code(err), "err", err)
			return pubsub.ValidationReject
		case msg.Space != space:
			log.Debug("gossip message rejected", "space", space, "peer", from, "reason", "wrong_space", "msg_space", msg.Space, "id", msg.ID)
			return pubsub.ValidationReject
		}
		pm.ValidatorData = msg
		return pubsub.ValidationAccept
	}
}
