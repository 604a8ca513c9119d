// Package a2abridge serves weft agents as A2A (Agent2Agent v1.0) agents
// on the daemon's loopback listener, with the official Go SDK
// (github.com/a2aproject/a2a-go/v2): any A2A client on this machine calls a
// weft agent anywhere on the mesh through its local daemon.
//
// Each agent has a base URL under Prefix:
//
//	/a2a/peer/PEER                 the handlers of one peer
//	/a2a/peer/PEER/skill/NAME      one call of one peer
//	/a2a/capability/NAME           whichever peer offers NAME (calls by capability)
//
// and under it its agent card (/.well-known/agent-card.json), the
// JSON-RPC binding (/jsonrpc) and the HTTP+JSON binding (/rest/…).
// SendMessage is a weft invoke, SendStreamingMessage a stream invoke,
// CancelTask cancels the call (the remote handler sees it); tasks are kept
// in the daemon's store (Records), so GetTask and ListTasks answer after a
// restart. MAPPING.md says how messages, parts, tasks and artifacts map
// onto call frames.
package a2abridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
)

// Prefix is the path under which the bridge serves.
const Prefix = "/a2a/"

// Paths of an agent, under its base URL.
const (
	CardPath    = a2asrv.WellKnownAgentCardPath // "/.well-known/agent-card.json"
	JSONRPCPath = "/jsonrpc"
	RESTPath    = "/rest"
)

// SecurityScheme is the name of the bearer scheme agent cards declare.
const SecurityScheme = "weftToken"

// Limits.
const (
	// MaxAgents bounds the agents (base URLs) the bridge keeps handlers for.
	MaxAgents = 1024
	cardTTL   = 10 * time.Second
	cardWait  = 10 * time.Second
)

// Backend is what the bridge needs of the daemon (*node.Node).
type Backend interface {
	Invoke(ctx context.Context, inv node.Invocation) (node.Result, error)
	StreamInvoke(ctx context.Context, inv node.Invocation) (*node.CallStream, error)
	InvokeAny(ctx context.Context, inv node.Invocation) (node.Result, node.AnyResult, error)
	StreamInvokeAny(ctx context.Context, inv node.Invocation) (*node.CallStream, node.AnyResult, error)
	PeerCard(ctx context.Context, p peer.ID) (protocol.Card, error)
	Discover(ctx context.Context, capability string, limit int) ([]agent.Provider, error)
}

// Config configures a Bridge.
type Config struct {
	Backend Backend
	Records Records // where tasks are kept (*store.Store)
	// BaseURL is the loopback listener's URL (http://127.0.0.1:PORT), for
	// the interfaces agent cards list.
	BaseURL string
	// TokenHint says where the bearer token is, for agent cards.
	TokenHint string
	Version   string
	Logger    *slog.Logger
}

// Bridge serves A2A for weft agents; it is an http.Handler for Prefix.
type Bridge struct {
	cfg    Config
	log    *slog.Logger
	tasksM sync.Mutex             // serializes task store writes (read version, then write)
	live   map[string]*storedTask // running tasks (see tasks), under tasksM

	mu     sync.Mutex
	agents map[string]*agentHandlers // by base path
	cards  map[string]cachedCard     // by base path
	calls  map[a2a.TaskID]context.CancelFunc
	closed bool
}

type agentHandlers struct {
	jsonrpc, rest http.Handler
}

type cachedCard struct {
	card   protocol.Card
	skills []protocol.Capability
	at     time.Time
}

// target is the agent a base URL names.
type target struct {
	base string  // its base path, e.g. /a2a/peer/ID
	peer peer.ID // "" for a capability
	name string  // the call: the capability, or the skill of a peer URL ("" for all of a peer's)
}

func (t target) capability() bool { return t.peer == "" }

