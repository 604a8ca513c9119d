package agent_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/protocol"
)

// A card and a health make the round trip: the card's ID is the serving
// peer's whatever its owner set, invalid and repeated capability names are
// left out, and health comes back with an RTT.
func TestCardAndHealth(t *testing.T) {
	t.Parallel()
	srvH, cliH := newHost(t), newHost(t)
	served := protocol.Card{
		ID:          "not-my-id", // overwritten
		Name:        "reviewer",
		Description: "reviews Go",
		Version:     "1.2.3",
		Capabilities: []protocol.Capability{
			{Name: "code_review", Description: "review a diff", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "bad name"},
			{Name: "code_review", Description: "a repeat"},
			{Name: "translate/de:en"},
		},
	}
	srv := newService(t, srvH, nil,
		agent.WithCard(func() protocol.Card { return served }),
		agent.WithHealth(func() protocol.Health {
			return protocol.Health{Status: "busy", ActiveCalls: 3, Handlers: 2, Load: 1.5, UptimeS: 42}
		}))
	cli := newService(t, cliH, nil)
	connect(t, cliH, srvH)

	want := protocol.Card{
		ID:          srvH.ID().String(),
		Name:        "reviewer",
		Description: "reviews Go",
		Version:     "1.2.3",
		Capabilities: []protocol.Capability{
			{Name: "code_review", Description: "review a diff", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "translate/de:en"},
		},
	}
	got, err := cli.Card(t.Context(), srvH.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("card\n got %+v\nwant %+v", got, want)
	}
	if local := srv.LocalCard(); !reflect.DeepEqual(local, want) {
		t.Errorf("LocalCard = %+v, want %+v", local, want)
	}
	if self, err := srv.Card(t.Context(), srvH.ID()); err != nil || !reflect.DeepEqual(self, want) {
		t.Errorf("Card(self) = %+v, %v; want %+v", self, err, want)
	}
	// Without WithCard a node serves a card with its ID only.
	if c, err := srv.Card(t.Context(), cliH.ID()); err != nil || !reflect.DeepEqual(c, protocol.Card{ID: cliH.ID().String()}) {
		t.Errorf("default card = %+v, %v", c, err)
	}

	before := time.Now().UnixMilli()
	h, rtt, err := cli.Health(t.Context(), srvH.ID())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "busy" || h.ActiveCalls != 3 || h.Handlers != 2 || h.Load != 1.5 || h.UptimeS != 42 {
		t.Errorf("health = %+v", h)
	}
	if h.Time < before-1000 || h.Time > time.Now().UnixMilli()+1000 {
		t.Errorf("health time %d not set to the serving node's now", h.Time)
	}
	if rtt <= 0 || rtt > 5*time.Second {
		t.Errorf("rtt = %v", rtt)
	}
	if l := cliH.Peerstore().LatencyEWMA(srvH.ID()); l <= 0 {
		t.Errorf("rtt not recorded in the peerstore: %v", l)
	}
	// Without WithHealth a node says "ok".
	if h, _, err := srv.Health(t.Context(), cliH.ID()); err != nil || h.Status != "ok" || h.Time == 0 {
		t.Errorf("default health = %+v, %v", h, err)
	}
	if h, rtt, err := srv.Health(t.Context(), srvH.ID()); err != nil || h.Status != "busy" || rtt != 0 {
		t.Errorf("Health(self) = %+v, %v, %v", h, rtt, err)
	}
}

