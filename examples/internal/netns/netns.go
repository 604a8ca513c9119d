// Package netns builds virtual LANs out of Linux network namespaces, so
// tests can run programs on "different machines" that share an Ethernet
// segment (multicast and mDNS included) without sending a packet onto the
// real network.
//
// A LAN is one namespace holding a bridge (br0, multicast snooping off) and
// N host namespaces, each with a veth (eth0) plugged into the bridge, an
// address from 10.99.0.0/24, lo up and a route for 224.0.0.0/4 on eth0.
// Nothing is created in the caller's namespace. It needs root (or
// CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's ip; New skips the test
// otherwise. Everything is removed when the test ends, even when it fails,
// and New first removes what a crashed earlier run left behind (every name
// starts with Prefix and the creating process's PID).
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Prefix starts the name of every namespace this package creates:
// Prefix + PID + "-" + LAN number + "-br" or "-h" + host number.
const Prefix = "weftnet-"

// Subnet is the LAN's IPv4 subnet; host i has the address .i+1.
var Subnet = netip.MustParsePrefix("10.99.0.0/24")

// MaxHosts is the most hosts a LAN can have.
const MaxHosts = 250

// LAN is a virtual Ethernet segment of hosts.
type LAN struct {
	Name   string  // unique: Prefix + PID + "-" + number
	Bridge string  // the namespace holding the bridge br0
	Hosts  []*Host // in order: Hosts[i].Addr is Subnet's .i+1

	ip   string   // path of iproute2's ip
	made []string // namespaces created, to remove
}

// Host is one machine of a LAN: a network namespace with one interface.
type Host struct {
	NS    string     // namespace name
	Iface string     // its LAN interface, "eth0"
	Addr  netip.Addr // its address on the LAN

	ip string
}

// Check reports why this process cannot build LANs: nil when it runs with
// CAP_NET_ADMIN and CAP_SYS_ADMIN on Linux and finds iproute2's ip.
func Check() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netns: needs iproute2's ip command: " + err.Error())
	}
	caps, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("netns: needs Linux capabilities: %w", err)
	}
	const capNetAdmin, capSysAdmin = 12, 21
	if caps&(1<<capNetAdmin) == 0 || caps&(1<<capSysAdmin) == 0 {
		return errors.New("netns: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces; run the test as root")
	}
	return nil
}

// effectiveCaps reads this process's effective capability set.
func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// lanSeq numbers the LANs this process builds.
var lanSeq atomic.Int64

// New builds a LAN of n hosts and removes it when t ends. It skips t when
// Check fails.
func New(t testing.TB, n int) *LAN {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err)
	}
	lan, err := Build(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lan.Close(); err != nil {
			t.Error(err)
		}
	})
	return lan
}

// Build builds a LAN of n hosts; Close removes it. It first removes what
// crashed earlier runs left behind. Programs (not tests) use it; tests use
// New.
func Build(n int) (_ *LAN, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxHosts {
		return nil, fmt.Errorf("netns: %d hosts: want 1 to %d", n, MaxHosts)
	}
	ip, _ := exec.LookPath("ip")
	if err := RemoveStale(); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), lanSeq.Add(1))
	lan := &LAN{Name: name, Bridge: name + "-br", ip: ip}
	defer func() {
		if err != nil {
			lan.Close()
		}
	}()
	run := func(args ...string) error {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("netns: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	addNS := func(ns string) error {
		if err := run("netns", "add", ns); err != nil {
			return err
		}
		lan.made = append(lan.made, ns)
		return nil
	}
	if err := addNS(lan.Bridge); err != nil {
		return nil, err
	}
	br := []string{"-n", lan.Bridge}
	// Snooping off: the bridge floods multicast to every port, as a
	// plain switch does, whatever IGMP it has or has not seen.
	for _, args := range [][]string{
		append(br, "link", "set", "lo", "up"),
		append(br, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"),
		append(br, "link", "set", "br0", "up"),
	} {
		if err := run(args...); err != nil {
			return nil, err
		}
	}
	for i := range n {
		h := &Host{NS: fmt.Sprintf("%s-h%d", name, i), Iface: "eth0", Addr: hostAddr(i), ip: ip}
		if err := addNS(h.NS); err != nil {
			return nil, err
		}
		port := fmt.Sprintf("p%d", i)
		hn := []string{"-n", h.NS}
		for _, args := range [][]string{
			append(br, "link", "add", port, "type", "veth", "peer", "name", h.Iface, "netns", h.NS),
			append(br, "link", "set", port, "master", "br0", "up"),
			append(hn, "link", "set", "lo", "up"),
			append(hn, "addr", "add", netip.PrefixFrom(h.Addr, Subnet.Bits()).String(), "dev", h.Iface),
			append(hn, "link", "set", h.Iface, "multicast", "on", "up"),
			append(hn, "route", "add", "224.0.0.0/4", "dev", h.Iface),
		} {
			if err := run(args...); err != nil {
				return nil, err
			}
		}
		lan.Hosts = append(lan.Hosts, h)
	}
	return lan, nil
}

// Close removes the LAN's namespaces, killing what still runs in them.
func (l *LAN) Close() error {
	var errs []error
	// Hosts first: deleting a host's namespace destroys its veth pair.
	for i := len(l.made) - 1; i >= 0; i-- {
		if err := remove(l.ip, l.made[i]); err != nil {
			errs = append(errs, fmt.Errorf("netns: remove %s: %w", l.made[i], err))
		}
	}
	l.made = nil
	return errors.Join(errs...)
}

// hostAddr returns host i's address.
func hostAddr(i int) netip.Addr {
	a := Subnet.Addr().As4()
	a[3] += byte(i + 1)
	return netip.AddrFrom4(a)
}

// Argv returns the command line that runs name with args inside the host
// (ip netns exec NS name args…), for process runners that take one.
func (h *Host) Argv(name string, args ...string) []string {
	return append([]string{h.ip, "netns", "exec", h.NS, name}, args...)
}

// Command returns a command that runs name with args inside the host.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	argv := h.Argv(name, args...)
	return exec.Command(argv[0], argv[1:]...)
}

// Run runs name with args inside the host to completion and returns its
// combined output; it fails t if the command fails.
func (h *Host) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := h.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("netns: in %s: %s %s: %v\n%s", h.NS, name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// RemoveStale removes the namespaces of LANs whose creating process is
// gone (a test binary that crashed or was killed before its cleanup),
// killing whatever still runs in them.
func RemoveStale() error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return err
	}
	names, err := list(ip)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range names {
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(ns, Prefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || alive(pid) {
			continue
		}
		errs = append(errs, remove(ip, ns))
	}
	return errors.Join(errs...)
}

// Namespaces lists the namespaces whose names start with Prefix.
func Namespaces() ([]string, error) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, err
	}
	return list(ip)
}

// list lists the namespaces whose names start with Prefix.
func list(ip string) ([]string, error) {
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("netns: ip netns list: %w", err)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		// Lines look like "NAME" or "NAME (id: 3)".
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], Prefix) {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// alive reports whether a process with this PID exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// remove kills the processes left in namespace ns, then deletes it.
func remove(ip, ns string) error {
	for range 50 {
		out, err := exec.Command(ip, "netns", "pids", ns).Output()
		if err != nil {
			break // gone already, or no such namespace: del says which
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond) // let the kernel reap them before looking again
	}
	if out, err := exec.Command(ip, "netns", "del", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", ns, err, bytes.TrimSpace(out))
	}
	return nil
}
