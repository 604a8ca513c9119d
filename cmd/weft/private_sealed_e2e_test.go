package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/protocol/member"
	"github.com/weftmesh/weft/store"
)

// storedMessages opens a stopped daemon's store and returns every message
// of space as stored (the wire bytes it holds).
func storedMessages(t *testing.T, home string, space protocol.ID) []*protocol.Message {
	t.Helper()
	st, err := store.Open(store.Options{Dir: filepath.Join(home, "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	var out []*protocol.Message
	var after store.Cursor
	for {
		es, next, err := st.Read(space, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			m, err := protocol.Decode(e.Raw, protocol.StoredLimits())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		if len(es) == 0 || next == after {
			return out
		}
		after = next
	}
}

// heldKeys returns every epoch key that the holder of key can get from
// the messages of a store: the shares wrapped to it (genesis, removals'
// rekeys, key messages) and the keys of the invites in its joins.
func heldKeys(t *testing.T, key crypto.PrivKey, ms []*protocol.Message) map[uint64][]member.Key {
	t.Helper()
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]member.Key{}
	var shares []member.KeyShares
	for _, m := range ms {
		switch m.Type {
		case member.TypeGenesis:
			if g, err := member.ParseGenesis(m); err == nil && g.Keys != nil {
				shares = append(shares, *g.Keys)
			}
		case member.TypeMember:
			c, _, err := member.ParseChange(m)
			if err != nil {
				continue
			}
			if c.Keys != nil {
				shares = append(shares, *c.Keys)
			}
			if inv, err := member.ParseInvite(c.Invite); err == nil && inv.Key != nil {
				if k, err := inv.Key.Open(key, self, m.Space); err == nil {
					out[inv.Key.Epoch] = append(out[inv.Key.Epoch], k)
				}
			}
		case member.TypeKey:
			if km, err := member.ParseKeyMessage(m); err == nil {
				shares = append(shares, km.Keys...)
			}
		}
	}
	for e, k := range member.Mine(key, self, ms[0].Space, shares) {
		out[e] = append(out[e], k)
	}
	return out
}

// opens reports whether any key of keys opens sealed message m, and what
// it says.
func opens(m *protocol.Message, keys map[uint64][]member.Key) (string, bool) {
	env, ok := member.ParseEnvelope(m.Content)
	if !ok {
		return "", false
	}
	var all []member.Key
	for _, ks := range keys {
		all = append(all, ks...) // every key, not only its epoch's
	}
	content, _, err := member.Open(env, member.HeadersOf(m), all)
	if err != nil {
		for _, k := range all {
			// And under any epoch number, should the envelope's lie.
			for e := range uint64(8) {
				env.Epoch = e
				if c, _, err := member.Open(env, member.HeadersOf(m), []member.Key{k}); err == nil {
					return string(c), true
				}
			}
		}
		return "", false
	}
	return string(content), true
}

func identity(t *testing.T, c cli) crypto.PrivKey {
	t.Helper()
	k, err := mesh.LoadOrCreateIdentity(filepath.Join(c.Home, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealedCLI: through the CLI: A creates a sealed space, invites B, B
// joins, both send and read plaintext, and both list the space as
// sealed; yet neither A's nor B's home holds a byte of the messages'
// marker (at rest: ciphertext only), nor does C, the DHT node both
// bootstrap from (its store and its debug log).
func TestSealedCLI(t *testing.T) {
	a, b, c := newCLI(t), newCLI(t), newCLI(t)
	dc := startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "debug")
	da := startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", dc.Addrs[0])
	db := startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", dc.Addrs[0])
	aID, _ := a.id()
	bID, _ := b.id()
	marker := "sealed-marker-" + hex.EncodeToString(randBytes(t, 8))

	sid := strings.TrimSpace(a.OK("create", "audit", "--sealed"))
	b.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", bID)))
	// B follows the space (the event stream) before anything is sent.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followed := make(chan string, 100)
	go func() {
		_ = b.goClient().Follow(ctx, sid, "", func(m api.Message) error {
			var c struct{ Text string }
			_ = json.Unmarshal(m.Content, &c)
			followed <- c.Text
			return nil
		})
	}()
	a.OK("send", "audit", "--text", marker+" from a", "--meta", "topic="+marker)
	b.OK("send", sid, "--text", marker+" from b")
	for _, x := range []cli{a, b} {
		x.waitFor("both messages in plaintext on "+x.Home, func() bool {
			ts := texts(x.readJSON("audit"))
			return has(ts, marker+" from a") && has(ts, marker+" from b")
		})
		ms := x.readJSON("audit")
		if m, ok := hasText(ms, marker+" from a"); !ok || m.Meta["topic"] != marker {
			t.Errorf("%s: a's message's meta %v", x.Home, m.Meta)
		}
		var mem api.Members
		if err := json.Unmarshal([]byte(x.OK("members", "audit", "--json")), &mem); err != nil || !mem.Sealed || len(mem.Members) != 2 {
			t.Errorf("%s: members %+v %v", x.Home, mem, err)
		}
		var sps api.Spaces
		if err := json.Unmarshal([]byte(x.OK("spaces", "--json")), &sps); err != nil || len(sps.Spaces) != 1 || !sps.Spaces[0].Sealed || !sps.Spaces[0].Private {
			t.Errorf("%s: spaces %+v %v", x.Home, sps, err)
		}
	}
	_ = aID
	b.waitFor("b's event stream to carry a's message in clear", func() bool {
		for {
			select {
			case text := <-followed:
				if text == marker+" from a" {
					return true
				}
			default:
				return false
			}
		}
	})
	cancel()
	// Stop all three so that their stores are flushed, then scan.
	stopAll(t, da, db, dc)
	for _, x := range []cli{a, b, c} {
		if testbed.DirHolds(t, x.Home, []byte(marker)) {
			t.Errorf("%s holds the marker in plaintext", x.Home)
		}
	}
	if strings.Contains(dc.Log.String(), marker) {
		t.Errorf("C's log holds the marker")
	}
	if !strings.Contains(dc.Log.String(), "level=DEBUG") {
		t.Errorf("C's log is not at debug level: the scan proves less than it says")
	}
	// The messages are there, sealed: B's store holds A's, and A's key
	// opens it.
	space, _ := protocol.ParseID(sid)
	ms := storedMessages(t, b.Home, space)
	keys := heldKeys(t, identity(t, a), storedMessages(t, a.Home, space))
	n := 0
	for _, m := range ms {
		if text, ok := opens(m, keys); ok && strings.Contains(text, marker) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("B's store holds %d sealed messages that open with A's keys to the marker, want 2", n)
	}
}

// TestSealedRemove: after `weft remove X` in a sealed space, what A sends
// cannot be decrypted with anything X holds (its identity key and every
// key share and invite in its store), while B, who stayed, reads it; the
// same procedure with B's key and store opens it (so the check can fail).
func TestSealedRemove(t *testing.T) {
	a, b, x, ds, space := sealedTrio(t)
	bID, _ := b.id()
	xID, _ := x.id()
	bearer, stderr, code := a.Run("invite", "audit") // unbound: the key rides in the token
	if code != 0 || !strings.Contains(stderr, "whoever holds it can read the space") {
		t.Fatalf("an unbound invite to a sealed space: exit %d, stderr %q (want the bearer-secret note)", code, stderr)
	}
	b.OK("join", "--invite", strings.TrimSpace(bearer))
	x.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", xID)))
	a.OK("send", "audit", "--text", "before")
	x.waitFor("x reads before", func() bool { return has(texts(x.readJSON("audit")), "before") })

	a.OK("remove", "audit", xID)
	for _, c := range []cli{a, b} {
		c.waitFor("x removed on "+c.Home, func() bool { _, ok := c.membersOf("audit")[xID]; return !ok })
	}
	secret := "after-" + hex.EncodeToString(randBytes(t, 8))
	sent := a.OK("send", "audit", "--text", secret, "--print-json")
	var sm api.Message
	if err := json.Unmarshal([]byte(sent), &sm); err != nil {
		t.Fatalf("send --json: %v: %s", err, sent)
	}
	b.waitFor("b reads the message sent after the removal", func() bool { return has(texts(b.readJSON("audit")), secret) })
	b.OK("send", "audit", "--text", "b after")
	a.waitFor("a reads b's", func() bool { return has(texts(a.readJSON("audit")), "b after") })

	stopAll(t, ds...)
	id, _ := protocol.ParseID(sm.ID)
	var after *protocol.Message
	for _, m := range storedMessages(t, a.Home, space) {
		if m.ID == id {
			after = m
		}
	}
	if after == nil {
		t.Fatalf("a does not hold its message %s", id)
	}
	// X's own store: every key it holds.
	goneCannotRead(t, after, secret, identity(t, x), storedMessages(t, x.Home, space), b, space)
	_ = bID
}

// TestSealedInviteOffline: B joins with the token while A, the inviter,
// is stopped (presenting the join to C, a member A was connected to), and
// reads what C sends and what was sent before; C reads B's.
func TestSealedInviteOffline(t *testing.T) {
	a, b, c := newCLI(t), newCLI(t), newCLI(t)
	da := startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0")
	bID, _ := b.id()
	cID, _ := c.id()
	a.OK("create", "audit", "--sealed")
	c.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", cID)))
	a.OK("send", "audit", "--text", "from a, before")
	c.waitFor("c reads a", func() bool { return has(texts(c.readJSON("audit")), "from a, before") })
	a.waitConnected(cID)
	tok := strings.TrimSpace(a.OK("invite", "audit", bID))
	if err := da.Stop(); err != nil {
		t.Fatal(err)
	}

	b.OK("join", "--invite", tok)
	c.OK("send", "audit", "--text", "from c, after")
	b.waitFor("b reads c and a", func() bool {
		ts := texts(b.readJSON("audit"))
		return has(ts, "from c, after") && has(ts, "from a, before")
	})
	b.OK("send", "audit", "--text", "from b")
	c.waitFor("c reads b", func() bool { return has(texts(c.readJSON("audit")), "from b") })
	for _, m := range b.readJSON("audit") {
		var mk struct{ Sealed string }
		if json.Unmarshal(m.Content, &mk) == nil && mk.Sealed != "" {
			t.Errorf("b shows a sealed marker: %s", m.Content)
		}
	}
}

// TestSealedNoKey: a member that lacks an epoch's key sees a clear marker,
// not ciphertext, and the text once the key arrives: B joins, while A is
// offline, with an invite issued before a rekey; the messages of the new
// epoch show the marker until A, back, sees B's join and shares the key.
func TestSealedNoKey(t *testing.T) {
	a, b, c, x := newCLI(t), newCLI(t), newCLI(t), newCLI(t)
	da := startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, b, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0")
	startDaemon(t, x, "--listen", "/ip4/127.0.0.1/tcp/0")
	bID, _ := b.id()
	cID, _ := c.id()
	xID, _ := x.id()
	a.OK("create", "audit", "--sealed")
	c.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", cID)))
	x.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", xID)))
	a.waitConnected(cID)
	tok := strings.TrimSpace(a.OK("invite", "audit", bID)) // carries epoch 0's key, names C
	a.OK("remove", "audit", xID)                           // epoch 1
	c.waitFor("c learns the removal", func() bool { _, ok := c.membersOf("audit")[xID]; return !ok })
	c.OK("send", "audit", "--text", "epoch one")
	a.waitFor("a reads c", func() bool { return has(texts(a.readJSON("audit")), "epoch one") })
	if err := da.Stop(); err != nil {
		t.Fatal(err)
	}

	b.OK("join", "--invite", tok)
	b.waitFor("b shows the marker for epoch 1", func() bool {
		for _, m := range b.readJSON("audit") {
			var mk struct{ Sealed string }
			if json.Unmarshal(m.Content, &mk) == nil && mk.Sealed == "no key for epoch 1" {
				return true
			}
		}
		return false
	})
	if _, stderr, code := b.Run("send", "audit", "--text", "b in epoch 0"); code != 0 {
		t.Fatalf("b sends in the epoch it holds: %s", stderr)
	}
	startDaemon(t, a, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", firstAddr(t, c))
	b.waitFor("b reads epoch 1 once a shares it", func() bool { return has(texts(b.readJSON("audit")), "epoch one") })
}

func stopAll(t *testing.T, ds ...*testbed.Daemon) {
	t.Helper()
	for _, d := range ds {
		if err := d.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func firstAddr(t *testing.T, c cli) string {
	t.Helper()
	n, err := c.goClient().Node(context.Background())
	if err != nil || len(n.Addrs) == 0 {
		t.Fatal(errors.Join(err, errors.New("no address")))
	}
	return n.Addrs[0]
}

// TestSealedLeave: `weft leave` of a sealed space tells the members, and
// a key rotation follows: what is sent after it cannot be decrypted with
// any key X was ever given (every share to X and invite key for X that
// the rotating node's store holds), while those who stayed read it; X's
// keys do open what was sent before it left (so the check can fail). The
// owner rotates at once; with the owner down, an admin does, in its turn.
func TestSealedLeave(t *testing.T) {
	for _, ownerDown := range []bool{false, true} {
		t.Run(map[bool]string{false: "owner rotates", true: "admin rotates"}[ownerDown], func(t *testing.T) {
			sealedLeave(t, ownerDown)
		})
	}
}

func sealedLeave(t *testing.T, ownerDown bool) {
	a, b, x, ds, space := sealedTrio(t)
	bID, _ := b.id()
	xID, _ := x.id()
	b.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", bID, "--role", "admin")))
	x.OK("join", "--invite", strings.TrimSpace(a.OK("invite", "audit", xID)))
	a.OK("send", "audit", "--text", "before")
	x.waitFor("x reads before", func() bool { return has(texts(x.readJSON("audit")), "before") })
	b.waitFor("b sees x", func() bool { _, ok := b.membersOf("audit")[xID]; return ok })
	// rot is the node that rotates, stays the one that sends after.
	rot, stay := a, b
	if ownerDown {
		if err := ds[0].Stop(); err != nil {
			t.Fatal(err)
		}
		rot, stay = b, b
	}
	keyMessages := func(c cli) int {
		n := 0
		for _, m := range c.readJSON("audit") {
			if m.Type == member.TypeKey {
				n++
			}
		}
		return n
	}
	keysBefore := keyMessages(rot)

	if out := x.OK("leave", "audit"); !strings.Contains(out, "left audit") {
		t.Fatalf("weft leave: %q", out)
	}
	rot.waitFor("x gone from the members on "+rot.Home, func() bool { _, ok := rot.membersOf("audit")[xID]; return !ok })
	rot.waitFor("the key rotation", func() bool { return keyMessages(rot) > keysBefore })
	secret := "after-" + hex.EncodeToString(randBytes(t, 8))
	sent := rot.OK("send", "audit", "--text", secret, "--print-json")
	var sm api.Message
	if err := json.Unmarshal([]byte(sent), &sm); err != nil {
		t.Fatalf("send --json: %v: %s", err, sent)
	}
	if !ownerDown {
		stay.waitFor("b reads the message sent after the leave", func() bool { return has(texts(stay.readJSON("audit")), secret) })
	}

	stopAll(t, ds...)
	id, _ := protocol.ParseID(sm.ID)
	held := storedMessages(t, rot.Home, space)
	var after *protocol.Message
	for _, m := range held {
		if m.ID == id {
			after = m
		}
	}
	if after == nil {
		t.Fatalf("%s does not hold its message %s", rot.Home, id)
	}
	// The rotating node's store: every key ever given to X.
	goneCannotRead(t, after, secret, identity(t, x), held, stay, space)
}

// goneCannotRead checks a sealed message sent after a member went: the
// keys it could get from msgs (with its identity key) do not open after,
// yet open a message saying "before" (so the check can fail), while the
// keys of stay, who stayed, open after and read secret.
func goneCannotRead(t *testing.T, after *protocol.Message, secret string, gone crypto.PrivKey, msgs []*protocol.Message, stay cli, space protocol.ID) {
	t.Helper()
	keys := heldKeys(t, gone, msgs)
	if len(keys) == 0 {
		t.Fatal("the member who went holds no key at all: it read the space before, the scan is wrong")
	}
	if text, ok := opens(after, keys); ok {
		t.Fatalf("the keys of the member who went (%d epochs) open a message sent after: %s", len(keys), text)
	}
	opened := false
	for _, m := range msgs {
		if text, ok := opens(m, keys); ok && strings.Contains(text, "before") {
			opened = true
		}
	}
	if !opened {
		t.Fatal("the keys of the member who went open nothing: the check proves nothing")
	}
	stayKeys := heldKeys(t, identity(t, stay), storedMessages(t, stay.Home, space))
	if text, ok := opens(after, stayKeys); !ok || !strings.Contains(text, secret) {
		t.Fatalf("the keys of a member who stayed do not open the message sent after: %q %v", text, ok)
	}
}

// sealedTrio starts daemons for a, b and x, and has a create the sealed
// space "audit" (neither b nor x in it yet).
func sealedTrio(t *testing.T) (a, b, x cli, ds []*testbed.Daemon, space protocol.ID) {
	t.Helper()
	a, b, x = newCLI(t), newCLI(t), newCLI(t)
	for _, c := range []cli{a, b, x} {
		ds = append(ds, startDaemon(t, c, "--listen", "/ip4/127.0.0.1/tcp/0"))
	}
	space, err := protocol.ParseID(strings.TrimSpace(a.OK("create", "audit", "--sealed")))
	if err != nil {
		t.Fatal(err)
	}
	return a, b, x, ds, space
}
