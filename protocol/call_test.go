package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

// A direct message ack carries a refusal's reason, and leaves the field out
// when there is none, so that an ack without one reads as before.
func TestDirectAckJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		ack  protocol.DirectAck
		want string
	}{
		{"ok", protocol.DirectAck{OK: true}, `{"ok":true}`},
		{"refused", protocol.DirectAck{Error: &protocol.CallError{Code: protocol.CodeRefused, Message: "clock_skew: message created in the future", Reason: "clock_skew"}},
			`{"error":{"code":"refused","message":"clock_skew: message created in the future","reason":"clock_skew"}}`},
		{"internal", protocol.DirectAck{Error: &protocol.CallError{Code: protocol.CodeInternal, Message: "recipient could not store the message"}},
			`{"error":{"code":"internal","message":"recipient could not store the message"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.ack)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("encoded %s, want %s", b, tc.want)
			}
			var got protocol.DirectAck
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.OK != tc.ack.OK || (got.Error == nil) != (tc.ack.Error == nil) || got.Error != nil && *got.Error != *tc.ack.Error {
				t.Fatalf("decoded %+v, want %+v", got, tc.ack)
			}
		})
	}
}
