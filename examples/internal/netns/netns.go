// Package netns builds small networks out of Linux network namespaces, so
// tests can run programs on "different machines" that share an Ethernet
// segment (multicast and mDNS included), sit on subnets joined by a router,
// or hide behind NAT, without sending a packet onto the real network.
//
// A Net is a set of LANs, hosts and routers. A LAN is one namespace holding
// a bridge (br0, multicast snooping off) with its own IPv4 subnet; a host is
// a namespace with lo and one veth (eth0) plugged into a LAN's bridge; a
// router is a namespace with one veth per LAN it joins and IP forwarding on.
// A router is plain (it routes between its LANs, and hosts on them get
// routes through it) or a NAT (it masquerades an inside LAN behind its
// address on an outside LAN and lets nothing in that the inside did not
// start, with nftables). Nothing is created in the caller's namespace, and
// no namespace is linked to it: whatever addresses a Net uses exist only
// inside it. Building one needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN)
// and iproute2's ip; NATs need nftables' nft, which CheckNAT installs when
// it is missing. Everything is removed when the test ends (or Close), even
// when it fails, and Open first removes what a crashed earlier run left
// behind (every name starts with Prefix and the creating process's PID).
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
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Prefix starts the name of every namespace this package creates:
// Prefix + PID + "-" + Net number + "-" + "br"/"h"/"r" + number.
const Prefix = "weftnet-"

// Subnet is the subnet of the LAN New and Build make; host i has .i+1.
var Subnet = netip.MustParsePrefix("10.99.0.0/24")

// MaxHosts is the most hosts a LAN can have.
const MaxHosts = 250

// Net is a network of LANs, hosts and routers. Its methods are safe for
// concurrent use.
type Net struct {
	Name string // unique: Prefix + PID + "-" + number; starts every namespace's name

	ip   string
	mu   sync.Mutex
	made []string // namespaces created, to remove
	ns   int      // namespaces numbered so far
}

// LAN is a virtual Ethernet segment: a bridge and the hosts and routers
// plugged into it.
type LAN struct {
	Net    *Net
	Bridge string       // the namespace holding the bridge br0
	Subnet netip.Prefix // hosts get .1, .2, …; routers .254, .253, …
	Hosts  []*Host      // in the order added

	ports   int        // bridge ports made
	hosts   int        // host addresses given
	routers int        // router addresses given
	gateway netip.Addr // where hosts route what is not on the LAN; invalid: nowhere
	routes  []route    // other subnets reached through a router on this LAN
}

// route is a subnet reached through a gateway on the LAN.
type route struct {
	to  netip.Prefix
	via netip.Addr
}

// Host is one machine: a network namespace with one interface on a LAN.
type Host struct {
	NS    string     // namespace name
	Iface string     // its LAN interface, "eth0"
	Addr  netip.Addr // its address on the LAN
	LAN   *LAN

	port string // its port on the LAN's bridge
	ip   string
}

// Router is a namespace joining LANs, with IP forwarding on.
type Router struct {
	NS    string
	Addrs map[*LAN]netip.Addr // its address on each LAN it joins

	ip string
}

// NATKind says how a NAT maps inside addresses and ports.
type NATKind int

const (
	// Cone NATs keep the inside port where they can (Linux masquerade's
	// default): one mapping per inside address and port, whatever the
	// destination, so hole punching works through them.
	Cone NATKind = iota
	// Symmetric NATs pick a random outside port for every new flow, so a
	// peer cannot predict the mapping and hole punching fails: traffic has
	// to go through a relay.
	Symmetric
)

// Check reports why this process cannot build networks: nil when it runs
// with CAP_NET_ADMIN and CAP_SYS_ADMIN on Linux and finds iproute2's ip.
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

// CheckNAT reports why this process cannot build NATs: Check's reasons, or
// no nftables. When nft is missing it installs Debian's package nftables
// (once per process; apt waits for another install to finish).
func CheckNAT() error {
	if err := Check(); err != nil {
		return err
	}
	nftOnce.Do(func() {
		if _, err := exec.LookPath("nft"); err == nil {
			return
		}
		cmd := exec.Command("apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "nftables")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			nftErr = fmt.Errorf("netns: NAT needs nftables' nft, and apt-get install nftables failed: %v: %s", err, lastLines(out, 5))
			return
		}
		if _, err := exec.LookPath("nft"); err != nil {
			nftErr = errors.New("netns: NAT needs nftables' nft: not found after installing nftables")
		}
	})
	return nftErr
}

