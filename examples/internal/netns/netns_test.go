package netns

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/examples/internal/testbed"
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
	case "tcp-listen": // accept one connection, echo a line back
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
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c, "echo %s", line)
		return err
	case "tcp-dial": // dial args[0], send a line, print the answer
		c, err := net.DialTimeout("tcp4", args[0], 5*time.Second)
		if err != nil {
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
		if n := strings.Count(link, "\n"); n != 2 {
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
			if s := string(out); strings.Contains(s, "br0") || strings.Contains(s, "10.99.0.") || strings.Contains(s, "link-netns "+lan.Name) {
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
