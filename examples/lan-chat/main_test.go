package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/netns"
	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/node/client"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// chatter is one lan-chat process on its own host of a virtual LAN.
type chatter struct {
	name string
	host *netns.Host
	home string
	in   *os.File // its stdin
	p    *testbed.Proc
	id   string // its peer ID, as it printed it
}

// say types a line into c's stdin.
func (c *chatter) say(t testing.TB, line string) {
	t.Helper()
	if _, err := c.in.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// startChatter runs lan-chat --name name on host, with a fresh home and
// nothing else: no address, peer ID or bootstrap peer of anyone.
func startChatter(t *testing.T, bin string, lan *netns.LAN, host *netns.Host, name string) *chatter {
	t.Helper()
	c := &chatter{name: name, host: host, home: t.TempDir()}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	c.in = w
	args := []string{"--name", name, "--home", c.home}
	for _, h := range lan.Hosts {
		if strings.Contains(strings.Join(args, " "), h.Addr.String()) {
			t.Fatalf("lan-chat %q would be told a LAN address", args)
		}
	}
	argv := host.Argv(bin, args...)
	c.p = testbed.Run(t, r, nil, argv[0], argv[1:]...)
	return c
}

// waitConnected polls the chatters' nodes every 5 ms (through their API
// sockets, which are files and so reachable from the test's namespace)
// until each has a peer. It returns when the last of their APIs first
// answered, and when the last of them first had a peer: how soon mDNS
// brought them together, more precisely than their "found" lines (printed
// by a 200 ms poll) tell.
func waitConnected(t *testing.T, cs ...*chatter) (up, connected time.Time) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	ups := make([]time.Time, len(cs))
	conns := make([]time.Time, len(cs))
	for {
		done := true
		for i, c := range cs {
			if !conns[i].IsZero() {
				continue
			}
			ps, err := (&client.Client{Home: c.home}).Peers(context.Background())
			now := time.Now()
			if err == nil && ups[i].IsZero() {
				ups[i] = now
			}
			if err == nil && len(ps) > 0 {
				conns[i] = now
			} else {
				done = false
			}
		}
		if done {
			return slices.MaxFunc(ups, time.Time.Compare), slices.MaxFunc(conns, time.Time.Compare)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection between the chatters after 60 s (up at %v, connected at %v)", ups, conns)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var joined = regexp.MustCompile(`(?m)^joined lan-chat as (\S+) \((\S+)\)`)

// TestLANChat runs two lan-chats on two hosts of a virtual LAN (network
// namespaces joined by a bridge): they find each other by mDNS alone and
// chat both ways.
func TestLANChat(t *testing.T) {
	lan := netns.New(t, 2) // skips unless root with iproute2
	bin := testbed.Build(t, "github.com/weftmesh/weft/examples/lan-chat")

	start := time.Now()
	alice := startChatter(t, bin, lan, lan.Hosts[0], "alice")
	bob := startChatter(t, bin, lan, lan.Hosts[1], "bob")
	upAt, connectedAt := waitConnected(t, alice, bob)
	up, connected := upAt.Sub(start), connectedAt.Sub(start)
	for _, c := range []*chatter{alice, bob} {
		m := joined.FindStringSubmatch(c.p.WaitOutput(60*time.Second, "joined lan-chat as"))
		if m == nil || m[1] != c.name {
			t.Fatalf("%s printed %q", c.name, c.p.Stdout)
		}
		c.id = m[2] // made at start: nobody could have told it to the other
	}
	if alice.id == bob.id {
		t.Fatalf("both chatters are %s", alice.id)
	}

	// Each finds the other, with nothing to go on but the LAN.
	for _, pair := range [][2]*chatter{{alice, bob}, {bob, alice}} {
		pair[0].p.WaitOutput(60*time.Second, "found "+pair[1].id)
	}
	found := time.Since(start)
	t.Logf("discovery: both nodes up %v after start, connected to each other %v after start, both printed \"found\" %v after start",
		up.Round(time.Millisecond), connected.Round(time.Millisecond), found.Round(time.Millisecond))

	// They are connected over the LAN, to each other's LAN address.
	for _, pair := range [][2]*chatter{{alice, bob}, {bob, alice}} {
		c := &client.Client{Home: pair[0].home} // the socket is a file: reachable from here
		ps, err := c.Peers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, p := range ps {
			if p.ID == pair[1].id {
				addrs = p.Addrs
			}
		}
		want := "/ip4/" + pair[1].host.Addr.String() + "/"
		if len(addrs) == 0 || !strings.HasPrefix(addrs[0], want) {
			t.Errorf("%s reaches %s at %q, want %s…", pair[0].name, pair[1].name, addrs, want)
		}
	}

	// A line typed in one appears in the other, and back.
	for _, tc := range []struct {
		from, to *chatter
		text     string
	}{
		{alice, bob, "hello from alice"},
		{bob, alice, "hi alice, bob here: got it"},
		{alice, bob, "ünïcode, \"quotes\" and {json}"},
	} {
		sent := time.Now()
		tc.from.say(t, tc.text)
		tc.to.p.WaitOutput(30*time.Second, tc.from.name+": "+tc.text+"\n")
		t.Logf("%s → %s in %v", tc.from.name, tc.to.name, time.Since(sent).Round(time.Millisecond))
	}
	// Alice has printed bob's line, which she stored after her own: had
	// she echoed her own lines, the first would be there by now.
	if out := alice.p.Stdout.String(); strings.Contains(out, "alice: hello from alice") {
		t.Errorf("alice echoed her own line:\n%s", out)
	}

	// The end of input ends the chat; the other sees the peer go.
	alice.in.Close()
	if err := alice.p.Wait(30 * time.Second); err != nil {
		t.Errorf("alice exited with %v\n%s", err, alice.p.Stderr)
	}
	bob.p.WaitOutput(30*time.Second, "lost "+alice.id)
	if e := bob.p.Stderr.String(); e != "" {
		t.Errorf("bob's stderr: %s", e)
	}
}