var (
	nftOnce sync.Once
	nftErr  error
)

// lastLines returns the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
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

// netSeq numbers the Nets this process builds.
var netSeq atomic.Int64

// NewNet opens an empty Net and removes it when t ends. It skips t when
// Check fails.
func NewNet(t testing.TB) *Net {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err)
	}
	n, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// Open opens an empty Net; Close removes it. It first removes what crashed
// earlier runs left behind. Programs (not tests) use it; tests use NewNet.
func Open() (*Net, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	ip, _ := exec.LookPath("ip")
	if err := RemoveStale(); err != nil {
		return nil, err
	}
	return &Net{Name: fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), netSeq.Add(1)), ip: ip}, nil
}

// New builds a LAN of n hosts on Subnet, alone in its Net, and removes it
// when t ends. It skips t when Check fails.
func New(t testing.TB, n int) *LAN {
	t.Helper()
	lan := NewNet(t).MustLAN(t, Subnet)
	for range n {
		lan.MustHost(t)
	}
	return lan
}

// Build builds a LAN of n hosts on Subnet, alone in its Net; Close (or the
// Net's Close) removes it. Programs (not tests) use it; tests use New.
func Build(n int) (_ *LAN, err error) {
	if n < 1 || n > MaxHosts {
		return nil, fmt.Errorf("netns: %d hosts: want 1 to %d", n, MaxHosts)
	}
	nt, err := Open()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			nt.Close()
		}
	}()
	lan, err := nt.AddLAN(Subnet)
	if err != nil {
		return nil, err
	}
	for range n {
		if _, err := lan.AddHost(); err != nil {
			return nil, err
		}
	}
	return lan, nil
}

// Close removes the LAN's whole Net (a LAN from Build is alone in it).
func (l *LAN) Close() error { return l.Net.Close() }

// Close removes the Net's namespaces, killing what still runs in them.
func (n *Net) Close() error {
	n.mu.Lock()
	made := n.made
	n.made = nil
	n.mu.Unlock()
	var errs []error
	// Hosts and routers before bridges: deleting a namespace destroys
	// its veth pairs.
	for i := len(made) - 1; i >= 0; i-- {
		if err := remove(n.ip, made[i]); err != nil {
			errs = append(errs, fmt.Errorf("netns: remove %s: %w", made[i], err))
		}
	}
	return errors.Join(errs...)
}