// New returns a bridge.
func New(cfg Config) (*Bridge, error) {
	if cfg.Backend == nil || cfg.Records == nil {
		return nil, fmt.Errorf("a2abridge: a backend and records are required")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("a2abridge: base URL %q: want http://HOST:PORT", cfg.BaseURL)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Bridge{cfg: cfg, log: log, agents: make(map[string]*agentHandlers),
		cards: make(map[string]cachedCard), live: make(map[string]*storedTask), calls: make(map[a2a.TaskID]context.CancelFunc)}, nil
}

// PeerPath is the base path of a peer's agent; with a name, of one of its
// calls.
func PeerPath(p peer.ID, name string) string {
	if name != "" {
		return Prefix + "peer/" + p.String() + "/skill/" + url.PathEscape(name)
	}
	return Prefix + "peer/" + p.String()
}

// CapabilityPath is the base path of the agent that calls whichever peer
// offers a capability.
func CapabilityPath(name string) string { return Prefix + "capability/" + url.PathEscape(name) }

// parse splits a request path into its agent and the rest of the path.
func parse(path string) (target, string, error) {
	rest, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		return target{}, "", fmt.Errorf("not under %s", Prefix)
	}
	seg := strings.SplitN(rest, "/", 3)
	if len(seg) < 2 || seg[1] == "" {
		return target{}, "", fmt.Errorf("want %speer/PEER/… or %scapability/NAME/…", Prefix, Prefix)
	}
	tail := ""
	if len(seg) == 3 {
		tail = "/" + seg[2]
	}
	switch seg[0] {
	case "peer":
		p, err := peer.Decode(seg[1])
		if err != nil {
			return target{}, "", fmt.Errorf("%q is not a peer ID", seg[1])
		}
		t := target{base: PeerPath(p, ""), peer: p}
		if after, ok := strings.CutPrefix(tail, "/skill/"); ok {
			name, more, _ := strings.Cut(after, "/")
			if err := protocol.CheckName(name); err != nil {
				return target{}, "", fmt.Errorf("skill: %v", err)
			}
			t.name, t.base = name, PeerPath(p, name)
			tail = ""
			if more != "" || strings.HasSuffix(after, "/") {
				tail = "/" + more
			}
		}
		return t, tail, nil
	case "capability":
		if err := protocol.CheckName(seg[1]); err != nil {
			return target{}, "", fmt.Errorf("capability: %v", err)
		}
		return target{base: CapabilityPath(seg[1]), name: seg[1]}, tail, nil
	}
	return target{}, "", fmt.Errorf("want %speer/PEER/… or %scapability/NAME/…", Prefix, Prefix)
}

// ServeHTTP serves an agent's card and bindings.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, tail, err := parse(r.URL.Path)
	if err != nil {
		jsonError(w, http.StatusNotFound, err.Error())
		return
	}
	switch {
	case tail == CardPath:
		if r.Method != http.MethodGet {
			jsonError(w, http.StatusMethodNotAllowed, "GET the agent card")
			return
		}
		b.serveCard(w, r, t)
	default:
		// The bindings: JSON-RPC at /jsonrpc (or at the base URL itself),
		// HTTP+JSON under /rest (or under the base URL itself), so a client
		// told the base URL and a transport, skipping the card, finds them.
		h, err := b.handlers(t)
		if err != nil {
			jsonError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if tail == JSONRPCPath || tail == "" || tail == "/" {
			h.jsonrpc.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = tail
		if rest, ok := strings.CutPrefix(tail, RESTPath+"/"); ok {
			r2.URL.Path = "/" + rest
		}
		r2.URL.RawPath = ""
		h.rest.ServeHTTP(w, r2)
	}
}

// handlers returns the A2A request handlers of t, made on first use.
func (b *Bridge) handlers(t target) (*agentHandlers, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("the daemon is shutting down")
	}
	if h, ok := b.agents[t.base]; ok {
		return h, nil
	}
	if len(b.agents) >= MaxAgents {
		return nil, fmt.Errorf("the bridge serves %d agents already", MaxAgents)
	}
	store := &tasks{db: b.cfg.Records, table: "a2a:" + t.base, mu: &b.tasksM, live: b.live}
	rh := a2asrv.NewHandler(&executor{b: b, t: t},
		a2asrv.WithTaskStore(store),
		a2asrv.WithLogger(b.log),
		a2asrv.WithCapabilityChecks(&a2a.AgentCapabilities{Streaming: true}),
	)
	h := &agentHandlers{jsonrpc: a2asrv.NewJSONRPCHandler(rh), rest: a2asrv.NewRESTHandler(rh)}
	b.agents[t.base] = h
	return h, nil
}

