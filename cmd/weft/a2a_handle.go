package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/weftmesh/weft/node/a2abridge"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// a2aForwarder serves weft calls by forwarding them to an HTTP A2A agent
// (weft handle NAME --a2a URL): a unary call is a SendMessage, a stream
// call a SendStreamingMessage whose artifact updates are the deltas; a
// call the caller cancels is cancelled there with CancelTask. The mapping
// is a2abridge's (MessageOf, ResultOf, PartsOf).
type a2aForwarder struct {
	url  string
	auth string // Authorization header value, or ""
	card *a2a.AgentCard
	c    *a2aclient.Client
}

// newA2AForwarder resolves the agent's card and makes its client.
func newA2AForwarder(ctx context.Context, url, auth string) (*a2aForwarder, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var opts []agentcard.ResolveOption
	if auth != "" {
		opts = append(opts, agentcard.WithRequestHeader("Authorization", auth))
	}
	card, err := agentcard.DefaultResolver.Resolve(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("the A2A agent at %s: %w", url, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		return nil, fmt.Errorf("the A2A agent at %s: %w", url, err)
	}
	return &a2aForwarder{url: url, auth: auth, card: card, c: c}, nil
}

// params attaches the call's trace context and the authorization to ctx.
func (f *a2aForwarder) params(ctx context.Context, meta map[string]string) context.Context {
	p := a2aclient.ServiceParams{}
	if f.auth != "" {
		p.Append("Authorization", f.auth)
	}
	if tp := meta[protocol.MetaTraceparent]; tp != "" {
		p.Append(protocol.MetaTraceparent, tp)
		if ts := meta[protocol.MetaTracestate]; ts != "" {
			p.Append(protocol.MetaTracestate, ts)
		}
	}
	return a2aclient.AttachServiceParams(ctx, p)
}

// callErr is a call error as the client's typed error, so Serve keeps its code.
func callErr(e *protocol.CallError) error {
	return &client.Error{Status: http.StatusBadGateway, Code: e.Code, Message: e.Message}
}

func (f *a2aForwarder) serve(ctx context.Context, c api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
	msg, err := a2abridge.MessageOf(c.Input, c.Meta)
	if err != nil {
		return nil, nil, callErr(protocol.Errorf(protocol.CodeBadRequest, "%v", err))
	}
	req := &a2a.SendMessageRequest{Message: msg}
	rctx := f.params(ctx, c.Meta)
	if !c.Stream {
		res, err := f.c.SendMessage(rctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, callErr(protocol.Errorf(protocol.CodeHandlerFailed, "the A2A agent: %v", err))
		}
		out, ce := a2abridge.ResultOf(res)
		if ce != nil {
			return nil, nil, callErr(ce)
		}
		return out, nil, nil
	}
	var taskID a2a.TaskID
	var final []*a2a.Part
	for ev, err := range f.c.SendStreamingMessage(rctx, req) {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, nil, callErr(protocol.Errorf(protocol.CodeHandlerFailed, "the A2A agent: %v", err))
		}
		switch v := ev.(type) {
		case *a2a.Task:
			taskID = v.ID
			if e := a2abridge.StatusError(&a2a.TaskStatusUpdateEvent{TaskID: v.ID, Status: v.Status}); e != nil {
				return nil, nil, callErr(e)
			}
		case *a2a.Message:
			out, err := a2abridge.OutputOf(v.Parts)
			return out, nil, err
		case *a2a.TaskArtifactUpdateEvent:
			taskID = v.TaskID
			for _, p := range v.Artifact.Parts {
				d, err := a2abridge.OutputOf([]*a2a.Part{p})
				if err == nil {
					err = send(d)
				}
				if err != nil {
					return nil, nil, err
				}
			}
		case *a2a.TaskStatusUpdateEvent:
			taskID = v.TaskID
			if e := a2abridge.StatusError(v); e != nil {
				return nil, nil, callErr(e)
			}
			if v.Status.State == a2a.TaskStateCompleted && v.Status.Message != nil {
				final = v.Status.Message.Parts
			}
		}
	}
	if ctx.Err() != nil {
		// The weft caller cancelled: cancel the task there too.
		if taskID != "" {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), 10*time.Second)
			_, _ = f.c.CancelTask(cctx, &a2a.CancelTaskRequest{ID: taskID})
			cancel()
		}
		return nil, nil, ctx.Err()
	}
	out, err := a2abridge.OutputOf(final)
	return out, nil, err
}

var errA2AAndExec = errors.New("give --exec CMD or --a2a URL, not both")
