// Package metrics defines a weft daemon's Prometheus metrics: what its
// node counts (messages per space, sync, direct messages, calls, API
// requests, store size) and what libp2p registers on the same registry
// (resource manager, swarm, relay, hole punching, identify, autonat).
//
// Each daemon has its own registry (New), never Prometheus's global one,
// so several daemons can run in one process. The node increments a
// *Metrics through its methods, which do nothing on a nil *Metrics, so a
// node built without metrics pays nothing. Handler serves the registry.
//
// Labels are bounded whatever the network sends: a space is named only if
// this node joined it, and at most MaxSpaces of them (the rest are
// "other"); a call name only if a handler here serves it (server side) or
// among the first MaxCallNames an agent here called (client side); error
// codes only when they are among weft's own (a remote handler may make up
// any), else "other".
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label bounds.
const (
	// MaxSpaces is how many spaces get a label of their own.
	MaxSpaces = 64
	// MaxCallNames is how many call names an agent here calls get a label
	// of their own.
	MaxCallNames = 64
	// Other is the label of everything past a bound.
	Other = "other"
)

// Namespace prefixes every metric weft defines.
const Namespace = "weft"

// Metrics is one daemon's metrics. Its methods are safe for concurrent
// use, and do nothing on a nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry

	mu        sync.Mutex
	spaces    map[string]string // space ID -> label
	callNames map[string]bool   // client-side call names with a label

	sent, received *prometheus.CounterVec // space
	rejected       *prometheus.CounterVec // space, reason

	dmSent      *prometheus.CounterVec // status: delivered, queued
	dmReceived  *prometheus.CounterVec // result: accepted, refused reason
	dmAttempts  *prometheus.CounterVec // result: ok, failed
	dmDelivered prometheus.Counter
	dmDead      *prometheus.CounterVec // reason: refused, expired

	calls       *prometheus.CounterVec   // side, name, status
	callSeconds *prometheus.HistogramVec // side, name

	api        *prometheus.CounterVec   // route, code
	apiSeconds *prometheus.HistogramVec // route
}

// New returns a daemon's metrics on a registry of their own, with Go's
// runtime and the process's metrics registered.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{reg: reg, spaces: make(map[string]string), callNames: make(map[string]bool)}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: name, Help: help,
			// 0.5 ms .. 65 s: a call through two daemons takes ~0.1 ms on
			// loopback, an agent's handler up to minutes.
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, labels)
		reg.MustRegister(h)
		return h
	}
	m.sent = counter("messages_sent_total", "Messages this node's agents sent to a space.", "space")
	m.received = counter("messages_received_total", "Messages of a space received from peers (gossip or sync) and stored.", "space")
	m.rejected = counter("messages_rejected_total", "Messages of a space from peers that this node did not store, by reason.", "space", "reason")
	m.dmSent = counter("dm_sent_total", "Direct messages sent by this node's agents, by the first attempt's outcome (delivered or queued).", "status")
	m.dmReceived = counter("dm_received_total", "Direct messages received, by result (accepted, or the refusal: forbidden, rate_limited, quota, error).", "result")
	m.dmAttempts = counter("dm_attempts_total", "Delivery attempts of the outbox, one per peer and batch, by result (ok, failed: unreachable, or refused for now).", "result")
	m.dmDelivered = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "dm_delivered_total", Help: "Direct messages acknowledged by their recipient."})
	reg.MustRegister(m.dmDelivered)
	m.dmDead = counter("dm_dead_letters_total", "Direct messages moved to the dead letters, by reason (refused, expired).", "reason")
	m.calls = counter("calls_total", "Calls, as the caller (client) or the callee (server), by name and status (ok or an error code).", "side", "name", "status")
	m.callSeconds = histogram("call_duration_seconds", "Duration of calls, as the caller (client) or the callee (server).", "side", "name")
	m.api = counter("api_requests_total", "Local API requests, by route and HTTP status.", "route", "code")
	m.apiSeconds = histogram("api_request_duration_seconds", "Duration of local API requests by route (streams count until they end).", "route")
	return m
}

// Registry returns the registry: libp2p registers its metrics on it, and
// Handler serves it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus's text (or OpenMetrics)
// format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// Gauges are read when the registry is scraped.
type Gauges struct {
	StoreSize func() (lsm, vlog int64, err error) // the store's size on disk
	Outbox    func() (int, error)                 // direct messages waiting
	Peers     func() int                          // connected peers
	Sync      func() SyncTotals                   // totals of every sync session
	Gossip    func() GossipTotals                 // what gossip did with the messages received
	Handlers  func() (conns, active int)          // handler connections, calls being served
}

// SyncTotals are the totals of sync sessions since the node started.
type SyncTotals struct {
	Sessions, Initiated, InSync, Rounds int
	BytesSent, BytesReceived            int64
	MessagesSent, MessagesReceived      int
}