// Cards are cached for the TTL; Forget drops one; callers cannot change
// the cached copy.
func TestCardCache(t *testing.T) {
	t.Parallel()
	srvH, cliH, cli2H := newHost(t), newHost(t), newHost(t)
	card := newLiveCard(cardOf("v1", "a"))
	newService(t, srvH, nil, card.option())
	cli := newService(t, cliH, nil) // default TTL: a minute
	cli2 := newService(t, cli2H, nil, agent.WithCardCacheTTL(100*time.Millisecond))
	connect(t, cliH, srvH)
	connect(t, cli2H, srvH)

	get := func(s *agent.Service) protocol.Card {
		t.Helper()
		c, err := s.Card(t.Context(), srvH.ID())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := get(cli)
	get(cli2)
	c.Capabilities[0].Name = "changed by the caller"
	card.set(cardOf("v2", "b"))
	if c := get(cli); c.Name != "v1" || c.Capabilities[0].Name != "a" {
		t.Fatalf("cached card = %+v, want v1 unchanged", c)
	}
	cli.Forget(srvH.ID())
	if c := get(cli); c.Name != "v2" {
		t.Fatalf("card after Forget = %+v, want v2", c)
	}
	waitFor(t, 5*time.Second, "the short-TTL cache to expire", func() bool { return get(cli2).Name == "v2" })
}

// A serving peer that forges its card's ID, or answers with garbage, too
// much, too little or too late, is refused with an error that says so.
func TestBadAnswersRefused(t *testing.T) {
	t.Parallel()
	evil, cliH, hurriedH, other := newHost(t), newHost(t), newHost(t), newHost(t)
	// Answers that come get the time a loaded machine may need; only the
	// one that never comes is waited for briefly.
	cli := newService(t, cliH, nil, agent.WithTimeout(10*time.Second))
	hurried := newService(t, hurriedH, nil, agent.WithTimeout(500*time.Millisecond))
	connect(t, cliH, evil)
	connect(t, hurriedH, evil)

	cardJSON := func(id string) []byte {
		b, _ := json.Marshal(protocol.Card{ID: id, Capabilities: []protocol.Capability{{Name: "code_review"}}})
		return b
	}
	card := func(id string) []byte { return frame(cardJSON(id)) }
	tooLarge := append(binary.AppendUvarint(nil, 256<<10+1), bytes.Repeat([]byte{'x'}, 1024)...)
	cases := []struct {
		name   string
		health bool // ask for health, not the card
		answer []byte
		hang   bool // never answer
		want   error
		text   string // in the error message
	}{
		{name: "forged id", answer: card(other.ID().String()), want: agent.ErrForged, text: other.ID().String()},
		{name: "no id", answer: card(""), want: agent.ErrForged},
		{name: "id not a peer id", answer: card("someone"), want: agent.ErrForged, text: "someone"},
		{name: "too large", answer: tooLarge, want: protocol.ErrTooLarge, text: "exceeds"},
		{name: "garbage", answer: frame([]byte("not json")), want: protocol.ErrMalformed, text: "not a JSON object"},
		{name: "json array", answer: frame([]byte(`[1,2]`)), want: protocol.ErrMalformed},
		{name: "trailing garbage", answer: frame(append(cardJSON(evil.ID().String()), "}}"...)), want: protocol.ErrMalformed},
		{name: "bad length", answer: bytes.Repeat([]byte{0xff}, 11), want: protocol.ErrMalformed, text: "overflows"},
		{name: "truncated", answer: frame(bytes.Repeat([]byte{'x'}, 100))[:20], want: io.ErrUnexpectedEOF},
		{name: "no answer", answer: nil, text: "EOF"},
		{name: "error answer", answer: frame([]byte(`{"error":{"code":"overloaded","message":"try later"}}`)),
			want: &protocol.CallError{Code: protocol.CodeOverloaded}, text: "try later"},
		{name: "error without code", answer: frame([]byte(`{"error":{"message":"?"}}`)), want: protocol.ErrMalformed},
		{name: "health without status", health: true, answer: frame([]byte(`{"active_calls":1}`)), want: protocol.ErrMalformed, text: "status"},
		{name: "health garbage", health: true, answer: frame([]byte(`"ok"`)), want: protocol.ErrMalformed},
		{name: "too slow", hang: true, want: context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			evil.SetStreamHandler(agent.Protocol, func(s network.Stream) {
				defer s.Close()
				if _, err := io.ReadAll(io.LimitReader(s, 4096)); err != nil {
					_ = s.Reset()
					return
				}
				if tc.hang {
					<-ctx.Done()
					return
				}
				_, _ = s.Write(tc.answer)
			})
			c := cli
			if tc.hang {
				c = hurried
			}
			var err error
			if tc.health {
				_, _, err = c.Health(t.Context(), evil.ID())
			} else {
				_, err = c.Card(t.Context(), evil.ID())
			}
			if err == nil {
				t.Fatal("answer accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %q, want one wrapping %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), evil.ID().String()) {
				t.Errorf("error %q should name the peer and say %q", err, tc.text)
			}
		})
	}
}

// The handler answers an unknown or malformed query with bad_request, and
// resets a stream whose query is too large or comes too late; it goes on
// serving afterwards.
func TestHandlerRefusesBadQueries(t *testing.T) {
	t.Parallel()
	srvH, cliH := newHost(t), newHost(t)
	newService(t, srvH, nil, agent.WithTimeout(2*time.Second)) // a stalled query is cut at 2 s; others get time on a loaded machine
	cli := newService(t, cliH, nil)
	connect(t, cliH, srvH)

	cases := []struct {
		name  string
		query []byte
		hold  bool   // keep the stream open after the query
		code  string // the error answer's code; "" for a reset
		text  string
	}{
		{name: "unknown query", query: frame([]byte(`{"get":"weather"}`)), code: protocol.CodeBadRequest, text: `"weather"`},
		{name: "empty query", query: frame([]byte(`{}`)), code: protocol.CodeBadRequest, text: "unknown query"},
		{name: "not json", query: frame([]byte(`get card`)), code: protocol.CodeBadRequest, text: "malformed"},
		{name: "too large", query: frame(bytes.Repeat([]byte{' '}, 1025))},
		{name: "bad length", query: bytes.Repeat([]byte{0x80}, 11)},
		{name: "silent", hold: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := cliH.NewStream(t.Context(), srvH.ID(), agent.Protocol)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_ = s.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := s.Write(tc.query); err != nil && tc.code != "" {
				t.Fatal(err)
			}
			if !tc.hold {
				_ = s.CloseWrite()
			}
			b, err := readAnswer(s)
			if tc.code == "" {
				if err == nil {
					t.Fatalf("answered %q, want a reset", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ Error *protocol.CallError }
			if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
				t.Fatalf("answer %q is not an error answer", b)
			}
			if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.text) {
				t.Errorf("answer %+v, want code %s and %q", e.Error, tc.code, tc.text)
			}
		})
	}
	if _, err := cli.Card(t.Context(), srvH.ID()); err != nil {
		t.Fatalf("card after bad queries: %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	for name, o := range map[string]agent.Option{
		"zero timeout": agent.WithTimeout(0),
		"negative ttl": agent.WithCardCacheTTL(-time.Second),
		"nil logger":   agent.WithLogger(nil),
		"nil card":     agent.WithCard(nil),
		"nil health":   agent.WithHealth(nil),
	} {
		if s, err := agent.New(h, nil, o); err == nil {
			_ = s.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := agent.New(nil, nil); err == nil {
		t.Error("nil host accepted")
	}
}

// Close ends requests in flight, removes the handler, and makes every
// method return ErrClosed.
func TestClose(t *testing.T) {
	t.Parallel()
	aH, bH, silent := newHost(t), newHost(t), newHost(t)
	a, err := agent.New(aH, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b := newService(t, bH, nil)
	connect(t, aH, bH)
	connect(t, aH, silent)
	silent.SetStreamHandler(agent.Protocol, func(s network.Stream) {
		<-t.Context().Done() // never answers
		_ = s.Reset()
	})
	if _, err := b.Card(t.Context(), aH.ID()); err != nil {
		t.Fatal(err)
	}

	errc := make(chan error, 1)
	go func() {
		_, err := a.Card(t.Context(), silent.ID())
		errc <- err
	}()
	waitFor(t, 5*time.Second, "the request to be in flight", func() bool {
		for _, c := range aH.Network().ConnsToPeer(silent.ID()) {
			for _, s := range c.GetStreams() {
				if s.Protocol() == agent.Protocol {
					return true
				}
			}
		}
		return false
	})
	closed := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, agent.ErrClosed) {
		t.Errorf("request in flight at Close: %v, want ErrClosed", err)
	}
	if d := time.Since(closed); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	b.Forget(aH.ID())
	if _, err := b.Card(t.Context(), aH.ID()); err == nil {
		t.Error("a closed service still answers")
	}
	if _, err := a.Card(t.Context(), bH.ID()); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Card after Close: %v", err)
	}
	if _, _, err := a.Health(t.Context(), bH.ID()); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Health after Close: %v", err)
	}
	if _, err := a.Discover(t.Context(), "x", 0); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Discover after Close: %v", err)
	}
	if err := a.Advertise(nil); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Advertise after Close: %v", err)
	}
}
