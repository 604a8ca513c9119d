package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/policy"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// fake is a Backend held in memory: one space, "lab", whose messages are
// signed by a test key; err, when set, is what every fallible method
// returns.
type fake struct {
	key crypto.PrivKey
	id  peer.ID

	mu      sync.Mutex
	err     error
	msgs    []node.Message // of "lab", cursor = index+1
	changed chan struct{}
	posts   []node.Post
	dms     []node.DM
	invs    []node.Invocation
	handler *fakeHandler
	spec    node.HandlerSpec // of the last RegisterHandler
	trusted []policy.Trusted
	replies []node.Reply
	frames  []protocol.CallFrame // what StreamInvoke answers
}

func newFake() *fake {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		panic(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return &fake{key: k, id: id, changed: make(chan struct{})}
}

var labID = protocol.SpaceID("lab")

func (f *fake) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// add stores a message of "lab" and wakes followers.
func (f *fake) add(text string) node.Message {
	m, err := protocol.Sign(f.key, protocol.Draft{Space: labID, CreatedAt: time.Now(), Type: "text",
		Content: json.RawMessage(`{"text":"` + text + `"}`)}, protocol.DefaultLimits())
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	nm := node.Message{Message: m, Cursor: store.Cursor(len(f.msgs) + 1)}
	f.msgs = append(f.msgs, nm)
	close(f.changed)
	f.changed = make(chan struct{})
	return nm
}

func (f *fake) Config() node.Config { return node.Default() }
func (f *fake) Info() node.Info {
	a, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/4001/p2p/" + f.id.String())
	return node.Info{ID: f.id, Addrs: []ma.Multiaddr{a}, Version: "test", Reachability: "unknown"}
}
func (f *fake) Status() (node.Status, error) {
	return node.Status{Info: f.Info(), Started: time.Now().Add(-time.Minute), Peers: f.Peers(), Spaces: []node.Space{f.space()}, Handlers: []string{"echo"}}, f.fail()
}
func (f *fake) Peers() []mesh.PeerInfo { return []mesh.PeerInfo{{ID: f.id, Direction: "inbound"}} }
func (f *fake) Connect(ctx context.Context, addr ma.Multiaddr) (peer.ID, error) {
	return f.id, f.fail()
}

func (f *fake) space() node.Space {
	return node.Space{Space: store.Space{ID: labID, Name: "lab"}, Messages: len(f.msgs)}
}
func (f *fake) Spaces() ([]node.Space, error) { return []node.Space{f.space()}, f.fail() }
func (f *fake) Space(ref string) (node.Space, error) {
	if ref != "lab" && ref != labID.String() {
		return node.Space{}, &node.Error{Code: api.CodeUnknownSpace, Msg: "unknown space " + ref}
	}
	return f.space(), f.fail()
}
func (f *fake) SpaceID(ref string) (protocol.ID, error) {
	sp, err := f.Space(ref)
	return sp.ID, err
}
func (f *fake) Join(name string, keep *store.Retention) (node.Space, bool, error) {
	if err := node.CheckSpaceName(name); err != nil {
		return node.Space{}, false, err
	}
	return f.space(), name != "lab", f.fail()
}
func (f *fake) SetSpaceLimits(ref string, l store.SpaceLimits) (node.Space, error) {
	sp, err := f.Space(ref)
	if err != nil {
		return sp, err
	}
	sp.Limits, sp.Limit = l, l
	return sp, f.fail()
}
func (f *fake) Leave(_ context.Context, ref string) error {
	if _, err := f.Space(ref); err != nil {
		return err
	}
	return f.fail()
}
func (f *fake) Send(ctx context.Context, space protocol.ID, p node.Post) (node.Message, error) {
	if err := f.fail(); err != nil {
		return node.Message{}, err
	}
	f.mu.Lock()
	f.posts = append(f.posts, p)
	f.mu.Unlock()
	return f.add("sent"), nil
}
func (f *fake) ReadWithin(space protocol.ID, after store.Cursor, limit, maxBytes int) ([]node.Message, store.Cursor, bool, error) {
	if err := f.fail(); err != nil {
		return nil, after, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if space != labID || int(after) >= len(f.msgs) {
		return nil, after, false, nil
	}
	out := f.msgs[after:min(int(after)+limit, len(f.msgs))]
	size := 0
	for i, m := range out {
		if i > 0 && maxBytes >= 0 && size+m.AnswerBytes() > maxBytes {
			return out[:i], out[i-1].Cursor, true, nil
		}
		size += m.AnswerBytes()
	}
	return out, out[len(out)-1].Cursor, false, nil
}
func (f *fake) ReadTail(space protocol.ID, t store.Tail, limit, maxBytes int) ([]node.Message, store.Tail, bool, error) {
	ms, next, cut, err := f.ReadWithin(space, t.After, limit, maxBytes)
	return ms, store.Tail{After: next}, cut, err
}
func (f *fake) End(space protocol.ID) (store.Cursor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return store.Cursor(len(f.msgs)), nil
}
func (f *fake) Changed(space protocol.ID) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}
func (f *fake) Get(id protocol.ID) (node.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.msgs {
		if m.ID == id {
			return m, nil
		}
	}
	return node.Message{}, &node.Error{Code: api.CodeNotFound, Msg: "no message " + id.String()}
}
func (f *fake) Thread(id protocol.ID, up bool, depth int) (node.Thread, error) {
	m, err := f.Get(id)
	if err != nil {
		return node.Thread{}, err
	}
	return node.Thread{Messages: []node.ThreadMessage{{Message: m}}}, nil
}
func (f *fake) Inbox() protocol.ID { return protocol.InboxSpace(f.id) }
func (f *fake) DM(ctx context.Context, dm node.DM) (node.Sent, error) {
	if err := f.fail(); err != nil {
		return node.Sent{}, err
	}
	f.mu.Lock()
	f.dms = append(f.dms, dm)
	f.mu.Unlock()
	m := f.add("dm")
	return node.Sent{Message: m.Message, Deadline: time.Now().Add(time.Hour), Delivered: true}, nil
}
func (f *fake) DMIACP(ctx context.Context, envelope []byte) (node.Sent, error) {
	return node.Sent{}, &node.Error{Code: api.CodeInvalid, Msg: "not an envelope"}
}
func (f *fake) ExportIACP(id protocol.ID) ([]byte, error)             { return []byte(`{}`), f.fail() }
func (f *fake) Outbox(to string, limit int) ([]store.Outgoing, error) { return nil, f.fail() }
func (f *fake) DeadLetters(after store.Cursor, limit int) ([]store.DeadLetter, store.Cursor, error) {
	return nil, after, f.fail()
}
func (f *fake) Sent(after store.Cursor, limit int) ([]store.SentMessage, store.Cursor, error) {
	return nil, after, f.fail()
}
func (f *fake) CancelOutgoing(id protocol.ID) error { return f.fail() }
func (f *fake) DeleteDeadLetter(id protocol.ID) error {
	return &node.Error{Code: api.CodeNotFound, Msg: "no dead letter"}
}

// fakeHandler is a registered handler of the fake.
type fakeHandler struct {
	allow     []string
	calls     chan node.IncomingCall
	cancelled chan struct{}
	closed    chan struct{}
}

func (h *fakeHandler) Allow() []string                 { return h.allow }
func (h *fakeHandler) Calls() <-chan node.IncomingCall { return h.calls }
func (h *fakeHandler) Cancelled() <-chan struct{}      { return h.cancelled }
func (h *fakeHandler) TakeCancels() []string           { return []string{"c1"} }
func (h *fakeHandler) Close()                          { close(h.closed) }

func (f *fake) RegisterHandler(spec node.HandlerSpec) (Handler, error) {
	if len(spec.Names) == 0 {
		return nil, &node.Error{Code: api.CodeBadRequest, Msg: "names is empty"}
	}
	allow, err := policy.ParseCallPolicy(spec.Allow)
	if err != nil {
		return nil, &node.Error{Code: api.CodeBadRequest, Msg: err.Error()}
	}
	h := &fakeHandler{allow: allow.Words(), calls: make(chan node.IncomingCall, 4), cancelled: make(chan struct{}, 1), closed: make(chan struct{})}
	f.mu.Lock()
	f.handler, f.spec = h, spec
	f.mu.Unlock()
	return h, nil
}

func (f *fake) Trust(p peer.ID, name string) (policy.Trusted, bool, error) {
	if p == f.id {
		return policy.Trusted{}, false, &node.Error{Code: api.CodeBadPeer, Msg: "that is this node"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := policy.Trusted{Peer: p, Name: name, Added: time.Unix(1700000000, 0)}
	for i, old := range f.trusted {
		if old.Peer == p {
			f.trusted[i] = t
			return t, false, nil
		}
	}
	f.trusted = append(f.trusted, t)
	return t, true, nil
}

func (f *fake) Untrust(p peer.ID) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, t := range f.trusted {
		if t.Peer == p {
			f.trusted = append(f.trusted[:i], f.trusted[i+1:]...)
			return true, nil
		}
	}
	return false, nil
}

func (f *fake) Trusted() []policy.Trusted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]policy.Trusted(nil), f.trusted...)
}

