package a2abridge

import (
	"context"
	"errors"
	"io"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
)

// maxBatch bounds the deltas one artifact update carries.
const maxBatch = 256

// executor runs the tasks of one agent the bridge serves: each message is
// a weft call to the agent's peer (or, for a capability, to whichever
// peer offers it).
type executor struct {
	b *Bridge
	t target
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// callError is err as a call error.
func callError(err error) *protocol.CallError {
	var ce *protocol.CallError
	if errors.As(err, &ce) {
		return ce
	}
	var ne *node.Error
	if errors.As(err, &ne) {
		return protocol.Errorf(ne.Code, "%s", ne.Msg)
	}
	return protocol.Errorf(protocol.CodeInternal, "%v", err)
}

// streaming reports whether ctx is of a SendStreamingMessage (or a
// resubscription), which is a weft stream invoke; SendMessage is a unary
// invoke.
func streaming(ctx context.Context) bool {
	cc, ok := a2asrv.CallContextFrom(ctx)
	return ok && cc.Method() == "SendStreamingMessage"
}

// header returns a request header (an A2A service parameter) of ctx's call.
func header(ctx context.Context) func(string) string {
	return func(k string) string {
		cc, ok := a2asrv.CallContextFrom(ctx)
		if !ok || cc.ServiceParams() == nil {
			return ""
		}
		if v, ok := cc.ServiceParams().Get(k); ok && len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// Execute makes the weft call a message asks for and turns its frames
// into task events (see Events).
func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		name := NameOf(ec.Message, ec.Metadata, e.t.name)
		if name == "" {
			name = e.b.onlySkill(ctx, e.t)
		}
		if name == "" {
			yield(Failure(ec, protocol.Errorf(protocol.CodeBadRequest,
				"this agent serves several calls: name one in the message's metadata %q (a skill ID of its card), or use the URL of one skill", MetaName), ""), nil)
			return
		}
		input, err := InputOf(ec.Message)
		if err != nil {
			yield(Failure(ec, protocol.Errorf(protocol.CodeBadRequest, "%v", err), ""), nil)
			return
		}
		inv := node.Invocation{Peer: e.t.peer, Name: name, Input: input,
			Meta: MetaOf(ec.Message, ec.Metadata, header(ctx), ec.ContextID)}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		e.b.running(ec.TaskID, cancel)
		defer e.b.done(ec.TaskID)
		if !streaming(ctx) {
			e.unary(ctx, ec, inv, yield)
			return
		}
		e.stream(ctx, ec, inv, yield)
	}
}

// unary runs a SendMessage as a weft invoke.
func (e *executor) unary(ctx context.Context, ec *a2asrv.ExecutorContext, inv node.Invocation, yield func(a2a.Event, error) bool) {
	if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
		return
	}
	var (
		res  node.Result
		from peer.ID
		err  error
	)
	if e.t.capability() {
		var ar node.AnyResult
		res, ar, err = e.b.cfg.Backend.InvokeAny(ctx, inv)
		from = ar.Peer
	} else {
		res, err = e.b.cfg.Backend.Invoke(ctx, inv)
		from = inv.Peer
	}
	if ctx.Err() != nil {
		return // CancelTask ended it, and says so
	}
	if err != nil {
		yield(Failure(ec, callError(err), peerText(from)), nil)
		return
	}
	for _, ev := range Events(ec, protocol.CallFrame{Kind: protocol.FrameFinal, Data: res.Output, Meta: res.Meta}, peerText(from), false) {
		if !yield(ev, nil) {
			return
		}
	}
}

// stream runs a SendStreamingMessage as a weft stream invoke.
func (e *executor) stream(ctx context.Context, ec *a2asrv.ExecutorContext, inv node.Invocation, yield func(a2a.Event, error) bool) {
	var (
		cs   *node.CallStream
		from peer.ID
		err  error
	)
	if e.t.capability() {
		var ar node.AnyResult
		cs, ar, err = e.b.cfg.Backend.StreamInvokeAny(ctx, inv)
		from = ar.Peer
	} else {
		cs, err = e.b.cfg.Backend.StreamInvoke(ctx, inv)
		from = inv.Peer
	}
	if ctx.Err() != nil {
		if cs != nil {
			cs.Close()
		}
		return
	}
	if err != nil {
		yield(Failure(ec, callError(err), peerText(from)), nil)
		return
	}
	defer cs.Close() // before the end, this cancels the call: the handler sees it
	first := true
	var next *protocol.CallFrame // a frame read while batching deltas
	for {
		var f protocol.CallFrame
		var err error
		if next != nil {
			f, next = *next, nil
		} else if f, err = cs.Next(); err == io.EOF || ctx.Err() != nil {
			return
		}
		if err != nil {
			yield(Failure(ec, callError(err), peerText(from)), nil)
			return
		}
		evs := Events(ec, f, peerText(from), first)
		if f.Kind == protocol.FrameDelta {
			first = false
			// Deltas already here go out as one artifact update (its parts
			// the deltas, in order): every A2A event costs a copy of the
			// whole task in a2a-go.
			ev := evs[0].(*a2a.TaskArtifactUpdateEvent)
			for n := 1; n < maxBatch && cs.Buffered(); n++ {
				g, err := cs.Next()
				if err != nil {
					break
				}
				if g.Kind != protocol.FrameDelta {
					next = &g
					break
				}
				ev.Artifact.Parts = append(ev.Artifact.Parts, partsOrEmpty(g.Data)...)
				ev.Metadata[MetaLastSeq] = g.Seq
			}
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Cancel stops the task's call (the remote handler sees the cancel) and
// marks the task canceled.
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		e.b.cancel(ec.TaskID)
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil)
		ev.Metadata = map[string]any{MetaCode: protocol.CodeCancelled}
		yield(ev, nil)
	}
}

func peerText(p peer.ID) string {
	if p == "" {
		return ""
	}
	return p.String()
}
