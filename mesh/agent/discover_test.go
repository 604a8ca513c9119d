package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/mesh/agent"
	"github.com/weftmesh/weft/protocol"
)

// stubDisc is a discovery.Discovery whose records a test sets, and whose
// Advertise blocks until its ctx ends, so a test sees which advertise
// loops run.
type stubDisc struct {
	mu      sync.Mutex
	records map[string][]peer.AddrInfo // namespace → providers
	active  map[string]int             // namespace → Advertise calls running
}

func newStubDisc() *stubDisc {
	return &stubDisc{records: make(map[string][]peer.AddrInfo), active: make(map[string]int)}
}

func (d *stubDisc) Advertise(ctx context.Context, ns string, _ ...discovery.Option) (time.Duration, error) {
	d.mu.Lock()
	d.active[ns]++
	d.mu.Unlock()
	<-ctx.Done()
	d.mu.Lock()
	d.active[ns]--
	d.mu.Unlock()
	return 0, ctx.Err()
}

func (d *stubDisc) FindPeers(_ context.Context, ns string, _ ...discovery.Option) (<-chan peer.AddrInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan peer.AddrInfo, len(d.records[ns]))
	for _, ai := range d.records[ns] {
		ch <- ai
	}
	close(ch)
	return ch, nil
}

func (d *stubDisc) add(name string, hs ...host.Host) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ns := protocol.CapabilityNamespace(name)
	for _, h := range hs {
		d.records[ns] = append(d.records[ns], peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	}
}

// advertising returns the capability names being advertised, sorted.
func (d *stubDisc) advertising() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for ns, n := range d.active {
		if n > 0 {
			names = append(names, strings.TrimPrefix(ns, protocol.CapabilityNamespace("")))
		}
	}
	slices.Sort(names)
	return names
}

