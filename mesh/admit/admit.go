// Package admit is the stream protocol by which a peer joining a private
// space presents its signed join message (which carries its invite) to a
// member, before it subscribes to the space's topic: members take in the
// subscriptions of members only, so the join must be known to them first.
// One frame each way: the join's wire encoding (uvarint length first),
// then the member's verdict as a small JSON object.
package admit

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

// Protocol is the stream protocol ID.
const Protocol = "/weft/private/join/1.0.0"

// ServiceName is the resource-manager service of its streams.
const ServiceName = "weft.admit"

// Timeout bounds one exchange.
const Timeout = 20 * time.Second

// maxVerdict bounds a verdict frame.
const maxVerdict = 4 << 10

// Handler decides a presented join from peer from: nil accepts it (it is
// stored), an error refuses it, its text and Code sent back.
type Handler func(ctx context.Context, from peer.ID, wire []byte) error

// Coder is what a Handler's error may implement to send a stable code.
type Coder interface{ ErrorCode() string }

// Refused is a member's refusal of a presented join.
type Refused struct {
	Code string
	Msg  string
}

func (e *Refused) Error() string { return e.Msg }

type verdict struct {
	OK    bool   `json:"ok"`
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// Service answers presented joins on a host.
type Service struct {
	h      host.Host
	handle Handler
	ctx    context.Context
	cancel context.CancelFunc
}

// New registers the protocol's handler on h.
func New(h host.Host, handle Handler) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{h: h, handle: handle, ctx: ctx, cancel: cancel}
	h.SetStreamHandler(Protocol, s.serve)
	return s
}

// Close removes the handler and cancels the joins being decided.
func (s *Service) Close() error {
	s.h.RemoveStreamHandler(Protocol)
	s.cancel()
	return nil
}

func (s *Service) serve(str network.Stream) {
	defer str.Close()
	if err := str.Scope().SetService(ServiceName); err != nil {
		_ = str.Reset()
		return
	}
	_ = str.SetDeadline(time.Now().Add(Timeout))
	wire, err := readFrame(bufio.NewReader(str), protocol.MaxWireSize)
	if err != nil {
		_ = str.Reset()
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, Timeout)
	defer cancel()
	v := verdict{OK: true}
	if err := s.handle(ctx, str.Conn().RemotePeer(), wire); err != nil {
		v = verdict{Code: "refused", Error: err.Error()}
		var c Coder
		if errors.As(err, &c) {
			v.Code = c.ErrorCode()
		}
	}
	b, _ := json.Marshal(v)
	if len(b) > maxVerdict {
		b, _ = json.Marshal(verdict{Code: v.Code, Error: v.Error[:maxVerdict/2]})
	}
	_ = writeFrame(str, b)
}

// Present sends a join's wire encoding to member p and returns its
// verdict: nil once p has stored it, a *Refused when p refused it.
func Present(ctx context.Context, h host.Host, p peer.ID, wire []byte) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	str, err := h.NewStream(network.WithAllowLimitedConn(ctx, "weft-admit"), p, Protocol)
	if err != nil {
		return fmt.Errorf("present join to %s: %w", p, err)
	}
	defer str.Close()
	if err := str.Scope().SetService(ServiceName); err != nil {
		_ = str.Reset()
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = str.SetDeadline(d)
	}
	if err := writeFrame(str, wire); err != nil {
		_ = str.Reset()
		return fmt.Errorf("present join to %s: %w", p, err)
	}
	_ = str.CloseWrite()
	b, err := readFrame(bufio.NewReader(str), maxVerdict)
	if err != nil {
		_ = str.Reset()
		return fmt.Errorf("present join to %s: verdict: %w", p, err)
	}
	var v verdict
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("present join to %s: verdict: %w", p, err)
	}
	if !v.OK {
		return &Refused{Code: v.Code, Msg: v.Error}
	}
	return nil
}

func writeFrame(w io.Writer, b []byte) error {
	buf := binary.AppendUvarint(make([]byte, 0, len(b)+binary.MaxVarintLen64), uint64(len(b)))
	_, err := w.Write(append(buf, b...))
	return err
}

func readFrame(r *bufio.Reader, limit int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) {
		return nil, fmt.Errorf("frame of %d bytes, limit %d", n, limit)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}