func (f *fake) DMPolicy() policy.DMConfig { return policy.DefaultDM() }
func (f *fake) CallIsStream(id string) (bool, error) {
	if id != "c1" && id != "s1" {
		return false, &node.Error{Code: api.CodeUnknownCall, Msg: "no call " + id}
	}
	return id == "s1", nil
}
func (f *fake) Delta(id string, data json.RawMessage, flush bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, node.Reply{Output: bytes.Clone(data)}) // data is the API's to reuse
	return nil
}
func (f *fake) Finish(id string, r node.Reply) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Output = bytes.Clone(r.Output)
	f.replies = append(f.replies, r)
	return f.err
}
func (f *fake) FailCall(id, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, node.Reply{Error: protocol.Errorf(protocol.CodeHandlerFailed, "%s", msg)})
}
func (f *fake) Invoke(ctx context.Context, inv node.Invocation) (node.Result, error) {
	if err := f.fail(); err != nil {
		return node.Result{}, err
	}
	f.mu.Lock()
	f.invs = append(f.invs, inv)
	f.mu.Unlock()
	return node.Result{Output: json.RawMessage(`{"ok":true}`)}, nil
}

// fakeStream answers a stream call with the fake's frames.
type fakeStream struct{ frames []protocol.CallFrame }

func (s *fakeStream) Next() (protocol.CallFrame, error) {
	if len(s.frames) == 0 {
		return protocol.CallFrame{}, errEOF
	}
	f := s.frames[0]
	s.frames = s.frames[1:]
	return f, nil
}
func (s *fakeStream) Buffered() bool { return len(s.frames) > 0 }
func (s *fakeStream) Close() error   { return nil }

