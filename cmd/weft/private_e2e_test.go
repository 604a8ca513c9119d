package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weftmesh/weft/protocol/api"
)

// membersOf runs `weft members SPACE --json`: peer → role.
func (c cli) membersOf(space string) map[string]string {
	c.T.Helper()
	var ms api.Members
	if err := json.Unmarshal([]byte(c.OK("members", space, "--json")), &ms); err != nil {
		c.T.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms.Members {
		out[m.Peer] = m.Role
	}
	return out
}

// texts returns the text of each message of a space that has one.
func texts(ms []api.Message) []string {
	var out []string
	for _, m := range ms {
		var c struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &c) == nil && c.Text != "" {
			out = append(out, c.Text)
		}
	}
	return out
}

func has(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestPrivateCLI: through the CLI exactly as a user would: A creates a
// private space, invites B, B joins by the token, both send and read, and
// members lists both with their roles.
func TestPrivateCLI(t *testing.T) {
	a, b := newCLI(t), newCLI(t)
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	bID, _ := b.id()

	spaceID := strings.TrimSpace(a.OK("create", "audit"))
	tok := strings.TrimSpace(a.OK("invite", "audit", bID, "--role", "member", "--expires", "1h"))
	if !strings.HasPrefix(tok, "weft-invite1.") {
		t.Fatalf("invite printed %q", tok)
	}
	out := b.OK("join", "--invite", tok)
	if !strings.Contains(out, spaceID) {
		t.Fatalf("join printed %q, want the space ID %s", out, spaceID)
	}
	a.OK("send", "audit", "--text", "hello from a")
	b.OK("send", spaceID, "--text", "hello from b") // by ID as well as by name
	for _, c := range []cli{a, b} {
		c.waitFor("both messages", func() bool {
			ts := texts(c.readJSON("audit"))
			return has(ts, "hello from a") && has(ts, "hello from b")
		})
	}
	for _, c := range []cli{a, b} {
		c.waitFor("members on "+c.Home, func() bool {
			ms := c.membersOf("audit")
			return len(ms) == 2 && ms[aID] == "owner" && ms[bID] == "member"
		})
	}
	var sps api.Spaces
	if err := json.Unmarshal([]byte(b.OK("spaces", "--json")), &sps); err != nil || len(sps.Spaces) != 1 || !sps.Spaces[0].Private || sps.Spaces[0].ID != spaceID {
		t.Fatalf("b's spaces: %+v %v", sps, err)
	}
}
