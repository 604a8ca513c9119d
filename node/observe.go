package node

import (
	"context"
	"errors"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/node/metrics"
	"github.com/weftmesh/weft/protocol"
)

// What the node tells of itself: metrics (Config.Metrics, node/metrics)
// and OpenTelemetry spans (Config.Tracer). Spans continue the W3C trace
// context weft carries in meta ("traceparent", "tracestate"):
//   - a call is an "invoke_agent NAME" span (OpenTelemetry's GenAI agent
//     conventions) on each side: a client span on the caller's daemon,
//     child of the caller's traceparent (or of the served call it is
//     nested in), whose context travels in the call's meta; a server span
//     on the callee's daemon, child of that, whose context the handler
//     agent gets in its call's meta (WEFT_TRACEPARENT for weft handle), so
//     nested calls continue the same trace;
//   - a send to a space or a DM is a "send" producer span, and its
//     delivery on each node a "process" consumer span, both children of
//     the traceparent the agent put in the message's meta, if any (a
//     message is signed: its meta is never rewritten);
//   - a sync session is a "sync" span of its own trace.

// tracerName names the node's tracer (its instrumentation scope).
const tracerName = "github.com/weftmesh/weft/node"

// traceContext reads and writes W3C trace context in weft's meta, whose
// keys are the header names.
var traceContext = propagation.TraceContext{}

// tracer returns cfg's tracer, or one that records nothing.
func (c Config) tracer() trace.Tracer {
	if c.Tracer == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return c.Tracer.Tracer(tracerName)
}

// fromMeta returns ctx with the trace context in meta as its remote
// parent; ctx unchanged when meta has none (or a broken one).
func fromMeta(ctx context.Context, meta map[string]string) context.Context {
	if _, err := protocol.ParseTraceparent(meta[protocol.MetaTraceparent]); err != nil {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier(meta))
}

// intoMeta returns meta (a copy) carrying span's context, when span is
// recorded; meta unchanged otherwise, so with tracing off the meta is
// what weft always sent.
func intoMeta(ctx context.Context, span trace.Span, meta map[string]string) map[string]string {
	if !span.IsRecording() || !span.SpanContext().IsValid() {
		return meta
	}
	out := cloneMeta(meta)
	if out == nil {
		out = make(map[string]string, 2)
	}
	delete(out, protocol.MetaTracestate)
	traceContext.Inject(trace.ContextWithSpan(ctx, span), propagation.MapCarrier(out))
	return out
}

// callAttrs are the attributes of a call's spans.
func callAttrs(name string, callee, other peer.ID, meta map[string]string, stream bool) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(name),
		semconv.GenAIAgentID(callee.String()),
		attribute.String("weft.peer", other.String()),
		attribute.Bool("weft.call.stream", stream),
	}
	if s := meta[protocol.MetaSession]; s != "" {
		attrs = append(attrs, semconv.GenAIConversationID(s))
	}
	return attrs
}

// endSpan ends span with err's code as its status (nil: ok) and returns
// the status as metrics count it.
func endSpan(span trace.Span, err error) string {
	status := "ok"
	if err != nil {
		status = errorCode(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", status))
	}
	span.End()
	return status
}

// errorCode is the code of a call's error.
func errorCode(err error) string {
	var ce *protocol.CallError
	var ne *Error
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case errors.As(err, &ne):
		return ne.Code
	}
	return protocol.CodeInternal
}

// messageSpan starts the span of a message sent ("send", a producer span)
// or delivered ("process", a consumer span) in space, child of the trace
// context in meta.
func (n *Node) messageSpan(ctx context.Context, op string, space string, m *protocol.Message) (context.Context, trace.Span) {
	if n.cfg.Tracer == nil {
		return ctx, noop.Span{} // no attributes to build for every message
	}
	kind := trace.SpanKindProducer
	if op == "process" {
		kind = trace.SpanKindConsumer
	}
	return n.tracer.Start(fromMeta(ctx, m.Meta), op+" "+space, trace.WithSpanKind(kind), trace.WithAttributes(
		semconv.MessagingSystemKey.String("weft"),
		semconv.MessagingOperationName(op),
		semconv.MessagingDestinationName(space),
		semconv.MessagingMessageID(m.ID.String()),
		attribute.String("weft.from", m.From),
		attribute.String("weft.type", m.Type),
	))
}

// spaceLabel names space in spans: its name when this node joined it
// (metrics's label), else its ID.
func (n *Node) spaceLabel(id protocol.ID) string {
	if id == n.Inbox() {
		return "dm"
	}
	if name := n.cfg.Metrics.SpaceName(id.String()); name != "" {
		return name
	}
	return id.String()
}

// syncSession is told of each sync session that ends: it records it as a
// span (its own trace: sync runs on its own schedule).
func (n *Node) syncSession(s reconcile.Session) {
	if n.cfg.Tracer == nil {
		return
	}
	kind := trace.SpanKindServer
	if s.Initiated {
		kind = trace.SpanKindClient
	}
	name := "sync"
	if !s.Space.IsZero() {
		name += " " + n.spaceLabel(s.Space)
	}
	_, span := n.tracer.Start(context.Background(), name, trace.WithSpanKind(kind), trace.WithTimestamp(s.Start),
		trace.WithNewRoot(),
		trace.WithAttributes(
			attribute.String("weft.peer", s.Peer.String()),
			attribute.Int("weft.sync.rounds", s.Stats.Rounds),
			attribute.Int64("weft.sync.bytes_sent", s.Stats.BytesSent),
			attribute.Int64("weft.sync.bytes_received", s.Stats.BytesReceived),
			attribute.Int("weft.sync.messages_sent", s.Stats.Sent),
			attribute.Int("weft.sync.messages_received", s.Stats.Received),
		))
	if s.Err != nil {
		span.SetStatus(codes.Error, s.Err.Error())
	}
	span.End(trace.WithTimestamp(s.End))
}

// Refused counts the gossip messages of a space that were not accepted
// (mesh.Refusals).
func (s spaceSink) Refused(space protocol.ID, reason string) {
	s.n.cfg.Metrics.MessageRejected(space.String(), reason)
}

// watchGauges registers the metrics read at each scrape.
func (n *Node) watchGauges() {
	m := n.cfg.Metrics
	if m == nil {
		return
	}
	m.WatchGauges(metrics.Gauges{
		StoreSize: n.store.DiskSize,
		Outbox:    n.store.OutboxLen,
		Peers:     func() int { return len(n.mesh.Host().Network().Peers()) },
		Handlers: func() (int, int) {
			conns, _ := n.handlers.capacity()
			return conns, int(n.handlers.active.Load())
		},
		Sync: func() metrics.SyncTotals {
			t := n.mesh.SyncStats()
			return metrics.SyncTotals{
				Sessions: t.Sessions, Initiated: t.Initiated, InSync: t.InSync, Rounds: t.Rounds,
				BytesSent: t.BytesSent, BytesReceived: t.BytesReceived,
				MessagesSent: t.Sent, MessagesReceived: t.Received,
			}
		},
		Gossip: func() metrics.GossipTotals {
			t := n.mesh.GossipStats()
			return metrics.GossipTotals{
				Delivered: t.Delivered, Duplicates: t.Duplicates, Rejected: t.Rejected,
				QueueFull: t.QueueFull, Throttled: t.Throttled, Undeliverable: t.Undeliverable,
				GapRepairs: t.GapRepairs, SendDropped: t.SendDropped,
			}
		},
	})
}

var _ mesh.Refusals = spaceSink{}
