package main

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
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

// TestPrivateBadInvites: an invite bound to another peer, expired, with a
// forged signature, with its role tampered, or issued by a non-member is
// refused with a clear error; nothing is stored and the daemons keep
// serving.
func TestPrivateBadInvites(t *testing.T) {
	a, b, c := newCLI(t), newCLI(t), newCLI(t)
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0")
	aID, _ := a.id()
	cID, _ := c.id()
	sid := strings.TrimSpace(a.OK("create", "audit"))

	good := strings.TrimSpace(a.OK("invite", "audit"))
	body, sig, _ := strings.Cut(strings.TrimPrefix(good, "weft-invite1."), ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	adminRaw := strings.Replace(string(raw), `"role":"member"`, `"role":"admin"`, 1)
	if adminRaw == string(raw) {
		t.Fatalf("no role in %s", raw)
	}
	flipped := []byte(sig)
	// Another base64url character (flipping a bit could leave the
	// alphabet, and then the token would not even decode).
	if flipped[3] == 'A' {
		flipped[3] = 'B'
	} else {
		flipped[3] = 'A'
	}

	// A validly signed invite from C, who is no member: only a member
	// can tell it is worthless.
	cKey, err := mesh.LoadOrCreateIdentity(filepath.Join(c.Home, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := member.ParseInvite(good)
	if err != nil {
		t.Fatal(err)
	}
	inv.Role = member.Admin
	byC, err := member.Issue(cKey, inv)
	if err != nil {
		t.Fatal(err)
	}

	expired := strings.TrimSpace(a.OK("invite", "audit", "--expires", "1ms"))
	cases := []struct {
		name, token, want string
	}{
		{"bound to another peer", strings.TrimSpace(a.OK("invite", "audit", cID)), "bound to " + cID},
		{"expired", expired, "expired"},
		{"forged signature", "weft-invite1." + body + "." + string(flipped), "forged or tampered"},
		{"tampered role", "weft-invite1." + base64.RawURLEncoding.EncodeToString([]byte(adminRaw)) + "." + sig, "forged or tampered"},
		{"issued by a non-member", byC, "may not invite"},
		{"not a token", "hello", "not an invite token"},
	}
	for _, tc := range cases {
		_, stderr, code := b.Run("join", "--invite", tc.token)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal saying %q", tc.name, code, stderr, tc.want)
		}
	}
	var sps api.Spaces
	if err := json.Unmarshal([]byte(b.OK("spaces", "--json")), &sps); err != nil || len(sps.Spaces) != 0 {
		t.Fatalf("b holds spaces after refused joins: %+v %v", sps, err)
	}
	if ms := a.membersOf("audit"); len(ms) != 1 || ms[aID] != "owner" {
		t.Fatalf("a's members after refused joins: %v", ms)
	}
	if n := len(a.readJSON(sid)); n != 1 { // the genesis only
		t.Fatalf("a holds %d messages, want the genesis alone", n)
	}
	// Both still serve, and the good invite still works.
	b.OK("join", "--invite", good)
	bID, _ := b.id()
	a.waitFor("b a member", func() bool { return a.membersOf("audit")[bID] == "member" })
}

// TestPrivateMCP: the MCP tools over `weft mcp` processes: create_space,
// invite, join_invite, members, then send and read as on an open space; a
// bad invite is a tool error.
func TestPrivateMCP(t *testing.T) {
	a, b, _, _ := pair(t, "/ip4/127.0.0.1/tcp/0")
	ma, mb := mcpStdio(t, a), mcpStdio(t, b)
	bID, _ := b.id()
	var sp struct{ Name, ID string }
	mcpOK(t, ma, "create_space", map[string]any{"name": "review"}, &sp)
	var inv api.Invite
	mcpOK(t, ma, "invite", map[string]any{"space": "review", "peer": bID, "expires_seconds": 600}, &inv)
	if text, isErr := mcpCall(t, mb, "join_invite", map[string]any{"invite": inv.Token + "x"}); !isErr || !strings.Contains(text, "invite") {
		t.Fatalf("a tampered invite: %v %s", isErr, text)
	}
	var joined struct{ Name, ID string }
	mcpOK(t, mb, "join_invite", map[string]any{"invite": inv.Token}, &joined)
	if joined.ID != sp.ID || joined.Name != "review" {
		t.Fatalf("joined %+v, created %+v", joined, sp)
	}
	var ms api.Members
	mcpOK(t, mb, "members", map[string]any{"space": "review"}, &ms)
	if len(ms.Members) != 2 {
		t.Fatalf("members %+v", ms)
	}
	mcpOK(t, mb, "send", map[string]any{"space": "review", "content": map[string]any{"text": "lgtm"}}, nil)
	a.waitFor("b's message on a", func() bool { return has(texts(a.readJSON("review")), "lgtm") })

	// A sealed one: the same tools, sealed: true.
	var vault struct {
		Name, ID string
		Sealed   bool
	}
	mcpOK(t, ma, "create_space", map[string]any{"name": "vault", "sealed": true}, &vault)
	if !vault.Sealed {
		t.Fatalf("create_space sealed answered %+v", vault)
	}
	mcpOK(t, ma, "invite", map[string]any{"space": "vault", "peer": bID}, &inv)
	mcpOK(t, mb, "join_invite", map[string]any{"invite": inv.Token}, &joined)
	mcpOK(t, mb, "send", map[string]any{"space": "vault", "content": map[string]any{"text": "sealed lgtm"}}, nil)
	a.waitFor("b's sealed message on a", func() bool { return has(texts(a.readJSON("vault")), "sealed lgtm") })
}

// TestJoinPastRemovedIssuer: an invite is presented to its issuer first;
// an issuer removed since it issued the invite refuses every join (it
// serves no one), and the joiner presents the invite to the next member
// it names, which takes it (before, the issuer's refusal was the answer).
// A join the removal makes void (ordered after it: the invite was issued
// at the removal's depth) is refused by every member, with nothing stored
// by the joiner (before, it said it had joined).
func TestJoinPastRemovedIssuer(t *testing.T) {
	a, x, b, c := newCLI(t), newCLI(t), newCLI(t), newCLI(t)
	for _, n := range []cli{a, x, b, c} {
		startDaemon(t, n, "--listen", "/ip4/127.0.0.1/tcp/0")
	}
	aID, _ := a.id()
	xID, _ := x.id()
	bID, _ := b.id()
	cID, _ := c.id()
	a.OK("create", "audit")
	x.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", xID, "--role", "admin")))
	x.waitConnected(aID)
	tokB := strings.TrimSpace(x.OK("invite", "audit", bID)) // names x first, then a
	a.OK("send", "audit", "--text", "between")
	x.waitFor("x reads between", func() bool { return has(texts(x.readJSON("audit")), "between") })
	tokC := strings.TrimSpace(x.OK("invite", "audit", cID)) // its join is as deep as the removal
	a.OK("remove", "audit", xID)
	x.waitFor("x learns its removal", func() bool { _, ok := x.membersOf("audit")[xID]; return !ok })

	if _, stderr, code := b.Run("join", "--invite", tokB); code != 0 {
		t.Fatalf("join past the removed issuer: exit %d: %s", code, stderr)
	}
	if role := b.membersOf("audit")[bID]; role != "member" {
		t.Fatalf("b's own view after joining: role %q", role)
	}
	a.waitFor("a lists b", func() bool { return a.membersOf("audit")[bID] == "member" })
	b.OK("send", "audit", "--text", "joined through a")
	a.waitFor("a reads b", func() bool { return has(texts(a.readJSON("audit")), "joined through a") })

	_, stderr, code := c.Run("join", "--invite", tokC)
	if code == 0 || !strings.Contains(stderr, "join refused") {
		t.Fatalf("void join: exit %d, stderr %q; want a refusal", code, stderr)
	}
	var sps api.Spaces
	if err := json.Unmarshal([]byte(c.OK("spaces", "--json")), &sps); err != nil || len(sps.Spaces) != 0 {
		t.Fatalf("c's spaces after a refused join: %+v %v", sps, err)
	}
	if _, ok := a.membersOf("audit")[cID]; ok {
		t.Fatal("a lists c")
	}
}
