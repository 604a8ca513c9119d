package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weftmesh/weft/internal/testbed"
)

// TestPrivatePartition: six members split 3|3. On one side the owner
// removes X (on the other side) while X posts; on the other an admin
// removes C (on this side) while C posts. After the heal, every node that
// is still a member holds the identical set of messages and the identical
// membership, whatever order things arrived in; X and C are out.
func TestPrivatePartition(t *testing.T) {
	names := []string{"a", "b", "c", "x", "y", "z"}
	cs := make([]cli, len(names))
	ds := make([]*testbed.Daemon, len(names))
	ids := make([]string, len(names))
	for i := range names {
		cs[i] = newCLI(t)
		args := []string{"--listen", "/ip4/127.0.0.1/tcp/0"}
		if i > 0 {
			args = append(args, "--bootstrap", ds[0].Addrs[0])
		}
		ds[i] = startDaemon(t, cs[i], args...)
		ids[i], _ = cs[i].id()
	}
	a, c, x, y := cs[0], cs[2], cs[3], cs[4]
	a.OK("create", "audit")
	for i := 1; i < len(names); i++ {
		args := []string{"invite", "audit", ids[i]}
		if names[i] == "y" {
			args = append(args, "--role", "admin")
		}
		cs[i].OK("join", "--invite", strings.TrimSpace(a.OK(args...)))
	}
	for i := range cs {
		cs[i].waitFor("six members on "+names[i], func() bool { return len(cs[i].membersOf("audit")) == 6 })
	}

	restart := func(groups ...[]int) {
		t.Helper()
		for _, d := range ds {
			if err := d.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range groups {
			var allow []string
			if len(groups) > 1 {
				for _, i := range g {
					allow = append(allow, "--allow-peer", ids[i])
				}
			}
			for k, i := range g {
				args := append([]string{"--listen", "/ip4/127.0.0.1/tcp/0"}, allow...)
				if k > 0 {
					args = append(args, "--bootstrap", ds[g[0]].Addrs[0])
				}
				ds[i] = startDaemon(t, cs[i], args...)
			}
		}
	}
	left, right := []int{0, 1, 2}, []int{3, 4, 5}
	restart(left, right)
	for _, i := range right[1:] {
		ds[right[0]].WaitConnected(ids[i])
	}
	for _, i := range left[1:] {
		ds[left[0]].WaitConnected(ids[i])
	}

	// Left: the owner removes X, C posts. Right: admin Y removes C, X posts.
	a.OK("remove", "audit", ids[3])
	y.OK("remove", "audit", ids[2])
	for k := range 3 {
		x.OK("send", "audit", "--text", fmt.Sprintf("x in the partition %d", k))
		c.OK("send", "audit", "--text", fmt.Sprintf("c in the partition %d", k))
		cs[1].OK("send", "audit", "--text", fmt.Sprintf("b in the partition %d", k))
		cs[5].OK("send", "audit", "--text", fmt.Sprintf("z in the partition %d", k))
	}

	restart([]int{0, 1, 2, 3, 4, 5})
	stay := []int{0, 1, 4, 5} // a, b, y, z
	setOf := func(i int) map[string]bool {
		out := map[string]bool{}
		for _, m := range cs[i].readJSON("audit") {
			out[m.ID] = true
		}
		return out
	}
	var want map[string]bool
	var wantMembers map[string]string
	for _, i := range stay {
		cs[i].waitFor("the heal on "+names[i], func() bool {
			got := setOf(i)
			if want == nil {
				want = got
			}
			if len(got) > len(want) {
				want = got
			}
			ms := cs[i].membersOf("audit")
			return len(got) == len(want) && len(ms) == 4 && ms[ids[2]] == "" && ms[ids[3]] == ""
		})
	}
	// Once all four agree on the count, they must agree on the set.
	for _, i := range stay {
		cs[i].waitFor("identical sets on "+names[i], func() bool {
			for _, j := range stay {
				if !maps.Equal(setOf(i), setOf(j)) {
					return false
				}
			}
			return true
		})
		ms := cs[i].membersOf("audit")
		if wantMembers == nil {
			wantMembers = ms
		}
		if !maps.Equal(ms, wantMembers) {
			t.Fatalf("%s's members %v, %s's %v", names[i], ms, names[stay[0]], wantMembers)
		}
	}
	// The posts made concurrently with the removals stand everywhere.
	ts := texts(a.readJSON("audit"))
	for _, s := range []string{"x in the partition 2", "c in the partition 2", "z in the partition 2", "b in the partition 2"} {
		if !slices.Contains(ts, s) {
			t.Errorf("after the heal a lacks %q", s)
		}
	}
	if wantMembers[ids[4]] != "admin" || wantMembers[ids[0]] != "owner" {
		t.Errorf("members %v", wantMembers)
	}
}