// run runs ip with args.
func (n *Net) run(args ...string) error {
	if out, err := exec.Command(n.ip, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("netns: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// runAll runs ip with each of cmds in turn, stopping at the first error.
func (n *Net) runAll(cmds ...[]string) error {
	for _, args := range cmds {
		if err := n.run(args...); err != nil {
			return err
		}
	}
	return nil
}

// addNS creates a namespace named n.Name-kind<number>, with lo up.
func (n *Net) addNS(kind string) (string, error) {
	n.mu.Lock()
	name := fmt.Sprintf("%s-%s%d", n.Name, kind, n.ns)
	n.ns++
	n.mu.Unlock()
	if err := n.run("netns", "add", name); err != nil {
		return "", err
	}
	n.mu.Lock()
	n.made = append(n.made, name)
	n.mu.Unlock()
	return name, n.run("-n", name, "link", "set", "lo", "up")
}

// AddLAN adds a LAN (a bridge) with the given subnet, which must be IPv4
// and hold at least 4 addresses.
func (n *Net) AddLAN(subnet netip.Prefix) (*LAN, error) {
	if !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return nil, fmt.Errorf("netns: subnet %s: want IPv4, /30 or larger", subnet)
	}
	br, err := n.addNS("br")
	if err != nil {
		return nil, err
	}
	// Snooping off: the bridge floods multicast to every port, as a
	// plain switch does, whatever IGMP it has or has not seen.
	b := []string{"-n", br}
	if err := n.runAll(
		append(b, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"),
		append(b, "link", "set", "br0", "up"),
	); err != nil {
		return nil, err
	}
	return &LAN{Net: n, Bridge: br, Subnet: subnet.Masked()}, nil
}

// MustLAN is AddLAN for tests: it fails t on error.
func (n *Net) MustLAN(t testing.TB, subnet netip.Prefix) *LAN {
	t.Helper()
	l, err := n.AddLAN(subnet)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// nthAddr is the subnet's address i (0 is the network address).
func nthAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// size is the number of usable addresses of the subnet.
func size(p netip.Prefix) int { return 1<<(32-p.Bits()) - 2 }

// plug adds a veth from the LAN's bridge into namespace ns, named iface
// there, with address addr, up; it returns the bridge-side port's name.
func (l *LAN) plug(ns, iface string, addr netip.Addr) (string, error) {
	n := l.Net
	n.mu.Lock()
	port := fmt.Sprintf("p%d", l.ports)
	l.ports++
	n.mu.Unlock()
	b, in := []string{"-n", l.Bridge}, []string{"-n", ns}
	return port, n.runAll(
		append(b, "link", "add", port, "type", "veth", "peer", "name", iface, "netns", ns),
		append(b, "link", "set", port, "master", "br0", "up"),
		append(in, "addr", "add", netip.PrefixFrom(addr, l.Subnet.Bits()).String(), "dev", iface),
		append(in, "link", "set", iface, "multicast", "on", "up"),
	)
}

// AddHost adds a host to the LAN with the next free host address, a route
// for multicast on eth0, and the LAN's routes (through its routers).
func (l *LAN) AddHost() (*Host, error) {
	n := l.Net
	n.mu.Lock()
	if l.hosts+l.routers >= size(l.Subnet) || l.hosts >= MaxHosts {
		n.mu.Unlock()
		return nil, fmt.Errorf("netns: LAN %s is full", l.Subnet)
	}
	l.hosts++
	addr := nthAddr(l.Subnet, l.hosts)
	n.mu.Unlock()
	ns, err := n.addNS("h")
	if err != nil {
		return nil, err
	}
	h := &Host{NS: ns, Iface: "eth0", Addr: addr, LAN: l, ip: n.ip}
	if h.port, err = l.plug(ns, h.Iface, addr); err != nil {
		return nil, err
	}
	if err := n.run("-n", ns, "route", "add", "224.0.0.0/4", "dev", h.Iface); err != nil {
		return nil, err
	}
	n.mu.Lock()
	gw, routes := l.gateway, l.routes
	l.Hosts = append(l.Hosts, h)
	n.mu.Unlock()
	if err := h.addRoutes(gw, routes); err != nil {
		return nil, err
	}
	return h, nil
}

// MustHost is AddHost for tests: it fails t on error.
func (l *LAN) MustHost(t testing.TB) *Host {
	t.Helper()
	h, err := l.AddHost()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// addRoutes gives the host a default route through gw (when valid) and
// the routes rs.
func (h *Host) addRoutes(gw netip.Addr, rs []route) error {
	var cmds [][]string
	if gw.IsValid() {
		cmds = append(cmds, []string{"-n", h.NS, "route", "replace", "default", "via", gw.String(), "dev", h.Iface})
	}
	for _, r := range rs {
		cmds = append(cmds, []string{"-n", h.NS, "route", "replace", r.to.String(), "via", r.via.String(), "dev", h.Iface})
	}
	return h.LAN.Net.runAll(cmds...)
}

// addRouter creates a router namespace with an interface on each LAN.
func (n *Net) addRouter(lans ...*LAN) (*Router, error) {
	ns, err := n.addNS("r")
	if err != nil {
		return nil, err
	}
	r := &Router{NS: ns, Addrs: make(map[*LAN]netip.Addr), ip: n.ip}
	for i, l := range lans {
		n.mu.Lock()
		if l.hosts+l.routers >= size(l.Subnet) {
			n.mu.Unlock()
			return nil, fmt.Errorf("netns: LAN %s is full", l.Subnet)
		}
		l.routers++
		addr := nthAddr(l.Subnet, size(l.Subnet)+1-l.routers)
		n.mu.Unlock()
		if _, err := l.plug(ns, fmt.Sprintf("eth%d", i), addr); err != nil {
			return nil, err
		}
		r.Addrs[l] = addr
	}
	return r, n.run("netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
}

// AddRouter joins the LANs (at least two) with a router. The router's
// address on each LAN becomes that LAN's default gateway unless it has one,
// and every LAN gets a route to the others through it, so hosts on any of
// them (added before or after) reach hosts on all of them.
func (n *Net) AddRouter(lans ...*LAN) (*Router, error) {
	if len(lans) < 2 {
		return nil, errors.New("netns: a router joins at least two LANs")
	}
	r, err := n.addRouter(lans...)
	if err != nil {
		return nil, err
	}
	for _, l := range lans {
		var rs []route
		for _, o := range lans {
			if o != l {
				rs = append(rs, route{to: o.Subnet, via: r.Addrs[l]})
			}
		}
		if err := l.setRoutes(r.Addrs[l], rs); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// AddNAT puts the inside LAN behind a NAT router on the outside LAN: the
// router masquerades inside hosts' traffic behind its outside address (as
// kind says) and drops what comes from outside unless it belongs to a flow
// an inside host started. Inside hosts route everything through it; the
// outside LAN gets no route to the inside, as on the internet. The router
// itself routes through the outside LAN's gateway, if any.
func (n *Net) AddNAT(inside, outside *LAN, kind NATKind) (*Router, error) {
	if err := CheckNAT(); err != nil {
		return nil, err
	}
	r, err := n.addRouter(inside, outside) // eth0 inside, eth1 outside
	if err != nil {
		return nil, err
	}
	masq := "masquerade"
	if kind == Symmetric {
		masq = "masquerade fully-random"
	}
	rules := fmt.Sprintf(`table ip nat {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "eth1" %s
	}
}
table ip filter {
	chain forward {
		type filter hook forward priority filter; policy drop;
		iifname "eth0" oifname "eth1" accept
		iifname "eth1" oifname "eth0" ct state established,related accept
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "eth1" ct state new drop
	}
}
`, masq)
	cmd := exec.Command(n.ip, "netns", "exec", r.NS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("netns: nft in %s: %v: %s", r.NS, err, bytes.TrimSpace(out))
	}
	n.mu.Lock()
	ogw := outside.gateway
	n.mu.Unlock()
	if ogw.IsValid() {
		if err := n.run("-n", r.NS, "route", "replace", "default", "via", ogw.String(), "dev", "eth1"); err != nil {
			return nil, err
		}
	}
	return r, inside.setRoutes(r.Addrs[inside], nil)
}

// setRoutes makes gw the LAN's gateway (unless it has one) and adds routes
// rs, for its hosts now and later.
func (l *LAN) setRoutes(gw netip.Addr, rs []route) error {
	n := l.Net
	n.mu.Lock()
	if !l.gateway.IsValid() {
		l.gateway = gw
	} else {
		gw = netip.Addr{}
	}
	l.routes = append(l.routes, rs...)
	hosts := append([]*Host(nil), l.Hosts...)
	n.mu.Unlock()
	for _, h := range hosts {
		if err := h.addRoutes(gw, rs); err != nil {
			return err
		}
	}
	return nil
}

// SetLink plugs the host's cable into its LAN's bridge (up) or pulls it
// out (down): the bridge port goes down, the host's eth0 loses its
// carrier, and nothing passes until it is plugged back in. Addresses and
// routes stay.
func (h *Host) SetLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return h.LAN.Net.run("-n", h.LAN.Bridge, "link", "set", h.port, state)
}

// Argv returns the command line that runs name with args inside the host
// (ip netns exec NS name args…), for process runners that take one.
func (h *Host) Argv(name string, args ...string) []string { return argv(h.ip, h.NS, name, args) }

// Command returns a command that runs name with args inside the host.
func (h *Host) Command(name string, args ...string) *exec.Cmd { return command(h.Argv(name, args...)) }

// Run runs name with args inside the host to completion and returns its
// combined output; it fails t if the command fails.
func (h *Host) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return runIn(t, h.Command(name, args...), h.NS)
}

// Command returns a command that runs name with args inside the router.
func (r *Router) Command(name string, args ...string) *exec.Cmd {
	return command(argv(r.ip, r.NS, name, args))
}

// Run runs name with args inside the router to completion and returns its
// combined output; it fails t if the command fails.
func (r *Router) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return runIn(t, r.Command(name, args...), r.NS)
}

func argv(ip, ns, name string, args []string) []string {
	return append([]string{ip, "netns", "exec", ns, name}, args...)
}

func command(argv []string) *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }

func runIn(t testing.TB, cmd *exec.Cmd, ns string) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("netns: in %s: %s: %v\n%s", ns, strings.Join(cmd.Args[4:], " "), err, out)
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