// skills returns the calls t offers, with the card of its peer (or of the
// first provider of its capability), cached for a few seconds.
func (b *Bridge) skills(ctx context.Context, t target) (protocol.Card, []protocol.Capability, error) {
	b.mu.Lock()
	c, ok := b.cards[t.base]
	b.mu.Unlock()
	if ok && time.Since(c.at) < cardTTL {
		return c.card, c.skills, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cardWait)
	defer cancel()
	var card protocol.Card
	var skills []protocol.Capability
	if t.capability() {
		ps, err := b.cfg.Backend.Discover(ctx, t.name, 0)
		if err != nil {
			return card, nil, err
		}
		if len(ps) == 0 {
			return card, nil, protocol.Errorf(protocol.CodeNoHandler, "no peer offers %q", t.name)
		}
		card = protocol.Card{Name: "weft capability " + t.name,
			Description: fmt.Sprintf("Calls %q on whichever weft peer offers it (%d found), the least loaded first, failing over to the next.", t.name, len(ps))}
		for _, c := range ps[0].Card.Capabilities {
			if c.Name == t.name {
				skills = append(skills, c)
			}
		}
	} else {
		var err error
		card, err = b.cfg.Backend.PeerCard(ctx, t.peer)
		if err != nil {
			return card, nil, err
		}
		for _, c := range card.Capabilities {
			if t.name == "" || c.Name == t.name {
				skills = append(skills, c)
			}
		}
		if len(skills) == 0 {
			if t.name != "" {
				return card, nil, protocol.Errorf(protocol.CodeNoHandler, "peer %s does not offer %q", t.peer, t.name)
			}
			return card, nil, protocol.Errorf(protocol.CodeNoHandler, "peer %s serves no calls", t.peer)
		}
	}
	b.mu.Lock()
	if len(b.cards) >= MaxAgents {
		clear(b.cards)
	}
	b.cards[t.base] = cachedCard{card: card, skills: skills, at: time.Now()}
	b.mu.Unlock()
	return card, skills, nil
}

// onlySkill returns the one call t serves, or "" if it serves several (or
// its card cannot be had).
func (b *Bridge) onlySkill(ctx context.Context, t target) string {
	_, skills, err := b.skills(ctx, t)
	if err != nil || len(skills) != 1 {
		return ""
	}
	return skills[0].Name
}

// AgentCard returns the A2A agent card of the agent at base path (as
// PeerPath or CapabilityPath return).
func (b *Bridge) AgentCard(ctx context.Context, base string) (*a2a.AgentCard, error) {
	t, _, err := parse(base)
	if err != nil {
		return nil, err
	}
	card, skills, err := b.skills(ctx, t)
	if err != nil {
		return nil, err
	}
	return b.agentCard(t, card, skills), nil
}

func (b *Bridge) agentCard(t target, card protocol.Card, skills []protocol.Capability) *a2a.AgentCard {
	name := card.Name
	if name == "" {
		name = "weft agent " + t.peer.String()
	}
	desc := card.Description
	if desc == "" {
		desc = "A weft agent on the mesh, reached through the local weft daemon."
	}
	base := strings.TrimRight(b.cfg.BaseURL, "/") + t.base
	out := &a2a.AgentCard{
		Name:                name,
		Description:         desc,
		Version:             b.cfg.Version,
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain", "application/json"},
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+JSONRPCPath, a2a.TransportProtocolJSONRPC), a2a.NewAgentInterface(base+RESTPath, a2a.TransportProtocolHTTPJSON)},
		SecuritySchemes: a2a.NamedSecuritySchemes{SecurityScheme: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "the weft daemon's loopback token: " + b.cfg.TokenHint}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{SecurityScheme: {}}},
		Provider:             &a2a.AgentProvider{Org: "weft mesh", URL: b.cfg.BaseURL},
	}
	for _, c := range skills {
		out.Skills = append(out.Skills, skillOf(c))
	}
	return out
}

// serveCard answers an agent card request.
func (b *Bridge) serveCard(w http.ResponseWriter, r *http.Request, t target) {
	card, skills, err := b.skills(r.Context(), t)
	if err != nil {
		ce := callError(err)
		status := http.StatusBadGateway
		if ce.Code == protocol.CodeNoHandler {
			status = http.StatusNotFound
		}
		jsonError(w, status, ce.Code+": "+ce.Message)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(b.agentCard(t, card, skills))
}

// running records the cancel func of a task's call.
func (b *Bridge) running(id a2a.TaskID, cancel context.CancelFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		cancel()
		return
	}
	b.calls[id] = cancel
}

func (b *Bridge) done(id a2a.TaskID) {
	b.mu.Lock()
	delete(b.calls, id)
	b.mu.Unlock()
}

// cancel cancels a task's call, if it is running.
func (b *Bridge) cancel(id a2a.TaskID) {
	b.mu.Lock()
	c := b.calls[id]
	b.mu.Unlock()
	if c != nil {
		c()
	}
}

// Close cancels the calls of the tasks running; later requests are
// refused.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	calls := b.calls
	b.calls = make(map[a2a.TaskID]context.CancelFunc)
	b.mu.Unlock()
	for _, c := range calls {
		c()
	}
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "message": msg}})
}
