package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// End-to-end tests of direct messages: the durable outbox of one daemon
// process and the inbox of another, across stops and restarts.

// dm runs `weft dm PEER --text TEXT --json-out ARGS…` and decodes the result.
func (c cli) dm(to, text string, args ...string) api.DMResult {
	c.T.Helper()
	var res api.DMResult
	out := c.OK(append([]string{"dm", to, "--text", text, "--json-out"}, args...)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		c.T.Fatalf("dm --json-out printed %q: %v", out, err)
	}
	return res
}

// countIDs counts how often each message ID appears in ms.
func countIDs(ms []api.Message) map[string]int {
	n := make(map[string]int)
	for _, m := range ms {
		n[m.ID]++
	}
	return n
}

func outgoing(list []api.Outgoing, id string) (api.Outgoing, bool) {
	for _, o := range list {
		if o.ID == id {
			return o, true
		}
	}
	return api.Outgoing{}, false
}

// TestDMDeliveredAfterRestart: direct messages sent while the recipient's
// daemon is stopped wait in the sender's outbox, retried with backoff, and
// reach the recipient once it is started again (same home, same address),
// each exactly once.
func TestDMDeliveredAfterRestart(t *testing.T) {
	const offline = 5
	bListen := testbed.FreeListen(t)
	a, b, _, db := pair(t, bListen)
	aID, _ := a.id()
	bID, _ := b.id()

	// While b is up, a DM is delivered before dm returns.
	first := a.dm(bID, "while up")
	if first.Status != "delivered" {
		t.Fatalf("dm to a connected peer: status %q, want delivered", first.Status)
	}
	if got := countIDs(b.inbox())[first.Message.ID]; got != 1 {
		t.Fatalf("b's inbox holds the delivered DM %d times, want 1", got)
	}

	if err := db.Stop(); err != nil {
		t.Fatalf("b did not stop cleanly: %v\n%s", err, db.Log.String())
	}
	var sent []string
	for i := range offline {
		res := a.dm(bID, fmt.Sprintf("while down %d", i), "--meta", "session=s-outage")
		if res.Status != "queued" {
			t.Fatalf("dm %d to a stopped peer: status %q, want queued", i, res.Status)
		}
		if d := time.Until(res.Deadline); d < 23*time.Hour || d > 25*time.Hour {
			t.Errorf("dm %d without --ttl: deadline in %v, want about 24h", i, d)
		}
		sent = append(sent, res.Message.ID)
	}
	// The outbox lists them all; the backoff loop keeps retrying them (the
	// last one queued has had a single attempt so far).
	last := sent[len(sent)-1]
	testbed.Poll(t, 20*time.Second, "retries of the queued DMs", func() (bool, string) {
		box := a.outbox(false)
		for _, id := range sent {
			if _, ok := outgoing(box, id); !ok {
				t.Fatalf("outbox lacks queued DM %s: %+v", id, box)
			}
		}
		o, _ := outgoing(box, last)
		return o.Attempts >= 3, fmt.Sprintf("attempts %d, last error %q", o.Attempts, o.LastError)
	})
	for _, o := range a.outbox(false) {
		if o.To != bID || o.LastError == "" || o.NextTry.IsZero() || o.Message == nil {
			t.Errorf("outbox entry %+v: want to b, with a last error, a next try and the message", o)
		}
	}
	if txt := a.OK("outbox"); strings.Count(txt, "to "+bID) != offline || !strings.Contains(txt, "last error") {
		t.Errorf("weft outbox:\n%s", txt)
	}

	// b comes back on the same address without --bootstrap: it redials a,
	// and a's outbox delivers on that connection.
	start := time.Now()
	db = startDaemon(t, b, "--listen", bListen)
	testbed.Poll(t, 45*time.Second, "the queued DMs in b's inbox", func() (bool, string) {
		n := countIDs(b.inbox())
		got := 0
		for _, id := range sent {
			if n[id] > 0 {
				got++
			}
		}
		return got == offline, fmt.Sprintf("%d of %d", got, offline)
	})
	t.Logf("%d queued DMs delivered %v after b's restart began", offline, time.Since(start).Round(time.Millisecond))
	testbed.Poll(t, 10*time.Second, "a's outbox to empty", func() (bool, string) {
		box := a.outbox(false)
		return len(box) == 0, fmt.Sprintf("%d left", len(box))
	})
	// a's sent log has them all, those queued after failed attempts.
	sentLog := jsonLines[api.Outgoing](t, a.OK("outbox", "--sent", "--json"))
	for _, id := range append([]string{first.Message.ID}, sent...) {
		o, ok := outgoing(sentLog, id)
		switch {
		case !ok:
			t.Errorf("a's sent log lacks %s: %+v", id, sentLog)
		case o.To != bID || o.DeliveredAt.IsZero() || (id == first.Message.ID) != (o.Attempts == 1):
			t.Errorf("a's sent log entry %+v: want to b, delivered, attempts 1 only for the first", o)
		}
	}

	check := func(when string) {
		t.Helper()
		in := b.inbox()
		n := countIDs(in)
		for _, id := range append([]string{first.Message.ID}, sent...) {
			if n[id] != 1 {
				t.Errorf("%s: b's inbox holds %s %d times, want once", when, id, n[id])
			}
		}
		if len(in) != offline+1 {
			t.Errorf("%s: b's inbox holds %d messages, want %d", when, len(in), offline+1)
		}
		for _, m := range in {
			if m.From != aID || m.Type != "event" {
				t.Errorf("%s: inbox message from %s of type %q, want from a, event", when, m.From, m.Type)
			}
			if m.ID != first.Message.ID && m.Meta["session"] != "s-outage" {
				t.Errorf("%s: inbox message %s lost its meta: %v", when, m.ID, m.Meta)
			}
		}
		var texts []string
		for _, m := range in {
			var c struct{ Text string }
			json.Unmarshal(m.Content, &c)
			texts = append(texts, c.Text)
		}
		for i := range offline {
			if !slices.Contains(texts, fmt.Sprintf("while down %d", i)) {
				t.Errorf("%s: b's inbox lacks %q: %q", when, fmt.Sprintf("while down %d", i), texts)
			}
		}
	}
	check("after delivery")

	// Another outage and restart: nothing is delivered a second time and
	// nothing is left to retry.
	if err := db.Stop(); err != nil {
		t.Fatalf("b did not stop cleanly: %v", err)
	}
	startDaemon(t, b, "--listen", bListen)
	a.waitConnected(bID)
	if box := a.outbox(false); len(box) != 0 {
		t.Errorf("a's outbox holds %d messages after delivery", len(box))
	}
	if dead := a.outbox(true); len(dead) != 0 {
		t.Errorf("a has %d dead letters: %+v", len(dead), dead)
	}
	check("after another restart")
}

