package reconcile

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"

	"github.com/weftmesh/weft/protocol"
)

func testIDs(n int, seed byte) []protocol.ID {
	out := make([]protocol.ID, n)
	for i := range out {
		out[i] = protocol.MessageID([]byte{seed, byte(i), byte(i >> 8)})
	}
	return out
}

func TestWireRoundTrip(t *testing.T) {
	ids := testIDs(5, 1)
	hellos := []hello{
		{space: ids[0], floor: protocol.MinSyncKey, count: 0},
		{space: ids[1], floor: protocol.SyncKey{Time: 1_700_000_000_000, ID: ids[4]}, count: 12345, fp: protocol.Fingerprint{1, 2, 3}, heads: ids[2:]},
	}
	for _, h := range hellos {
		got, err := decodeHello(h.encode())
		if err != nil || !reflect.DeepEqual(*got, h) {
			t.Errorf("hello %+v → %+v, %v", h, got, err)
		}
	}
	replies := []reply{{status: statusInSync}, {status: statusBusy}, {status: statusReconcile, floor: protocol.SyncKey{Time: -5}, heads: ids[:2]}}
	for _, r := range replies {
		got, err := decodeReply(r.encode())
		if err != nil || !reflect.DeepEqual(*got, r) {
			t.Errorf("reply %+v → %+v, %v", r, got, err)
		}
	}
	for _, floor := range []protocol.SyncKey{protocol.MinSyncKey, {}, {Time: 1_700_000_000_000, ID: ids[4]}} {
		x := exchange{
			ranges: []rng{
				{upper: protocol.SyncKey{Time: 1_700_000_000_001, ID: ids[0]}, mode: modeFingerprint, count: 7, fp: protocol.Fingerprint{9}},
				{upper: protocol.SyncKey{Time: 1_700_000_000_001, ID: ids[1]}, mode: modeIDList, ids: ids[2:4]},
				{upper: protocol.SyncKey{Time: 1_800_000_000_000}, mode: modeSkip},
				{upper: protocol.MaxSyncKey, mode: modeIDList},
			},
			wants:   ids[:3],
			missing: ids[3:],
			msgs:    [][]byte{bytes.Repeat([]byte("m"), minMessageWire), bytes.Repeat([]byte("x"), 300)},
		}
		if !x.ranges[0].upper.Less(x.ranges[1].upper) {
			x.ranges[0].upper.ID, x.ranges[1].upper.ID = x.ranges[1].upper.ID, x.ranges[0].upper.ID
		}
		got, err := decodeExchange(x.encode(floor), floor)
		if err != nil || !reflect.DeepEqual(*got, x) {
			t.Errorf("floor %v: exchange → %+v, %v", floor, got, err)
		}
	}
	empty := exchange{}
	if got, err := decodeExchange(empty.encode(protocol.SyncKey{}), protocol.SyncKey{}); err != nil || !got.empty() {
		t.Errorf("empty exchange → %+v, %v", got, err)
	}
}

func TestWireRejects(t *testing.T) {
	ids := testIDs(2, 2)
	zero := protocol.SyncKey{}
	good := (&exchange{ranges: []rng{{upper: protocol.MaxSyncKey, mode: modeFingerprint, count: 1}}, wants: ids}).encode(zero)
	cases := map[string][]byte{
		"empty":               {},
		"trailing bytes":      append(append([]byte(nil), good...), 0),
		"truncated":           good[:len(good)-1],
		"bad mode":            (&exchange{ranges: []rng{{upper: protocol.MaxSyncKey, mode: 7}}}).encode(zero),
		"not up to max":       (&exchange{ranges: []rng{{upper: protocol.SyncKey{Time: 9}, mode: modeSkip}}}).encode(zero),
		"bound not above lo":  (&exchange{ranges: []rng{{upper: protocol.SyncKey{Time: 0}, mode: modeSkip}, {upper: protocol.MaxSyncKey}}}).encode(zero),
		"huge id count":       {0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge message":        {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"non-canonical bound": {1, 5, 2, 7, 0, 0},
		"tiny message":        {0, 0, 0, 1, 3, 'a', 'b', 'c'},
		"too many ranges":     append([]byte{0xff, 0xff, 0xff, 0x7f}, make([]byte, 64)...),
	}
	for name, b := range cases {
		if _, err := decodeExchange(b, zero); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := decodeHello([]byte{version + 1}); err == nil {
		t.Error("hello of another version decoded")
	}
	if _, err := decodeReply([]byte{9}); err == nil {
		t.Error("reply with unknown status decoded")
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	_ = writeFrame(w, make([]byte, 100))
	_ = w.Flush()
	if _, err := readFrame(bufio.NewReader(&buf), 99); err == nil {
		t.Error("frame over the limit read")
	}
}

// FuzzDecode: no input makes the decoders panic, and whatever decodes
// re-encodes to something that decodes to the same.
func FuzzDecode(f *testing.F) {
	ids := testIDs(3, 3)
	zero := protocol.SyncKey{}
	f.Add((&exchange{ranges: []rng{{upper: protocol.MaxSyncKey, mode: modeIDList, ids: ids}}, wants: ids, msgs: [][]byte{bytes.Repeat([]byte("m"), minMessageWire)}}).encode(zero))
	f.Add((&hello{space: ids[0], heads: ids}).encode())
	f.Add((&reply{status: statusReconcile, heads: ids}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if x, err := decodeExchange(b, zero); err == nil {
			y, err := decodeExchange(x.encode(zero), zero)
			if err != nil || !reflect.DeepEqual(x, y) {
				t.Fatalf("exchange re-encoding: %v", err)
			}
		}
		if h, err := decodeHello(b); err == nil {
			if g, err := decodeHello(h.encode()); err != nil || !reflect.DeepEqual(h, g) {
				t.Fatalf("hello re-encoding: %v", err)
			}
		}
		if r, err := decodeReply(b); err == nil {
			if g, err := decodeReply(r.encode()); err != nil || !reflect.DeepEqual(r, g) {
				t.Fatalf("reply re-encoding: %v", err)
			}
		}
	})
}
