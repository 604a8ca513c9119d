package netns

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
)

// helperEnv makes the test binary act as a small network program inside a
// namespace (see TestHelperProcess) instead of running the tests.
const helperEnv = "WEFT_NETNS_HELPER"

// mcastGroup is the group and port the multicast probe uses: mDNS's group
// (what the LAN must carry for weft's discovery), on a port of its own.
var mcastGroup = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5454}

// TestHelperProcess is not a test: run by helper, it listens or sends as
// its arguments say, then exits.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	if err := helper(mode, flagArgs()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// flagArgs returns the helper's arguments: those after "--".
func flagArgs() []string {
	if i := slices.Index(os.Args, "--"); i >= 0 {
		return os.Args[i+1:]
	}
	return nil
}

func helper(mode string, args []string) error {
	switch mode {
	case "mcast-listen": // join the group on eth0, print "ready", then the first datagram
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err := net.ListenMulticastUDP("udp4", ifi, mcastGroup)
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Println("ready")
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, 1500)
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			return err
		}
		fmt.Printf("got %q from %s\n", buf[:n], from.IP)
		return nil
	case "mcast-send": // send args[0] to the group every 100 ms for up to 20 s
		c, err := net.DialUDP("udp4", nil, mcastGroup)
		if err != nil {
			return err
		}
		defer c.Close()
		for range 200 {
			if _, err := c.Write([]byte(args[0])); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	case "tcp-listen": // accept one connection, print its source, echo a line back
		ln, err := net.Listen("tcp4", args[0])
		if err != nil {
			return err
		}
		defer ln.Close()
		fmt.Println("ready")
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Printf("from %s\n", c.RemoteAddr().(*net.TCPAddr).IP)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c, "echo %s", line)
		return err
	case "tcp-dial": // dial args[0], send a line, print the answer; or print the dial error
		c, err := net.DialTimeout("tcp4", args[0], 3*time.Second)
		if err != nil {
			fmt.Println("dial failed:", err)
			return err
		}
		defer c.Close()
		fmt.Fprintln(c, "hello")
		line, err := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
		return err
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// helper starts the test binary in host h as a helper in mode.
func startHelper(t *testing.T, h *Host, mode string, args ...string) (*exec.Cmd, *testbed.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := h.Command(self, append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out := &testbed.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, out
}

// waitFor polls out until it contains s.
func waitFor(t *testing.T, out *testbed.Buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %q; output:\n%s", s, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLAN(t *testing.T) {
	lan := New(t, 3)
	if len(lan.Hosts) != 3 {
		t.Fatalf("%d hosts", len(lan.Hosts))
	}
	for i, h := range lan.Hosts {
		want := fmt.Sprintf("10.99.0.%d", i+1)
		if h.Addr.String() != want {
			t.Errorf("host %d address %s, want %s", i, h.Addr, want)
		}
		out := h.Run(t, "ip", "-4", "-o", "addr", "show", "dev", "eth0")
		if !strings.Contains(out, want+"/24") {
			t.Errorf("host %d: eth0 has %q, want %s/24", i, out, want)
		}
		link := h.Run(t, "ip", "-o", "link", "show")
		if !strings.Contains(link, "lo: <LOOPBACK,UP") || !strings.Contains(link, "MULTICAST,UP") {
			t.Errorf("host %d links not up with multicast:\n%s", i, link)
		}
		// One line per link; iproute2 may add an "Error: Peer netns
		// reference is invalid." line while other namespaces come and go
		// (other test beds, in parallel), which is no link.
		n := 0
		for l := range strings.Lines(link) {
			if !strings.HasPrefix(l, "Error:") {
				n++
			}
		}
		if n != 2 {
			t.Errorf("host %d has %d links, want lo and eth0:\n%s", i, n, link)
		}
	}

	t.Run("multicast reaches every other host", func(t *testing.T) {
		var outs []*testbed.Buffer
		for _, h := range lan.Hosts[1:] {
			_, out := startHelper(t, h, "mcast-listen")
			waitFor(t, out, "ready")
			outs = append(outs, out)
		}
		startHelper(t, lan.Hosts[0], "mcast-send", "ping")
		for _, out := range outs {
			waitFor(t, out, `got "ping" from 10.99.0.1`)
		}
	})

	t.Run("unicast TCP between hosts", func(t *testing.T) {
		addr := lan.Hosts[2].Addr.String() + ":7000"
		_, srv := startHelper(t, lan.Hosts[2], "tcp-listen", addr)
		waitFor(t, srv, "ready")
		_, out := startHelper(t, lan.Hosts[1], "tcp-dial", addr)
		waitFor(t, out, "echo hello")
	})

	t.Run("nothing in this namespace", func(t *testing.T) {
		// No address, route or link of the LAN's is in the test's own
		// namespace. (No packet is sent to check: from here it would go
		// out to the real network.)
		ifs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range ifs {
			if strings.HasPrefix(a.String(), "10.99.0.") {
				t.Errorf("this namespace has LAN address %s", a)
			}
		}
		for _, args := range [][]string{{"-o", "link", "show"}, {"route", "show", "table", "all"}} {
			out, err := exec.Command("ip", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("ip %q: %v", args, err)
			}
			if s := string(out); strings.Contains(s, "br0") || strings.Contains(s, "10.99.0.") || strings.Contains(s, "link-netns "+lan.Net.Name) {
				t.Errorf("ip %q shows the LAN here:\n%s", args, s)
			}
		}
	})
}

// TestCleanup checks that a LAN's namespaces go when its test ends, and
// that a crashed run's leftovers are removed by the next New.
func TestCleanup(t *testing.T) {
	if err := Check(); err != nil {
		t.Skip(err)
	}
	var (
		names    []string
		left     *exec.Cmd
		leftDone = make(chan struct{})
	)
	t.Run("lan", func(t *testing.T) {
		lan := New(t, 2)
		names = []string{lan.Bridge, lan.Hosts[0].NS, lan.Hosts[1].NS}
		have, err := Namespaces()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !slices.Contains(have, n) {
				t.Errorf("namespace %s missing: have %q", n, have)
			}
		}
		// A process still running inside when the test ends is killed.
		left = lan.Hosts[0].Command("sleep", "600")
		if err := left.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { left.Wait(); close(leftDone) }()
	})
	select {
	case <-leftDone:
	case <-time.After(10 * time.Second):
		left.Process.Kill()
		t.Error("a process left in the LAN survived its cleanup")
	}
	have, err := Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if slices.Contains(have, n) {
			t.Errorf("namespace %s left behind", n)
		}
	}

	// A leftover named after a process that has ended.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d-1-br", Prefix, dead.Process.Pid)
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	New(t, 1)
	if have, _ := Namespaces(); slices.Contains(have, stale) {
		t.Errorf("stale namespace %s was not removed", stale)
	}
}

