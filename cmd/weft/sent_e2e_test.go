package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testbed"
	"github.com/weftmesh/weft/protocol/api"
)

// TestOutboxSent: a sender sees its own delivered direct messages with
// `weft outbox --sent` (recipient, kind, when delivered, attempts), in text
// and JSON, and they are no longer in the outbox.
func TestOutboxSent(t *testing.T) {
	a, b, _, _ := pair(t, testbed.FreeListen(t))
	bID, _ := b.id()
	if txt := a.OK("outbox", "--sent"); txt != "" { // "no direct messages…" only on a terminal
		t.Errorf("weft outbox --sent before any DM:\n%s", txt)
	}
	before := time.Now().Add(-time.Second)
	var ids []string
	for i := range 2 {
		res := a.dm(bID, fmt.Sprint("hello ", i))
		if res.Status != "delivered" {
			t.Fatalf("dm %d: status %q, want delivered", i, res.Status)
		}
		ids = append(ids, res.Message.ID)
	}
	var sent []api.Outgoing
	testbed.Poll(t, 10*time.Second, "both DMs in a's sent log", func() (bool, string) {
		sent = jsonLines[api.Outgoing](t, a.OK("outbox", "--sent", "--json"))
		return len(sent) == 2, fmt.Sprintf("%d listed", len(sent))
	})
	for i, o := range sent {
		if o.ID != ids[i] || o.To != bID || o.Kind != "event" || o.Attempts != 1 ||
			o.DeliveredAt.Before(before) || o.DeliveredAt.After(time.Now().Add(time.Second)) {
			t.Errorf("sent[%d] = %+v, want %s to b, kind event, 1 attempt, delivered just now", i, o, ids[i])
		}
	}
	txt := a.OK("outbox", "--sent")
	for _, id := range ids {
		if !strings.Contains(txt, id+"  to "+bID+"  event  delivered ") || !strings.Contains(txt, "1 attempt\n") {
			t.Errorf("weft outbox --sent lacks %s:\n%s", id, txt)
		}
	}
	if box := a.outbox(false); len(box) != 0 {
		t.Errorf("a's outbox holds %d messages after delivery", len(box))
	}
	// b sent nothing.
	if got := jsonLines[api.Outgoing](t, b.OK("outbox", "--sent", "--json")); len(got) != 0 {
		t.Errorf("b's sent log: %+v", got)
	}
	if _, errs, code := a.Run("outbox", "--sent", "--dead"); code != 2 || !strings.Contains(errs, "exclude each other") {
		t.Errorf("weft outbox --sent --dead: exit %d, stderr %q", code, errs)
	}
}