// GossipTotals count what gossip did with the messages this node received
// since it started (see mesh.GossipStats).
type GossipTotals struct {
	Delivered, Duplicates, Rejected, QueueFull, Throttled, Undeliverable, GapRepairs int64
	SendDropped                                                                      int64
}

// WatchGauges registers metrics read from g's functions at each scrape (a
// nil function registers nothing).
func (m *Metrics) WatchGauges(g Gauges) {
	if m == nil {
		return
	}
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help, ConstLabels: labels}, f))
	}
	cnt := func(name, help string, labels prometheus.Labels, f func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help, ConstLabels: labels}, f))
	}
	if g.StoreSize != nil {
		for _, part := range []string{"lsm", "vlog"} {
			gauge("store_size_bytes", "Bytes the store (Badger) takes on disk, by part (lsm tree, value log), as Badger last measured (once a minute).",
				prometheus.Labels{"part": part}, func() float64 {
					lsm, vlog, err := g.StoreSize()
					switch {
					case err != nil:
						return 0
					case part == "lsm":
						return float64(lsm)
					}
					return float64(vlog)
				})
		}
	}
	if g.Outbox != nil {
		gauge("dm_outbox_messages", "Direct messages in the outbox, waiting for delivery.", nil, func() float64 {
			n, _ := g.Outbox()
			return float64(n)
		})
	}
	if g.Peers != nil {
		gauge("peers_connected", "Peers connected to this node.", nil, func() float64 { return float64(g.Peers()) })
	}
	if g.Handlers != nil {
		gauge("handler_connections", "Agents' connections registered as handlers.", nil, func() float64 {
			c, _ := g.Handlers()
			return float64(c)
		})
		gauge("calls_in_flight", "Calls being served here now.", nil, func() float64 {
			_, a := g.Handlers()
			return float64(a)
		})
	}
	if g.Sync != nil {
		s := func(f func(SyncTotals) float64) func() float64 { return func() float64 { return f(g.Sync()) } }
		cnt("sync_sessions_total", "Sync sessions run, either side.", nil, s(func(t SyncTotals) float64 { return float64(t.Sessions) }))
		cnt("sync_sessions_initiated_total", "Sync sessions this node started.", nil, s(func(t SyncTotals) float64 { return float64(t.Initiated) }))
		cnt("sync_sessions_in_sync_total", "Sync sessions that found both sides in sync at once.", nil, s(func(t SyncTotals) float64 { return float64(t.InSync) }))
		cnt("sync_rounds_total", "Sync exchanges sent.", nil, s(func(t SyncTotals) float64 { return float64(t.Rounds) }))
		cnt("sync_bytes_total", "Bytes of sync streams, framing included.", prometheus.Labels{"direction": "sent"}, s(func(t SyncTotals) float64 { return float64(t.BytesSent) }))
		cnt("sync_bytes_total", "Bytes of sync streams, framing included.", prometheus.Labels{"direction": "received"}, s(func(t SyncTotals) float64 { return float64(t.BytesReceived) }))
		cnt("sync_messages_total", "Messages sent to peers or fetched from them by sync.", prometheus.Labels{"direction": "sent"}, s(func(t SyncTotals) float64 { return float64(t.MessagesSent) }))
		cnt("sync_messages_total", "Messages sent to peers or fetched from them by sync.", prometheus.Labels{"direction": "received"}, s(func(t SyncTotals) float64 { return float64(t.MessagesReceived) }))
	}
	if g.Gossip != nil {
		s := func(f func(GossipTotals) int64) func() float64 {
			return func() float64 { return float64(f(g.Gossip())) }
		}
		const help = "Gossip messages received, by what became of them: delivered (new and valid), duplicate (a copy of one seen), rejected (invalid or refused by this node), dropped before validation (queue_full, throttled) or after it (undeliverable: a subscriber's buffer was full)."
		for _, r := range []struct {
			label string
			f     func(GossipTotals) int64
		}{
			{"delivered", func(t GossipTotals) int64 { return t.Delivered }},
			{"duplicate", func(t GossipTotals) int64 { return t.Duplicates }},
			{"rejected", func(t GossipTotals) int64 { return t.Rejected }},
			{"queue_full", func(t GossipTotals) int64 { return t.QueueFull }},
			{"throttled", func(t GossipTotals) int64 { return t.Throttled }},
			{"undeliverable", func(t GossipTotals) int64 { return t.Undeliverable }},
		} {
			cnt("gossip_messages_total", help, prometheus.Labels{"result": r.label}, s(r.f))
		}
		cnt("gossip_send_dropped_total", "Gossip messages not sent (published or forwarded) to a peer because its outbound queue was full.", nil, s(func(t GossipTotals) int64 { return t.SendDropped }))
		cnt("gap_repairs_total", "Sync sessions started to fetch the missing parents of a gossiped message (after waiting for gossip to bring them).", nil, s(func(t GossipTotals) int64 { return t.GapRepairs }))
	}
}