// TestDMDeadLetterAfterTTL: a direct message whose TTL ends before the
// recipient is back moves to the dead letters, leaves the outbox, and is
// never delivered.
func TestDMDeadLetterAfterTTL(t *testing.T) {
	bListen := testbed.FreeListen(t)
	a, b, _, db := pair(t, bListen)
	bID, _ := b.id()
	if err := db.Stop(); err != nil {
		t.Fatalf("b did not stop cleanly: %v", err)
	}

	sentAt := time.Now()
	res := a.dm(bID, "too late", "--ttl", "2s")
	if res.Status != "queued" {
		t.Fatalf("dm to a stopped peer: status %q, want queued", res.Status)
	}
	if d := res.Deadline.Sub(res.Message.CreatedAt); d != 2*time.Second {
		t.Errorf("deadline %v after creation, want the TTL, 2s", d)
	}
	id := res.Message.ID
	var dead api.Outgoing
	testbed.Poll(t, 20*time.Second, "the DM in a's dead letters", func() (bool, string) {
		var ok bool
		dead, ok = outgoing(a.outbox(true), id)
		return ok, "not there"
	})
	t.Logf("dead-lettered %v after sending: %s", time.Since(sentAt).Round(time.Millisecond), dead.Reason)
	if !strings.Contains(dead.Reason, "deadline") {
		t.Errorf("dead letter reason %q does not mention the deadline", dead.Reason)
	}
	// The outbox keeps to its schedule: retried after about 1s, and given up
	// at the deadline, not at its next idle scan.
	if late := dead.DeadAt.Sub(res.Deadline); late < 0 || late > 1500*time.Millisecond {
		t.Errorf("dead-lettered %v after its deadline, want within 1.5s", late)
	}
	if dead.Attempts < 2 {
		t.Errorf("dead letter after %d attempts in 2s, want a retry after the first attempt", dead.Attempts)
	}
	if dead.Message == nil || dead.Message.ID != id {
		t.Errorf("dead letter %+v: want the message", dead)
	}
	if _, ok := outgoing(a.outbox(false), id); ok {
		t.Error("the dead letter is still in the outbox")
	}
	if txt := a.OK("outbox", "--dead"); !strings.Contains(txt, id) || !strings.Contains(txt, "deadline") {
		t.Errorf("weft outbox --dead:\n%s", txt)
	}

	// b comes back: a later DM reaches it, the dead one does not.
	startDaemon(t, b, "--listen", bListen)
	a.waitConnected(bID)
	later := a.dm(bID, "after the restart")
	testbed.Poll(t, 30*time.Second, "the later DM in b's inbox", func() (bool, string) {
		return countIDs(b.inbox())[later.Message.ID] == 1, "not there"
	})
	if n := countIDs(b.inbox())[id]; n != 0 {
		t.Errorf("the dead-lettered DM reached b (%d times)", n)
	}
	if _, ok := outgoing(a.outbox(true), id); !ok {
		t.Error("the dead letter left the dead letters")
	}
}
