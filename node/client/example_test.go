package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/node/daemon"
	"github.com/weftmesh/weft/protocol/api"
)

// The examples run against a real mesh of two in-process daemons on
// 127.0.0.1, started by TestMain: "ours", whose home is $WEFT_HOME (so the
// examples use a zero client.Client, as an agent on that machine would),
// and a second one where another agent, bob, runs (see serveBob and
// answerBob). The examples find bob the way an agent would: among the
// peers, or by discovering a capability.

// remote is bob's client: another agent on another machine. Only the
// examples that need someone to call our node use it.
var remote *client.Client

// offline is the peer ID of an agent that is not running.
const offline = "12D3KooWKJFS7MgfSEGRPqMvtTqZpYA8LnhfXSG6WwzUeLjrJcVi"

// errStop ends a Follow or Handlers loop once an example has what it
// waited for.
var errStop = errors.New("stop")

// Client's zero value talks to the daemon whose home is $WEFT_HOME (else
// ~/.weft).
func ExampleClient() {
	var c client.Client
	n, err := c.Node(context.Background())
	if errors.Is(err, client.ErrNotRunning) {
		fmt.Println("no daemon: start one with `weft daemon`")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	// Others connect to this node with any of its addresses.
	for _, addr := range n.Addrs {
		if !strings.HasSuffix(addr, "/p2p/"+n.ID) {
			fmt.Println("not a full address:", addr)
		}
	}
	fmt.Println("a daemon is running:", n.ID != "")
	// Output:
	// a daemon is running: true
}

// A Client for a daemon with another home (or socket).
func ExampleClient_Node() {
	c := &client.Client{Home: os.Getenv("WEFT_HOME")} // or Socket: "/path/to/weft.sock"
	n, err := c.Node(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("listening:", len(n.Addrs) > 0)
	// Output:
	// listening: true
}

func ExampleClient_Peers() {
	var c client.Client
	peers, err := c.Peers(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(peers), "peer connected")
	// Output:
	// 1 peer connected
}

// Connect dials a peer by a multiaddr ending in /p2p/ID, here one found by
// discovery. Connecting to a connected peer is fine.
func ExampleClient_Connect() {
	ctx := context.Background()
	var c client.Client
	found, err := c.Discover(ctx, "upper", 1, 5*time.Second)
	if err != nil || len(found) == 0 {
		fmt.Println("nobody offers upper:", err)
		return
	}
	p := found[0]
	for _, addr := range p.Addrs {
		peer, err := c.Connect(ctx, addr+"/p2p/"+p.Card.ID)
		if err != nil {
			continue // try the next address
		}
		fmt.Println("connected to", p.Card.Name, peer.ID == p.Card.ID)
		return
	}
	fmt.Println("no address worked")
	// Output:
	// connected to bob true
}

// Join joins a space by name; joining again is fine.
func ExampleClient_Join() {
	var c client.Client
	s, err := c.Join(context.Background(), "example-join")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("joined", s.Name)
	// Output:
	// joined example-join
}

// JoinSpace joins a space and says what this node keeps of it.
func ExampleClient_JoinSpace() {
	var c client.Client
	s, err := c.JoinSpace(context.Background(), api.JoinRequest{
		Name:      "example-joinspace",
		Retention: &api.Retention{MaxCount: 10000, MaxAge: "720h"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Name, "keeps", s.Retention.MaxCount, "messages for", s.Retention.MaxAge)
	// Output:
	// example-joinspace keeps 10000 messages for 720h0m0s
}

func ExampleClient_Spaces() {
	ctx := context.Background()
	var c client.Client
	for _, name := range []string{"example-spaces-plans", "example-spaces-reviews"} {
		if _, err := c.Join(ctx, name); err != nil {
			fmt.Println(err)
			return
		}
	}
	spaces, err := c.Spaces(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range spaces {
		if strings.HasPrefix(s.Name, "example-spaces-") {
			fmt.Println(s.Name)
		}
	}
	// Unordered output:
	// example-spaces-plans
	// example-spaces-reviews
}

// Leave leaves a space; reading it afterwards needs a join again.
func ExampleClient_Leave() {
	ctx := context.Background()
	var c client.Client
	if _, err := c.Join(ctx, "example-leave"); err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Leave(ctx, "example-leave"); err != nil {
		fmt.Println(err)
		return
	}
	_, err := c.Read(ctx, "example-leave", "", 10)
	fmt.Println("still joined:", !client.IsCode(err, api.CodeUnknownSpace))
	// Output:
	// still joined: false
}

// Send sends any JSON object with a type, links and meta.
func ExampleClient_Send() {
	ctx := context.Background()
	var c client.Client
	if _, err := c.Join(ctx, "example-send"); err != nil {
		fmt.Println(err)
		return
	}
	task, err := c.Send(ctx, "example-send", api.SendRequest{
		Type:    "team.task",
		Content: json.RawMessage(`{"task": "review PR 42"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A reply names what it answers in refs.messages.
	status, err := c.Send(ctx, "example-send", api.SendRequest{
		Type:    "team.status",
		Content: json.RawMessage(`{"state": "working"}`),
		Refs:    &api.Refs{Messages: []string{task.ID}},
		TTL:     3600, // seconds; then it is gone everywhere
		Meta:    map[string]string{"session": "s-1"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(status.Type, "replies to the task:", status.Refs.Messages[0] == task.ID)
	// Output:
	// team.status replies to the task: true
}

// SendText sends {"text": …} with type "text".
func ExampleClient_SendText() {
	ctx := context.Background()
	var c client.Client
	if _, err := c.Join(ctx, "example-sendtext"); err != nil {
		fmt.Println(err)
		return
	}
	m, err := c.SendText(ctx, "example-sendtext", "hello, mesh")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Type, string(m.Content))
	// Output:
	// text {"text":"hello, mesh"}
}

// Read pages through a space with its cursor: pass each page's Next as
// after to get the following one. Keep the last Next to read only what
// is new later.
func ExampleClient_Read() {
	ctx := context.Background()
	var c client.Client
	if _, err := c.Join(ctx, "example-read"); err != nil {
		fmt.Println(err)
		return
	}
	for i := 1; i <= 5; i++ {
		if _, err := c.SendText(ctx, "example-read", fmt.Sprintf("note %d", i)); err != nil {
			fmt.Println(err)
			return
		}
	}
	cursor := "" // the start
	for {
		page, err := c.Read(ctx, "example-read", cursor, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		if len(page.Messages) == 0 {
			break // the end, for now
		}
		for _, m := range page.Messages {
			var body struct{ Text string }
			json.Unmarshal(m.Content, &body)
			fmt.Printf("%s (page of %d)\n", body.Text, len(page.Messages))
		}
		cursor = page.Next
	}
	// Output:
	// note 1 (page of 2)
	// note 2 (page of 2)
	// note 3 (page of 2)
	// note 4 (page of 2)
	// note 5 (page of 1)
}

// Follow replays a space and then follows it live; return an error from
// the callback to stop, and pass the last cursor to resume without loss.
func ExampleClient_Follow() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c client.Client
	if _, err := c.Join(ctx, "example-follow"); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []string{"one", "two"} {
		if _, err := c.SendText(ctx, "example-follow", s); err != nil {
			fmt.Println(err)
			return
		}
	}
	cursor := ""
	follow := func(want int) {
		err := c.Follow(ctx, "example-follow", cursor, func(m api.Message) error {
			var body struct{ Text string }
			json.Unmarshal(m.Content, &body)
			fmt.Println(body.Text)
			cursor = m.Cursor // where to resume
			if want--; want == 0 {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			fmt.Println(err)
		}
	}
	follow(2) // the two sent so far
	// Later: a message arrives while nobody follows; resuming from the
	// cursor gets it, and nothing seen before.
	if _, err := c.SendText(ctx, "example-follow", "three"); err != nil {
		fmt.Println(err)
		return
	}
	follow(1)
	// Output:
	// one
	// two
	// three
}

// Message fetches one message by its ID.
func ExampleClient_Message() {
	ctx := context.Background()
	var c client.Client
	if _, err := c.Join(ctx, "example-message"); err != nil {
		fmt.Println(err)
		return
	}
	sent, err := c.SendText(ctx, "example-message", "remember this")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := c.Message(ctx, sent.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(m.Content), "signed:", m.Sig != "", "same sender:", m.From == sent.From)
	// Output:
	// {"text":"remember this"} signed: true same sender: true
}

// Thread walks refs.messages: up to what a message answers, or down to
// its replies.
func ExampleClient_Thread() {
	ctx := context.Background()
	var c client.Client
	if _, err := c.Join(ctx, "example-thread"); err != nil {
		fmt.Println(err)
		return
	}
	say := func(text string, replyTo ...string) string {
		content, _ := json.Marshal(map[string]string{"text": text})
		m, err := c.Send(ctx, "example-thread", api.SendRequest{Content: content, Refs: &api.Refs{Messages: replyTo}})
		if err != nil {
			fmt.Println(err)
		}
		return m.ID
	}
	q := say("which cache?")
	a := say("redis", q)
	f := say("why redis?", a)

	show := func(t api.Thread) {
		for _, m := range t.Messages {
			var body struct{ Text string }
			json.Unmarshal(m.Content, &body)
			fmt.Printf("%s%s\n", strings.Repeat("  ", m.Depth), body.Text)
		}
	}
	up, err := c.Thread(ctx, f, true, -1) // what the follow-up answers, and so on
	if err != nil {
		fmt.Println(err)
		return
	}
	show(up)
	down, err := c.Thread(ctx, q, false, 1) // direct replies to the question only
	if err != nil {
		fmt.Println(err)
		return
	}
	show(down)
	// Output:
	// why redis?
	//   redis
	//     which cache?
	// which cache?
	//   redis
}

// DM sends a direct message; it is queued and retried if the peer cannot
// be reached now.
func ExampleClient_DM() {
	ctx := context.Background()
	var c client.Client
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) == 0 {
		fmt.Println("no peers", err)
		return
	}
	res, err := c.DM(ctx, api.DMRequest{
		To:      peers[0].ID,
		Kind:    "request",
		Content: json.RawMessage(`{"text": "hello bob"}`),
		TTL:     3600, // keep trying for an hour
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status)
	// Output:
	// delivered
}

// FollowInbox waits for the answer to a request: the response names the
// request in refs.messages.
func ExampleClient_FollowInbox() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c client.Client
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) == 0 {
		fmt.Println("no peers", err)
		return
	}
	req, err := c.DM(ctx, api.DMRequest{To: peers[0].ID, Kind: "request", Content: json.RawMessage(`{"text": "shout this"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = c.FollowInbox(ctx, "", func(m api.Message) error {
		if m.Type != "response" || m.Refs == nil || !slices.Contains(m.Refs.Messages, req.Message.ID) {
			return nil // not the answer
		}
		fmt.Println(string(m.Content))
		return errStop
	})
	if !errors.Is(err, errStop) {
		fmt.Println(err)
	}
	// Output:
	// {"text":"SHOUT THIS"}
}

// Inbox reads the direct messages received a page at a time; polling it
// from the last cursor sees only what is new.
func ExampleClient_Inbox() {
	ctx := context.Background()
	var c client.Client
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) == 0 {
		fmt.Println("no peers", err)
		return
	}
	req, err := c.DM(ctx, api.DMRequest{To: peers[0].ID, Kind: "request", Content: json.RawMessage(`{"text": "poll me"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	cursor := ""
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		page, err := c.Inbox(ctx, cursor, 100)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, m := range page.Messages {
			if m.Refs != nil && slices.Contains(m.Refs.Messages, req.Message.ID) {
				fmt.Println(m.Type, string(m.Content))
				return
			}
		}
		cursor = page.Next
		if len(page.Messages) == 0 {
			time.Sleep(100 * time.Millisecond) // nothing new yet
		}
	}
	fmt.Println("no answer")
	// Output:
	// response {"text":"POLL ME"}
}

// Outbox shows the direct messages still waiting for their recipient.
func ExampleClient_Outbox() {
	ctx := context.Background()
	var c client.Client
	res, err := c.DM(ctx, api.DMRequest{To: offline, Content: json.RawMessage(`{"text": "when you are back"}`), TTL: 600})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status)
	waiting, err := c.Outbox(ctx, offline)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range waiting {
		if o.ID == res.Message.ID {
			fmt.Println("waiting, tried:", o.Attempts > 0, "why not delivered:", o.LastError != "")
		}
	}
	// Output:
	// queued
	// waiting, tried: true why not delivered: true
}

// DeadLetters lists the direct messages given up on (deadline passed, or
// refused by the recipient), with the reason.
func ExampleClient_DeadLetters() {
	ctx := context.Background()
	var c client.Client
	res, err := c.DM(ctx, api.DMRequest{To: offline, Content: json.RawMessage(`{"text": "now or never"}`), TTL: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		dead, err := c.DeadLetters(ctx, "", 100)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, d := range dead.Messages {
			if d.ID != res.Message.ID {
				continue
			}
			reason, _, _ := strings.Cut(d.Reason, ";") // then the last error and the attempts
			fmt.Println(reason)
			// Done with it: remove it.
			if err := c.DeleteDeadLetter(ctx, d.ID); err != nil {
				fmt.Println(err)
			}
			return
		}
	}
	fmt.Println("still waiting")
	// Output:
	// deadline passed before delivery
}

// Invoke calls a handler of a peer found by capability.
func ExampleClient_Invoke() {
	ctx := context.Background()
	var c client.Client
	found, err := c.Discover(ctx, "upper", 1, 5*time.Second)
	if err != nil || len(found) == 0 {
		fmt.Println("nobody offers upper", err)
		return
	}
	res, err := c.Invoke(ctx, api.InvokeRequest{
		Peer:    found[0].Card.ID,
		Name:    "upper",
		Input:   json.RawMessage(`{"text": "make me loud"}`),
		Timeout: "10s",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Output))
	// Output:
	// {"text":"MAKE ME LOUD"}
}

// InvokeStream gets a handler's output as it is produced.
func ExampleClient_InvokeStream() {
	ctx := context.Background()
	var c client.Client
	found, err := c.Discover(ctx, "count", 1, 5*time.Second)
	if err != nil || len(found) == 0 {
		fmt.Println("nobody offers count", err)
		return
	}
	req := api.InvokeRequest{Peer: found[0].Card.ID, Name: "count", Input: json.RawMessage(`{"to": 3}`)}
	err = c.InvokeStream(ctx, req, func(f api.Frame) error {
		if f.Kind == "started" { // the handler has the call
			fmt.Println(f.Seq, f.Kind)
			return nil
		}
		fmt.Println(f.Seq, f.Kind, string(f.Data))
		return nil // an error here cancels the call
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 started
	// 1 delta {"n":1}
	// 2 delta {"n":2}
	// 3 delta {"n":3}
	// 4 final {"counted":3}
}

// Serve answers calls to a name with a Go function. Here another agent,
// bob, calls it: bob is on this node's trust list, and handlers take calls
// from trusted peers only unless their Allow says otherwise (a peer ID, or
// "anyone").
func ExampleClient_Serve() {
	ctx, stop := context.WithCancel(context.Background())
	var c client.Client
	greet := func(ctx context.Context, call api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		var in struct{ Name string }
		if err := json.Unmarshal(call.Input, &in); err != nil || in.Name == "" {
			return nil, nil, &client.Error{Code: "bad_input", Message: `want {"name": …}`}
		}
		out, err := json.Marshal(map[string]string{"greeting": "hello, " + in.Name})
		return out, nil, err
	}
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- c.Serve(ctx, api.HandlerRequest{
			Names:        []string{"greet"},
			Capabilities: []api.Capability{{Name: "greet", Description: "greets whoever is named"}},
		}, greet, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-served:
		fmt.Println(err)
		stop()
		return
	}

	me, _ := c.Node(ctx)
	for _, input := range []string{`{"name": "bob"}`, `{}`} {
		res, err := remote.Invoke(ctx, api.InvokeRequest{Peer: me.ID, Name: "greet", Input: json.RawMessage(input)})
		var e *client.Error
		switch {
		case errors.As(err, &e):
			fmt.Println("error:", e.Code, e.Message)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println(string(res.Output))
		}
	}
	stop() // unregisters the handler
	<-served
	// Output:
	// {"greeting":"hello, bob"}
	// error: bad_input want {"name": …}
}

// Trust lets a peer call this node's handlers that allow "trusted" (the
// default), and write to its inbox without the limits strangers have.
func ExampleClient_Trust() {
	ctx := context.Background()
	var c client.Client
	bob, err := remote.Node(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Trust(ctx, bob.ID, "bob"); err != nil {
		fmt.Println(err)
		return
	}
	list, err := c.Trusted(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range list.Peers {
		fmt.Println(t.Name, t.Peer == bob.ID)
	}
	fmt.Println("direct messages from", list.DM.Policy)
	// Output:
	// bob true
	// direct messages from anyone
}

// Handlers is the low-level way to serve calls: one event per line from
// the daemon; answer each call with Reply (or Frames for a stream call).
func ExampleClient_Handlers() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var c client.Client
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- c.Handlers(ctx, api.HandlerRequest{Names: []string{"add"}}, func(ev api.HandlerEvent) error {
			switch ev.Type {
			case "ready":
				close(ready)
			case "call":
				var in struct{ A, B int }
				json.Unmarshal(ev.Call.Input, &in)
				out, _ := json.Marshal(map[string]int{"sum": in.A + in.B})
				return c.Reply(ctx, ev.Call.ID, api.Reply{Output: out})
			}
			return nil
		})
	}()
	<-ready

	me, _ := c.Node(ctx)
	res, err := remote.Invoke(ctx, api.InvokeRequest{Peer: me.ID, Name: "add", Input: json.RawMessage(`{"a": 2, "b": 3}`)})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(string(res.Output))
	stop()
	<-served
	// Output:
	// {"sum":5}
}

// Frames answers a stream call with NDJSON lines: deltas, then a final
// (or an error).
func ExampleClient_Frames() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var c client.Client
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- c.Handlers(ctx, api.HandlerRequest{Names: []string{"lines"}}, func(ev api.HandlerEvent) error {
			switch ev.Type {
			case "ready":
				close(ready)
			case "call":
				frames := `{"kind": "delta", "output": {"line": "first"}}` + "\n" +
					`{"kind": "delta", "output": {"line": "second"}}` + "\n" +
					`{"kind": "final", "output": {"lines": 2}}` + "\n"
				return c.Frames(ctx, ev.Call.ID, strings.NewReader(frames))
			}
			return nil
		})
	}()
	<-ready

	me, _ := c.Node(ctx)
	err := remote.InvokeStream(ctx, api.InvokeRequest{Peer: me.ID, Name: "lines"}, func(f api.Frame) error {
		if f.Kind != "started" {
			fmt.Println(f.Kind, string(f.Data))
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	stop()
	<-served
	// Output:
	// delta {"line":"first"}
	// delta {"line":"second"}
	// final {"lines":2}
}

// Card is this node's agent card: its name, description and what it
// offers (static capabilities and its handlers' names).
func ExampleClient_Card() {
	ctx := context.Background()
	var c client.Client
	card, err := c.Card(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	me, err := c.Node(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the card is this node's:", card.ID == me.ID)
	// Output:
	// the card is this node's: true
}

// SetCard names this node and lists what it offers; the capabilities are
// advertised in the DHT so others can Discover them.
func ExampleClient_SetCard() {
	var c client.Client
	name, about := "alice", "plans releases"
	caps := []api.Capability{{Name: "release_planning", Description: "turns a changelog into a release plan"}}
	card, err := c.SetCard(context.Background(), api.CardUpdate{Name: &name, Description: &about, Capabilities: &caps})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(card.Name, "-", card.Description)
	for _, cp := range card.Capabilities {
		if cp.Name == "release_planning" {
			fmt.Println("offers", cp.Name)
		}
	}
	// Output:
	// alice - plans releases
	// offers release_planning
}

// PeerCard asks a peer for its card.
func ExampleClient_PeerCard() {
	ctx := context.Background()
	var c client.Client
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) == 0 {
		fmt.Println("no peers", err)
		return
	}
	card, err := c.PeerCard(ctx, peers[0].ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(card.Name, "-", card.Description)
	for _, cp := range card.Capabilities {
		fmt.Printf("  %s: %s\n", cp.Name, cp.Description)
	}
	// Output:
	// bob - uppercases and counts
	//   count: streams the numbers from 1 to "to"
	//   upper: uppercases "text"
}

// Health asks a peer for its heartbeat.
func ExampleClient_Health() {
	ctx := context.Background()
	var c client.Client
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) == 0 {
		fmt.Println("no peers", err)
		return
	}
	h, err := c.Health(ctx, peers[0].ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Status, "handlers:", h.Handlers, "measured round trip:", h.RTTMillis > 0)
	// Output:
	// ok handlers: 1 measured round trip: true
}

// Discover finds the peers that offer a capability, with no registry.
func ExampleClient_Discover() {
	var c client.Client
	found, err := c.Discover(context.Background(), "upper", 10, 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range found {
		fmt.Println(p.Card.Name, "offers upper; reachable at a known address:", len(p.Addrs) > 0)
	}
	// Output:
	// bob offers upper; reachable at a known address: true
}

// IsCode tells API errors apart by their stable code.
func ExampleIsCode() {
	ctx := context.Background()
	var c client.Client
	_, err := c.Read(ctx, "never-joined", "", 10)
	if client.IsCode(err, api.CodeUnknownSpace) {
		fmt.Println("join it first")
	}
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) == 0 {
		fmt.Println("no peers", err)
		return
	}
	_, err = c.Invoke(ctx, api.InvokeRequest{Peer: peers[0].ID, Name: "no-such-tool"})
	var e *client.Error
	if client.IsCode(err, api.CodeNoHandler) && errors.As(err, &e) {
		fmt.Println("no handler; HTTP status", e.Status)
	}
	// Output:
	// join it first
	// no handler; HTTP status 404
}

// TestMain runs the examples against two real daemons on 127.0.0.1, with
// bob's agent on the second, and removes everything afterwards.
func TestMain(m *testing.M) {
	code, err := runMesh(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		code = 1
	}
	os.Exit(code)
}

// runMesh starts the two nodes and bob, runs the examples and stops it
// all, in reverse.
func runMesh(m *testing.M) (code int, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ours, stopOurs, err := startNode(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, stopOurs()) }()
	theirs, stopTheirs, err := startNode(ctx, []string{ours.addr})
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, stopTheirs()) }()
	if err := os.Setenv("WEFT_HOME", ours.home); err != nil {
		return 0, err
	}
	remote = &client.Client{Home: theirs.home}
	// Each node trusts the other, so that each may call the other's
	// handlers (which take calls from trusted peers only by default).
	if _, err := (&client.Client{Home: ours.home}).Trust(ctx, theirs.id, "bob"); err != nil {
		return 0, err
	}
	if _, err := remote.Trust(ctx, ours.id, "us"); err != nil {
		return 0, err
	}

	var wg sync.WaitGroup
	defer wg.Wait() // bob stops (cancel, below) before the nodes close
	defer cancel()
	ready := make(chan struct{})
	bobErr := make(chan error, 2)
	wg.Go(func() { bobErr <- serveBob(ctx, remote, ready) })
	wg.Go(func() { bobErr <- answerBob(ctx, remote) })
	select {
	case <-ready:
	case err := <-bobErr:
		return 0, fmt.Errorf("bob: %w", err)
	case <-time.After(30 * time.Second):
		return 0, errors.New("bob's handlers did not register")
	}
	if err := waitDiscovered(ctx, theirs.id, 30*time.Second); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// testNode is a daemon started for the examples.
type testNode struct {
	home string // its data dir, with its socket
	id   string // its peer ID
	addr string // a full multiaddr of it, ending in /p2p/ID
}

// startNode starts a daemon on 127.0.0.1 with mDNS off in a new temporary
// home; stop closes it and removes the home.
func startNode(ctx context.Context, bootstrap []string) (*testNode, func() error, error) {
	home, err := os.MkdirTemp("", "weft-ex-") // short: socket paths are limited
	if err != nil {
		return nil, nil, err
	}
	cfg := daemon.Default()
	cfg.Home = home
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	cfg.Bootstrap = bootstrap
	n, err := daemon.New(ctx, cfg)
	if err != nil {
		os.RemoveAll(home)
		return nil, nil, fmt.Errorf("start node: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- n.Serve() }()
	stop := func() error {
		err := errors.Join(n.Close(), <-served)
		return errors.Join(err, os.RemoveAll(home))
	}
	return &testNode{home: home, id: n.ID().String(), addr: n.Addrs()[0].String()}, stop, nil
}

// waitDiscovered polls until our node is connected to peer and discovers
// bob's capabilities.
func waitDiscovered(ctx context.Context, peer string, timeout time.Duration) error {
	var c client.Client
	deadline := time.Now().Add(timeout)
	for {
		found, err := c.Discover(ctx, "upper", 1, 2*time.Second)
		if err == nil && len(found) == 1 && found[0].Card.ID == peer {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bob not discovered after %v (last: %v, %v)", timeout, found, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveBob is bob's agent: it names itself and serves upper (unary) and
// count (stream) until ctx ends; ready is closed once it is registered.
func serveBob(ctx context.Context, bob *client.Client, ready chan<- struct{}) error {
	name, about := "bob", "uppercases and counts"
	if _, err := bob.SetCard(ctx, api.CardUpdate{Name: &name, Description: &about}); err != nil {
		return err
	}
	handle := func(ctx context.Context, call api.IncomingCall, send func(json.RawMessage) error) (json.RawMessage, map[string]string, error) {
		var in struct {
			Text string
			To   int
		}
		if err := json.Unmarshal(call.Input, &in); err != nil {
			return nil, nil, err
		}
		if call.Name == "upper" {
			out, err := json.Marshal(map[string]string{"text": strings.ToUpper(in.Text)})
			return out, nil, err
		}
		for i := 1; i <= in.To; i++ {
			if err := send(json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				return nil, nil, err
			}
		}
		return json.RawMessage(fmt.Sprintf(`{"counted":%d}`, in.To)), nil, nil
	}
	err := bob.Serve(ctx, api.HandlerRequest{
		Names: []string{"upper", "count"},
		Capabilities: []api.Capability{
			{Name: "upper", Description: `uppercases "text"`},
			{Name: "count", Description: `streams the numbers from 1 to "to"`},
		},
	}, handle, func() { close(ready) })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// answerBob answers every request DM bob receives with a response holding
// its text in upper case, until ctx ends.
func answerBob(ctx context.Context, bob *client.Client) error {
	err := bob.FollowInbox(ctx, "", func(m api.Message) error {
		if m.Type != "request" {
			return nil
		}
		var in struct{ Text string }
		json.Unmarshal(m.Content, &in)
		out, err := json.Marshal(map[string]string{"text": strings.ToUpper(in.Text)})
		if err != nil {
			return err
		}
		_, err = bob.DM(ctx, api.DMRequest{To: m.From, Kind: "response", ReplyTo: m.ID, Content: out})
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