// Advertise runs one loop per name, stops the loops of names left out,
// and Close stops the rest.
func TestAdvertiseSet(t *testing.T) {
	t.Parallel()
	d := newStubDisc()
	s, err := agent.New(newHost(t), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	steps := [][]string{
		{"code_review", "translate"},
		{"translate", "summarize", "translate"},
		nil,
		{"a/b:c.d-e_f"},
	}
	for _, names := range steps {
		if err := s.Advertise(names); err != nil {
			t.Fatal(err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(names)))
		if got := s.Advertised(); !slices.Equal(got, want) {
			t.Fatalf("Advertised() = %v, want %v", got, want)
		}
		waitFor(t, 5*time.Second, fmt.Sprintf("loops for exactly %v", want), func() bool {
			return slices.Equal(d.advertising(), want)
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d.advertising(); len(got) != 0 { // Close waited for the loops
		t.Errorf("still advertising %v after Close", got)
	}
}

// Invalid capability names are refused by Advertise (which then changes
// nothing) and Discover.
func TestInvalidNames(t *testing.T) {
	t.Parallel()
	s := newService(t, newHost(t), newStubDisc())
	if err := s.Advertise([]string{"good"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "-leading-dash", "_x", "has space", "ünïcode", "semi;colon", strings.Repeat("a", protocol.MaxNameLen+1)} {
		if err := s.Advertise([]string{"fine", name}); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("Advertise(%q) = %v, want ErrMalformed", name, err)
		}
		if ps, err := s.Discover(t.Context(), name, 0); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("Discover(%q) = %v, %v; want ErrMalformed", name, ps, err)
		}
	}
	if got := s.Advertised(); !slices.Equal(got, []string{"good"}) {
		t.Errorf("after refused Advertise calls, advertising %v, want [good]", got)
	}
	if err := s.Advertise([]string{strings.Repeat("a", protocol.MaxNameLen)}); err != nil {
		t.Errorf("name of %d characters refused: %v", protocol.MaxNameLen, err)
	}
	// Without a discovery there is nowhere to advertise.
	bare := newService(t, newHost(t), nil)
	if err := bare.Advertise([]string{"good"}); err == nil {
		t.Error("Advertise without a discovery accepted")
	}
	if err := bare.Advertise(nil); err != nil {
		t.Errorf("Advertise(nil) without a discovery: %v", err)
	}
}

// Discover keeps only candidates whose own card offers the capability:
// records of liars, of unreachable peers and of peers not serving the
// protocol are dropped, connected peers are asked too, and this node is
// included when it offers it.
func TestDiscoverChecksCards(t *testing.T) {
	t.Parallel()
	const capName = "code_review"
	d := newStubDisc()
	aH := newHost(t)
	a := newService(t, aH, d, agent.WithCard(func() protocol.Card { return cardOf("self", capName) }))

	provider := newHost(t) // advertised and offers it
	newService(t, provider, nil, agent.WithCard(func() protocol.Card { return cardOf("p", "translate", capName) }))
	liar := newHost(t) // advertised, does not offer it
	newService(t, liar, nil, agent.WithCard(func() protocol.Card { return cardOf("liar", "translate") }))
	mute := newHost(t) // advertised, does not serve the protocol
	gone := newHost(t) // advertised, no longer running
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	lan := newHost(t) // not advertised, connected (as mDNS would), offers it
	newService(t, lan, nil, agent.WithCard(func() protocol.Card { return cardOf("lan", capName) }))
	connect(t, aH, lan)
	d.add(capName, provider, liar, mute, gone, aH)
	d.add(capName, provider) // a repeat

	want := sortedIDs(aH.ID(), provider.ID(), lan.ID())
	ps, err := a.Discover(t.Context(), capName, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := providerIDs(ps); !slices.Equal(got, want) {
		t.Fatalf("Discover found %v, want %v", got, want)
	}
	for _, p := range ps {
		if p.Card.ID != p.ID.String() || !p.Card.Has(capName) || len(p.Addrs) == 0 {
			t.Errorf("provider %+v: card must be its own, offer %s, and come with addresses", p, capName)
		}
	}
	ps, err = a.Discover(t.Context(), capName, 2)
	if err != nil || !slices.Equal(providerIDs(ps), want[:2]) {
		t.Errorf("Discover with limit 2 = %v, %v; want %v", providerIDs(ps), err, want[:2])
	}
	if ps, err := a.Discover(t.Context(), "nobody_offers_this", 0); err != nil || len(ps) != 0 {
		t.Errorf("Discover of an unknown capability = %v, %v", providerIDs(ps), err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Discover(ctx, capName, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Discover with an ended ctx: %v, want context.Canceled", err)
	}
}

// TestDiscoverSeesCardChanges: a capability a peer adds or withdraws
// counts in the next Discover, whatever cards the searcher has cached.
func TestDiscoverSeesCardChanges(t *testing.T) {
	t.Parallel()
	d := newStubDisc()
	aH := newHost(t)
	a := newService(t, aH, d)
	bH := newHost(t)
	card := newLiveCard(cardOf("b", "first"))
	newService(t, bH, nil, card.option())
	connect(t, aH, bH)
	find := func(name string) []peer.ID {
		t.Helper()
		ps, err := a.Discover(t.Context(), name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return providerIDs(ps)
	}
	if got := find("first"); !slices.Equal(got, []peer.ID{bH.ID()}) {
		t.Fatalf("Discover(first) = %v, want b", got)
	}
	if _, err := a.Card(t.Context(), bH.ID()); err != nil { // b's card is now cached
		t.Fatal(err)
	}
	card.set(cardOf("b", "second"))
	if got := find("second"); !slices.Equal(got, []peer.ID{bH.ID()}) {
		t.Fatalf("Discover(second) right after b added it = %v, want b", got)
	}
	if got := find("first"); len(got) != 0 {
		t.Fatalf("Discover(first) right after b withdrew it = %v, want none", got)
	}
}