// dial runs tcp-dial from host from to a tcp-listen helper on host to and
// returns the listener's and the dialler's output once the dial has ended.
func dial(t *testing.T, from, to *Host, port int) (srv, cli string) {
	t.Helper()
	addr := fmt.Sprintf("%s:%d", to.Addr, port)
	_, sout := startHelper(t, to, "tcp-listen", addr)
	waitFor(t, sout, "ready")
	_, cout := startHelper(t, from, "tcp-dial", addr)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(cout.String(), "echo hello") && !strings.Contains(cout.String(), "dial failed") {
		if time.Now().After(deadline) {
			t.Fatalf("tcp-dial %s from %s did not end: %s", addr, from.NS, cout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The listener says whom it accepted on its own output, which can
	// come a moment after the dialler has its echo.
	for strings.Contains(cout.String(), "echo hello") && !strings.Contains(sout.String(), "from ") {
		if time.Now().After(deadline) {
			t.Fatalf("tcp-listen %s in %s never said whom it accepted: %s", addr, to.NS, sout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sout.String(), cout.String()
}

func TestRouted(t *testing.T) {
	n := NewNet(t)
	a := n.MustLAN(t, netip.MustParsePrefix("10.99.1.0/24"))
	b := n.MustLAN(t, netip.MustParsePrefix("10.99.2.0/24"))
	a1 := a.MustHost(t)
	r, err := n.AddRouter(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Addrs[a].String() != "10.99.1.254" || r.Addrs[b].String() != "10.99.2.254" {
		t.Fatalf("router addresses %v", r.Addrs)
	}
	b1 := b.MustHost(t) // added after the router: gets its routes too
	if b1.Addr.String() != "10.99.2.1" {
		t.Fatalf("b1 address %s", b1.Addr)
	}
	for _, tc := range []struct{ from, to *Host }{{a1, b1}, {b1, a1}} {
		srv, cli := dial(t, tc.from, tc.to, 7001)
		if !strings.Contains(cli, "echo hello") || !strings.Contains(srv, "from "+tc.from.Addr.String()) {
			t.Errorf("%s to %s: dialler %q, listener %q", tc.from.Addr, tc.to.Addr, cli, srv)
		}
	}
	if out := r.Run(t, "sysctl", "-n", "net.ipv4.ip_forward"); strings.TrimSpace(out) != "1" {
		t.Errorf("router forwarding %q", out)
	}
}

func TestNAT(t *testing.T) {
	if err := CheckNAT(); err != nil {
		t.Skip(err)
	}
	n := NewNet(t)
	out := n.MustLAN(t, netip.MustParsePrefix("10.99.9.0/24"))
	in := n.MustLAN(t, netip.MustParsePrefix("192.168.7.0/24"))
	srv := out.MustHost(t)
	nat, err := n.AddNAT(in, out, Cone)
	if err != nil {
		t.Fatal(err)
	}
	cli := in.MustHost(t)
	wan := nat.Addrs[out].String()

	t.Run("inside reaches outside, seen as the NAT", func(t *testing.T) {
		s, c := dial(t, cli, srv, 7002)
		if !strings.Contains(c, "echo hello") || !strings.Contains(s, "from "+wan+"\n") {
			t.Errorf("dialler %q, listener %q: want the connection from the NAT's %s", c, s, wan)
		}
	})
	t.Run("outside cannot reach inside", func(t *testing.T) {
		// Even with a route to the inside through the NAT, nothing new
		// gets in: to the inside host, nor to the NAT itself.
		srv.Run(t, "ip", "route", "add", in.Subnet.String(), "via", wan)
		if _, c := dial(t, srv, cli, 7003); !strings.Contains(c, "dial failed") {
			t.Errorf("outside dialled inside: %q", c)
		}
	})
	t.Run("symmetric NAT rules", func(t *testing.T) {
		in2 := n.MustLAN(t, netip.MustParsePrefix("192.168.8.0/24"))
		nat2, err := n.AddNAT(in2, out, Symmetric)
		if err != nil {
			t.Fatal(err)
		}
		if rules := nat2.Run(t, "nft", "list", "ruleset"); !strings.Contains(rules, "fully-random") {
			t.Errorf("symmetric NAT ruleset:\n%s", rules)
		}
		h := in2.MustHost(t)
		s, c := dial(t, h, srv, 7004)
		if !strings.Contains(c, "echo hello") || !strings.Contains(s, "from "+nat2.Addrs[out].String()+"\n") {
			t.Errorf("dialler %q, listener %q", c, s)
		}
	})
}

func TestSetLink(t *testing.T) {
	lan := New(t, 2)
	a, b := lan.Hosts[0], lan.Hosts[1]
	if err := b.SetLink(false); err != nil {
		t.Fatal(err)
	}
	if _, c := dial(t, a, b, 7005); !strings.Contains(c, "dial failed") {
		t.Errorf("dialled a host whose link is down: %q", c)
	}
	if err := b.SetLink(true); err != nil {
		t.Fatal(err)
	}
	// A's neighbour entry for b failed while the link was down; the
	// kernel tries again within seconds, as after a real cable is back.
	deadline := time.Now().Add(30 * time.Second)
	for port := 7006; ; port++ {
		_, c := dial(t, a, b, port)
		if strings.Contains(c, "echo hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the link came back: %q", c)
		}
	}
}
