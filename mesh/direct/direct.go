// Package direct is weft's direct message protocol (protocol.DirectProtocol):
// one-way, signed messages from one daemon to another, each acknowledged
// once the recipient has stored it.
//
// The sender opens a stream and writes frames, each a message's wire
// encoding (protocol.Message.Encode); the recipient answers every frame
// with a JSON protocol.DirectAck frame, in order: {"ok":true} once the
// message is durably in its inbox (or already was), or {"error":{…}} when
// it does not take it. A message that fails validation (malformed, bad
// signature, expired, from the future, not addressed to it, not sent by the
// stream's peer) is refused: code "refused" with the validation code as its
// reason, e.g. {"code":"refused","reason":"clock_skew","message":"…"} (see
// protocol.CallError). The inbox may refuse a message by its own policy
// (see Inbox): that refusal is passed on as it is. A recipient that cannot
// store a message answers code "internal". Neither is stored, and the
// stream stays usable; a frame that cannot be read (over the size limit,
// truncated) gets an error ack and the stream is closed.
//
// Delivery is at least once on the wire and exactly once in the inbox: a
// sender retries until it sees an ack, and the inbox drops duplicates by
// message ID.
package direct

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/internal/frame"
	"github.com/weftmesh/weft/protocol"
)

// Inbox stores the direct messages this node receives.
type Inbox interface {
	// Receive stores m, already validated and addressed to this node,
	// durably; it returns nil once m is stored or if it already was. To
	// refuse m (a policy, a rate, a quota) it returns a
	// *protocol.CallError, which the sender gets as the refusal; any other
	// error is a failure to store it. It may be called concurrently.
	Receive(ctx context.Context, m *protocol.Message) error
}

// ackLimit bounds an ack frame.
const ackLimit = 8 << 10

// frameOverhead is what the wire encoding adds to a body (format byte,
// length, signature), with room to spare.
const frameOverhead = 128

// Service serves the direct message protocol and sends direct messages.
type Service struct {
	h     host.Host
	inbox Inbox
	cfg   config
}

// New registers the direct message handler on h; messages that pass
// validation go to inbox.
func New(h host.Host, inbox Inbox, opts ...Option) (*Service, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &Service{h: h, inbox: inbox, cfg: cfg}
	h.SetStreamHandler(protocol.DirectProtocol, s.scoped(s.handle))
	return s, nil
}

// Close removes the handler. Streams being served end on their own.
func (s *Service) Close() error {
	s.h.RemoveStreamHandler(protocol.DirectProtocol)
	return nil
}

func (s *Service) handle(st network.Stream) {
	defer st.Close()
	from := st.Conn().RemotePeer()
	r := bufio.NewReader(st)
	w := bufio.NewWriter(st)
	limit := s.cfg.limits.MaxSize + frameOverhead
	for {
		st.SetReadDeadline(time.Now().Add(s.cfg.idle))
		b, err := frame.Read(r, limit)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			s.cfg.log.Debug("direct: unreadable frame", "peer", from, "err", err)
			// Answer, then stop reading: the deferred Close lets the
			// answer through, where a reset could drop it. The write
			// deadline set for the last ack may have passed.
			st.SetWriteDeadline(time.Now().Add(s.cfg.timeout))
			s.ack(st, w, protocol.Errorf(protocol.CodeBadRequest, "unreadable frame: %v", err))
			return
		}
		st.SetReadDeadline(time.Time{})
		ack := s.receive(from, b)
		st.SetWriteDeadline(time.Now().Add(s.cfg.timeout))
		if err := s.ack(st, w, ack); err != nil {
			st.Reset()
			return
		}
	}
}

// receive validates and stores one message from peer from; nil means
// stored.
func (s *Service) receive(from peer.ID, b []byte) *protocol.CallError {
	m, err := protocol.Validate(b, s.cfg.now(), s.cfg.limits)
	if err == nil {
		err = m.CheckDirect(s.h.ID())
	}
	if err == nil && m.Sender() != from {
		err = fmt.Errorf("sent by %s but signed by %s", from, m.From)
	}
	if err != nil {
		s.cfg.log.Debug("direct: message refused", "peer", from, "err", err)
		refusal := protocol.Errorf(protocol.CodeRefused, "%s: %v", protocol.Code(err), err)
		refusal.Reason = protocol.Code(err)
		return refusal
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
	defer cancel()
	if err := s.inbox.Receive(ctx, m); err != nil {
		var refusal *protocol.CallError
		if errors.As(err, &refusal) {
			s.cfg.log.Debug("direct: message refused by the inbox", "peer", from, "id", m.ID, "err", err)
			return refusal
		}
		s.cfg.log.Warn("direct: store message", "id", m.ID, "err", err)
		return protocol.Errorf(protocol.CodeInternal, "recipient could not store the message")
	}
	return nil
}

func (s *Service) ack(st network.Stream, w *bufio.Writer, e *protocol.CallError) error {
	a := protocol.DirectAck{OK: e == nil, Error: e}
	if err := frame.WriteJSON(w, a); err != nil {
		return err
	}
	return w.Flush()
}

// Send delivers messages (wire encodings) to peer to over one stream, in
// order, calling acked for each one the peer answered: with nil once it is
// stored there, or with the peer's refusal. Send returns an error when the
// stream could not be opened or broke before every message was answered;
// the messages not yet acked were then not delivered (or their ack was
// lost: sending them again is safe). The host must be able to reach to.
func (s *Service) Send(ctx context.Context, to peer.ID, msgs [][]byte, acked func(i int, refusal *protocol.CallError)) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout+time.Duration(len(msgs))*time.Second)
	defer cancel()
	// A relayed connection will do until hole punching replaces it.
	st, err := s.h.NewStream(network.WithAllowLimitedConn(ctx, "weft-direct"), to, protocol.DirectProtocol)
	if err != nil {
		return fmt.Errorf("open stream to %s: %w", to, err)
	}
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	r := bufio.NewReader(st)
	w := bufio.NewWriter(st)
	// Write everything first, then read the acks: the recipient answers in
	// order, and a pipeline costs one round trip instead of one per message.
	errc := make(chan error, 1)
	go func() {
		for _, b := range msgs {
			if err := frame.Write(w, b); err != nil {
				errc <- err
				return
			}
		}
		errc <- w.Flush()
	}()
	for i := range msgs {
		var a protocol.DirectAck
		if err := frame.ReadJSON(r, ackLimit, &a); err != nil {
			st.Reset()
			<-errc
			return fmt.Errorf("ack from %s: %w", to, contextErr(ctx, err))
		}
		if !a.OK && a.Error == nil {
			a.Error = protocol.Errorf(protocol.CodeBadRequest, "empty ack")
		}
		acked(i, a.Error)
	}
	if err := <-errc; err != nil {
		st.Reset()
		return fmt.Errorf("send to %s: %w", to, err)
	}
	return st.Close()
}

// contextErr prefers ctx's error to the stream error its cancellation
// caused.
func contextErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// logger returns l, or a logger that discards.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