// SpaceJoined gives space (its ID) the label name, unless MaxSpaces
// spaces have one already. Only spaces this node joined get a label: a
// stranger can make up spaces, not make this node join them.
func (m *Metrics) SpaceJoined(id, name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.spaces[id]; !ok && len(m.spaces) < MaxSpaces {
		m.spaces[id] = name
	}
}

// SpaceName returns the label of space id, or "" if it has none of its
// own.
func (m *Metrics) SpaceName(id string) string {
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spaces[id]
}

// space returns space id's label.
func (m *Metrics) space(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.spaces[id]; ok {
		return l
	}
	return Other
}

// MessageSent counts a message an agent here sent to space id.
func (m *Metrics) MessageSent(id string) {
	if m != nil {
		m.sent.WithLabelValues(m.space(id)).Inc()
	}
}

// MessageReceived counts a message of space id stored from a peer.
func (m *Metrics) MessageReceived(id string) {
	if m != nil {
		m.received.WithLabelValues(m.space(id)).Inc()
	}
}

// rejectReasons are the reasons MessageRejected takes; others are Other.
var rejectReasons = map[string]bool{
	"rate_peer": true, "rate_author": true, "rate_strangers": true, "wrong_space": true,
	"declined": true, "quota": true, "too_large": true, "expired": true, "clock_skew": true,
	"bad_signature": true, "bad_id": true, "malformed": true, "invalid": true, "store": true,
	"unsupported_version": true, "bad_sender": true, "id_mismatch": true,
}

// MessageRejected counts a message of space id from a peer that was not
// stored, and why (a reason of the gossip validator or of ingest).
func (m *Metrics) MessageRejected(id, reason string) {
	if m == nil {
		return
	}
	if !rejectReasons[reason] {
		reason = Other
	}
	m.rejected.WithLabelValues(m.space(id), reason).Inc()
}

// DMSent counts a direct message sent by an agent here: delivered by the
// first attempt, or queued.
func (m *Metrics) DMSent(delivered bool) {
	if m == nil {
		return
	}
	if delivered {
		m.dmSent.WithLabelValues("delivered").Inc()
	} else {
		m.dmSent.WithLabelValues("queued").Inc()
	}
}

// DMReceived counts a direct message received: result is "accepted" or
// why it was refused.
func (m *Metrics) DMReceived(result string) {
	if m == nil {
		return
	}
	switch result {
	case "accepted", "forbidden", "rate_limited", "quota", "error":
	default:
		result = Other
	}
	m.dmReceived.WithLabelValues(result).Inc()
}

// Attempt counts an outbox delivery attempt (node/outbox's Observer).
func (m *Metrics) Attempt(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.dmAttempts.WithLabelValues("ok").Inc()
	} else {
		m.dmAttempts.WithLabelValues("failed").Inc()
	}
}

// Delivered counts a direct message acknowledged by its recipient
// (node/outbox's Observer).
func (m *Metrics) Delivered() {
	if m != nil {
		m.dmDelivered.Inc()
	}
}

// DeadLettered counts a direct message given up on (node/outbox's
// Observer): refused by its recipient, or past its deadline.
func (m *Metrics) DeadLettered(refused bool) {
	if m == nil {
		return
	}
	if refused {
		m.dmDead.WithLabelValues("refused").Inc()
	} else {
		m.dmDead.WithLabelValues("expired").Inc()
	}
}

// callCodes are the statuses calls_total takes; others are Other.
var callCodes = map[string]bool{
	"ok": true, "no_handler": true, "unreachable": true, "deadline_exceeded": true, "cancelled": true,
	"handler_failed": true, "bad_request": true, "overloaded": true, "refused": true, "forbidden": true,
	"internal": true, "unknown_call": true, "bad_peer": true,
}

// CallServed counts a call served here (side "server"): served says
// whether a handler here serves name (else its label is Other), status is
// "ok" or the error code it ended with.
func (m *Metrics) CallServed(name string, served bool, status string, d time.Duration) {
	if m == nil {
		return
	}
	if !served {
		name = Other
	}
	m.call("server", name, status, d)
}

// CallMade counts a call an agent here made (side "client").
func (m *Metrics) CallMade(name, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if !m.callNames[name] {
		if len(m.callNames) < MaxCallNames {
			m.callNames[name] = true
		} else {
			name = Other
		}
	}
	m.mu.Unlock()
	m.call("client", name, status, d)
}

func (m *Metrics) call(side, name, status string, d time.Duration) {
	if !callCodes[status] {
		status = Other
	}
	m.calls.WithLabelValues(side, name, status).Inc()
	m.callSeconds.WithLabelValues(side, name).Observe(d.Seconds())
}

// APIRequest counts a local API request: route is its pattern (a bounded
// set), code its HTTP status.
func (m *Metrics) APIRequest(route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.api.WithLabelValues(route, statusText(code)).Inc()
	m.apiSeconds.WithLabelValues(route).Observe(d.Seconds())
}

func statusText(code int) string {
	if code < 100 || code > 599 {
		return Other
	}
	return string(rune('0'+code/100)) + string(rune('0'+code/10%10)) + string(rune('0'+code%10))
}