func (f *fake) StreamInvoke(ctx context.Context, inv node.Invocation) (CallStream, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fakeStream{frames: append([]protocol.CallFrame(nil), f.frames...)}, nil
}
func (f *fake) Card() protocol.Card { return protocol.Card{ID: f.id.String(), Name: "fake"} }
func (f *fake) SetCard(u node.CardUpdate) (protocol.Card, error) {
	c := f.Card()
	if u.Name != nil {
		c.Name = *u.Name
	}
	return c, f.fail()
}
func (f *fake) PeerCard(ctx context.Context, p peer.ID) (protocol.Card, error) {
	return f.Card(), f.fail()
}
func (f *fake) PeerHealth(ctx context.Context, p peer.ID) (protocol.Health, time.Duration, error) {
	return protocol.Health{Status: "ok"}, time.Millisecond, f.fail()
}
func (f *fake) Discover(ctx context.Context, capability string, limit int) ([]agent.Provider, error) {
	if err := protocol.CheckName(capability); err != nil {
		return nil, &node.Error{Code: api.CodeBadRequest, Msg: err.Error()}
	}
	return []agent.Provider{{Card: f.Card()}}, f.fail()
}
func (f *fake) Serving() node.Serving {
	return node.Serving{Handlers: []node.HandlerInfo{{Names: []string{"echo"}, Allow: []string{"trusted"}, InFlight: 1, Capacity: 64}},
		Calls: []node.ServedCall{{ID: "c1", Name: "echo", From: f.id, Started: time.Now().Add(-time.Second)}}}
}

// anyPeer is the provider the fake's calls by capability say answered.
const anyPeer = "12D3KooWGRUVh5nWUfQ1UhCF5A2ojYUJ4DqYyhZ3WmcWqpbbPEKY"

func (f *fake) InvokeAny(ctx context.Context, inv node.Invocation) (node.Result, node.AnyResult, error) {
	r, err := f.Invoke(ctx, inv)
	p, _ := peer.Decode(anyPeer)
	return r, node.AnyResult{Peer: p, Attempts: []node.Attempt{{Peer: f.id, Code: "unreachable"}}}, err
}

func (f *fake) StreamInvokeAny(ctx context.Context, inv node.Invocation) (CallStream, node.AnyResult, error) {
	cs, err := f.StreamInvoke(ctx, inv)
	p, _ := peer.Decode(anyPeer)
	return cs, node.AnyResult{Peer: p}, err
}
