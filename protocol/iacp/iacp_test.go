package iacp_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/iacp"
)

// The IACP vectors live in testdata: NAME.json is an envelope as an
// IACP agent would send it; NAME.export.json is what Export writes once
// the sender's daemon has imported and signed it. Regenerate the exports
// with: go test ./protocol/iacp -update

const vectorDir = "testdata"

// The vectors pass between two agents with fixed keys: A holds the key of
// the golden vectors (goldenSeed), B holds testKey(2).
func agents(tb testing.TB) (a, b crypto.PrivKey) {
	tb.Helper()
	return keyFromSeed(tb, mustHex(tb, goldenSeed)), testKey(tb, 2)
}

// vector is one golden envelope and what Import must read from it.
type vector struct {
	name    string
	from    string // "A" or "B": the agent whose daemon imports and signs it
	created int64  // Unix ms
	typ     string
	ttl     time.Duration
	replyTo string // the vector whose signed message this one answers
	meta    map[string]string
	content string // the payload, compacted
}

const (
	requestID = "019dfc9f-6dc0-7a1b-ac3d-4e5f60718293"
	builder   = "on-prem:cardiff-01:builder"
	reviewer  = "on-prem:cardiff-01:reviewer"
)

func vectors() []vector {
	return []vector{
		{
			name: "request", from: "A", created: 1778059800000, typ: protocol.KindRequest, ttl: time.Hour,
			meta: map[string]string{
				"iacp.id": requestID, "correlation": requestID, "iacp.sender": builder,
				"iacp.channel": "query", "iacp.intent": "query",
			},
			content: `{"capabilities":["code_review","testing"],"max_tokens":4096,"priority":"high"}`,
		},
		{
			name: "response", from: "B", created: 1778059802417, typ: protocol.KindResponse, ttl: time.Hour, replyTo: "request",
			meta: map[string]string{
				"iacp.id": "019dfc9f-7731-70c1-92e3-f40516273849", "correlation": requestID, "iacp.sender": reviewer,
				"iacp.channel": "query", "iacp.intent": "query",
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "session": "review-2026-05-06",
			},
			content: `{"status":"accepted","manifest":{"agent_id":"on-prem:cardiff-01:reviewer","tools":["terminal","file"],` +
				`"models":["Qwen2.5-8B-OQ4"],"max_context_tokens":131072},"load":0.3,"eta_seconds":120}`,
		},
		{
			name: "event", from: "B", created: 1778059875000, typ: protocol.KindEvent, ttl: 10 * time.Minute,
			meta: map[string]string{
				"iacp.id": "019dfca0-92b8-75a6-b7c8-d9e0f1a2b3c4", "correlation": requestID, "iacp.sender": reviewer,
				"iacp.channel": "notification", "iacp.intent": "notify",
			},
			content: `{"event_type":"review.complete","detail":"Review complete — 3 issues in <main.go> & 1 nit","severity":"info"}`,
		},
		{
			name: "heartbeat", from: "A", created: 1778059920250, typ: protocol.KindHeartbeat, ttl: 2 * time.Minute,
			meta: map[string]string{
				"iacp.id": "019dfca1-437a-7778-8990-0aabbccddeef", "iacp.sender": builder,
				"iacp.channel": "health", "iacp.intent": "health",
			},
			content: `{"status":"alive","load":0.3,"active_tasks":2,"version":"1.2.0"}`,
		},
		{
			// Upper-case UUIDs and a +02:00 offset: read, then written in
			// lower case and UTC.
			name: "error", from: "B", created: 1778059803001, typ: protocol.KindError,
			meta: map[string]string{
				"iacp.id": "019dfc9f-7979-7dea-9bee-fcafe0123456", "correlation": requestID, "iacp.sender": reviewer,
			},
			content: `{"code":"CAPABILITY_MISMATCH","message":"reviewer cannot run the testing capability",` +
				`"detail":{"missing":["testing"]},"retryable":false}`,
		},
	}
}

func readVector(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		tb.Fatalf("read %s (run with -update to create exports): %v", name, err)
	}
	return b
}

func mustImport(tb testing.TB, b []byte) iacp.Imported {
	tb.Helper()
	imp, err := iacp.Import(b)
	if err != nil {
		tb.Fatalf("Import: %v", err)
	}
	return imp
}

func mustExport(tb testing.TB, m *protocol.Message) []byte {
	tb.Helper()
	out, err := iacp.Export(m)
	if err != nil {
		tb.Fatalf("Export: %v", err)
	}
	return out
}

func compactJSON(tb testing.TB, b []byte) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		tb.Fatalf("compact %q: %v", b, err)
	}
	return buf.String()
}

// signedVectors imports every vector and signs it as its sender's daemon
// would, in order, so that a vector can answer an earlier one.
func signedVectors(tb testing.TB) map[string]*protocol.Message {
	tb.Helper()
	a, b := agents(tb)
	keys := map[string]crypto.PrivKey{"A": a, "B": b}
	out := make(map[string]*protocol.Message)
	for _, v := range vectors() {
		imp := mustImport(tb, readVector(tb, v.name+".json"))
		out[v.name] = sign(tb, keys[v.from], imp.Draft)
	}
	return out
}

// nativeMessage is a direct message made in weft, not imported: its export
// derives its message_id, and its correlation is not a UUID.
func nativeMessage(tb testing.TB) (*protocol.Message, protocol.Draft) {
	tb.Helper()
	a, b := agents(tb)
	to := peerOf(tb, b)
	d := protocol.Draft{
		Space:     protocol.InboxSpace(to),
		CreatedAt: time.UnixMilli(1778059980500).UTC(),
		Refs:      protocol.Refs{Nodes: []string{to.String()}, Messages: []protocol.ID{protocol.MessageID([]byte("native reply target"))}},
		Type:      protocol.KindRequest,
		TTL:       90 * time.Second,
		Meta: map[string]string{
			"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
			"tracestate":  "weft=1",
			"session":     "sess-42",
			"correlation": "call-7f3a",
			"iacp.intent": "handoff",
		},
		Content: json.RawMessage("{\n  \"task\": \"review <main.go> & tests\",\n  \"n\": [1, 2]\n}"),
	}
	return sign(tb, a, d), d
}

// checkSameDraft fails tb unless got and want are the same draft, their
// contents compared once compacted.
func checkSameDraft(tb testing.TB, got, want protocol.Draft) {
	tb.Helper()
	if g, w := compactJSON(tb, got.Content), compactJSON(tb, want.Content); g != w {
		tb.Fatalf("content:\n got %s\nwant %s", g, w)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		tb.Fatalf("created_at %s, want %s", got.CreatedAt, want.CreatedAt)
	}
	got.Content, want.Content = nil, nil
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("draft:\n got %+v\nwant %+v", got, want)
	}
}

func TestImportGolden(t *testing.T) {
	a, b := agents(t)
	peers := map[string]peer.ID{"A": peerOf(t, a), "B": peerOf(t, b)}
	signed := signedVectors(t)
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			raw := readVector(t, v.name+".json")
			imp := mustImport(t, raw)
			to := peers["A"]
			if v.from == "A" {
				to = peers["B"]
			}
			d := imp.Draft
			if imp.Recipient != to {
				t.Errorf("recipient %s, want %s", imp.Recipient, to)
			}
			if d.Space != protocol.InboxSpace(to) {
				t.Errorf("space %s, want the inbox of %s", d.Space, to)
			}
			if !reflect.DeepEqual(d.Refs.Nodes, []string{to.String()}) {
				t.Errorf("refs.nodes %v, want [%s]", d.Refs.Nodes, to)
			}
			var wantRefs []protocol.ID
			if v.replyTo != "" {
				wantRefs = []protocol.ID{signed[v.replyTo].ID}
			}
			if !reflect.DeepEqual(d.Refs.Messages, wantRefs) {
				t.Errorf("refs.messages %v, want %v", d.Refs.Messages, wantRefs)
			}
			if d.Type != v.typ {
				t.Errorf("type %q, want %q", d.Type, v.typ)
			}
			if d.TTL != v.ttl {
				t.Errorf("ttl %s, want %s", d.TTL, v.ttl)
			}
			if d.CreatedAt.UnixMilli() != v.created || d.CreatedAt.Location() != time.UTC {
				t.Errorf("created_at %s, want %s", d.CreatedAt, time.UnixMilli(v.created).UTC())
			}
			if d.Prev != nil {
				t.Errorf("prev %v, want none", d.Prev)
			}
			if !reflect.DeepEqual(d.Meta, v.meta) {
				t.Errorf("meta:\n got %v\nwant %v", d.Meta, v.meta)
			}
			if got := compactJSON(t, d.Content); got != v.content {
				t.Errorf("content:\n got %s\nwant %s", got, v.content)
			}
			if !bytes.Contains(raw, d.Content) {
				t.Errorf("content %q is not copied verbatim from the envelope", d.Content)
			}
			if imp.Envelope.MessageID != v.meta["iacp.id"] || imp.Envelope.Recipient.AgentID != to.String() {
				t.Errorf("envelope %+v", imp.Envelope)
			}
			// What a daemon does next must work: sign and check it as direct.
			if err := signed[v.name].CheckDirect(to); err != nil {
				t.Errorf("signed import is not a direct message: %v", err)
			}
		})
	}
}

func TestExportGolden(t *testing.T) {
	signed := signedVectors(t)
	native, _ := nativeMessage(t)
	type export struct {
		name string
		m    *protocol.Message
	}
	var exports []export
	for _, v := range vectors() {
		exports = append(exports, export{v.name, signed[v.name]})
	}
	exports = append(exports, export{"native", native})

	for _, e := range exports {
		t.Run(e.name, func(t *testing.T) {
			out := mustExport(t, e.m)
			if again := mustExport(t, e.m); !bytes.Equal(again, out) {
				t.Fatalf("Export is not deterministic:\n%s\n%s", out, again)
			}
			path := filepath.Join(vectorDir, e.name+".export.json")
			if *update {
				if err := os.WriteFile(path, append(bytes.Clone(out), '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readVector(t, e.name+".export.json")
			if !bytes.Equal(append(bytes.Clone(out), '\n'), want) {
				t.Errorf("export differs from %s (run with -update if the change is intended):\n got %s\nwant %s", path, out, want)
			}
			checkExport(t, e.m, out)
		})
	}
}

// checkExport reads an export as an IACP peer that knows x-weft would, with
// the standard library only: the body hashes to the ID, and the signature
// verifies over it with the key in from.
func checkExport(tb testing.TB, m *protocol.Message, out []byte) {
	tb.Helper()
	var env iacp.Envelope
	if err := json.Unmarshal(out, &env); err != nil {
		tb.Fatalf("export is not JSON: %v", err)
	}
	if env.Version != "1.0" || env.Message.Type != m.Type || env.Weft == nil {
		tb.Fatalf("export header: %+v", env)
	}
	w := env.Weft
	if w.ID != m.ID.String() || w.From != m.From || w.Body != string(m.Body) {
		tb.Fatalf("x-weft id %s from %s body %q; message %s from %s body %q", w.ID, w.From, w.Body, m.ID, m.From, m.Body)
	}
	if protocol.MessageID([]byte(w.Body)).String() != w.ID {
		tb.Errorf("SHA-256(x-weft.body) is not x-weft.id")
	}
	sig, err := hex.DecodeString(env.Sender.IdentitySig)
	if err != nil {
		tb.Fatalf("identity_sig is not hex: %v", err)
	}
	pid, err := peer.Decode(w.From)
	if err != nil {
		tb.Fatal(err)
	}
	pub, err := pid.ExtractPublicKey()
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := pub.Raw()
	if err != nil {
		tb.Fatal(err)
	}
	if !ed25519.Verify(ed25519.PublicKey(raw), append([]byte(protocol.SigningDomain), w.Body...), sig) {
		tb.Errorf("identity_sig does not verify over signing_domain || x-weft.body")
	}
	ts, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil || ts.UnixMilli() != m.CreatedAt {
		tb.Errorf("timestamp %q, created_at %d (%v)", env.Timestamp, m.CreatedAt, err)
	}
	if want, ok := m.Meta["iacp.id"]; ok && env.MessageID != want {
		tb.Errorf("message_id %s, meta iacp.id %s", env.MessageID, want)
	}
	if env.TTLSeconds != m.TTL || env.Recipient.AgentID != m.Refs.Nodes[0] {
		tb.Errorf("ttl %d recipient %s; message ttl %d refs.nodes %v", env.TTLSeconds, env.Recipient.AgentID, m.TTL, m.Refs.Nodes)
	}
	if compactJSON(tb, env.Message.Payload) != compactJSON(tb, m.Content) {
		tb.Errorf("payload %s, content %s", env.Message.Payload, m.Content)
	}
}

// TestRoundTrip imports, signs and exports each vector, then imports
// the export: every mapped field must come back.
func TestRoundTrip(t *testing.T) {
	a, b := agents(t)
	keys := map[string]crypto.PrivKey{"A": a, "B": b}
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			key := keys[v.from]
			imp1 := mustImport(t, readVector(t, v.name+".json"))
			out1 := mustExport(t, sign(t, key, imp1.Draft))
			imp2 := mustImport(t, out1)

			e1, e2 := imp1.Envelope, imp2.Envelope
			for _, f := range []struct{ name, got, want string }{
				{"message_id", e2.MessageID, e1.MessageID},
				{"correlation_id", e2.CorrelationID, e1.CorrelationID},
				{"sender.agent_id", e2.Sender.AgentID, e1.Sender.AgentID},
				{"recipient.agent_id", e2.Recipient.AgentID, e1.Recipient.AgentID},
				{"recipient.channel", e2.Recipient.Channel, e1.Recipient.Channel},
				{"message.type", e2.Message.Type, e1.Message.Type},
				{"message.intent", e2.Message.Intent, e1.Message.Intent},
				{"message.payload", compactJSON(t, e2.Message.Payload), compactJSON(t, e1.Message.Payload)},
			} {
				if f.got != f.want {
					t.Errorf("%s: %q after the round trip, %q before", f.name, f.got, f.want)
				}
			}
			if e2.TTLSeconds != e1.TTLSeconds {
				t.Errorf("ttl_seconds %d after, %d before", e2.TTLSeconds, e1.TTLSeconds)
			}
			t1, _ := time.Parse(time.RFC3339Nano, e1.Timestamp)
			t2, _ := time.Parse(time.RFC3339Nano, e2.Timestamp)
			if !t1.Equal(t2) {
				t.Errorf("timestamp %s after, %s before", e2.Timestamp, e1.Timestamp)
			}
			checkSameDraft(t, imp2.Draft, imp1.Draft)
			if imp2.Recipient != imp1.Recipient {
				t.Errorf("recipient %s after, %s before", imp2.Recipient, imp1.Recipient)
			}

			// One round later the export is a fixed point: the payload is
			// compact, so the same draft signs to the same bytes.
			out2 := mustExport(t, sign(t, key, imp2.Draft))
			out3 := mustExport(t, sign(t, key, mustImport(t, out2).Draft))
			if !bytes.Equal(out3, out2) {
				t.Errorf("export is not a fixed point:\n%s\n%s", out2, out3)
			}
		})
	}

	t.Run("native", func(t *testing.T) {
		m, d := nativeMessage(t)
		imp := mustImport(t, mustExport(t, m))
		want := d
		want.Meta = make(map[string]string)
		for k, v := range d.Meta {
			want.Meta[k] = v
		}
		want.Meta["iacp.id"] = imp.Envelope.MessageID // derived on export
		want.Meta["iacp.sender"] = m.From
		checkSameDraft(t, imp.Draft, want)
		if imp.Envelope.CorrelationID != "" {
			t.Errorf("correlation %q is not a UUID but was written as correlation_id", d.Meta["correlation"])
		}
		// Re-exported, it keeps the derived ID.
		a, _ := agents(t)
		again := mustImport(t, mustExport(t, sign(t, a, imp.Draft)))
		if again.Envelope.MessageID != imp.Envelope.MessageID {
			t.Errorf("message_id %s on re-export, %s before", again.Envelope.MessageID, imp.Envelope.MessageID)
		}
	})
}

func TestDerivedMessageID(t *testing.T) {
	m, d := nativeMessage(t)
	var env iacp.Envelope
	if err := json.Unmarshal(mustExport(t, m), &env); err != nil {
		t.Fatal(err)
	}
	u := mustHex(t, strings.ReplaceAll(env.MessageID, "-", ""))
	var ts [8]byte
	copy(ts[2:], u[:6])
	if got := int64(binary.BigEndian.Uint64(ts[:])); got != m.CreatedAt {
		t.Errorf("unix_ts_ms %d, created_at %d", got, m.CreatedAt)
	}
	if u[6]>>4 != 7 || u[8]>>6 != 0b10 {
		t.Errorf("%s: version %d, variant %b; want 7 and 10", env.MessageID, u[6]>>4, u[8]>>6)
	}
	id := m.ID
	if u[6]&0x0f != id[0]&0x0f || u[7] != id[1] || u[8]&0x3f != id[2]&0x3f || !bytes.Equal(u[9:], id[3:10]) {
		t.Errorf("%s does not carry bytes 0-9 of %x", env.MessageID, id[:10])
	}

	// Another message at the same millisecond gets another ID.
	a, _ := agents(t)
	d.Content = json.RawMessage(`{"task":"other"}`)
	var env2 iacp.Envelope
	if err := json.Unmarshal(mustExport(t, sign(t, a, d)), &env2); err != nil {
		t.Fatal(err)
	}
	if env2.MessageID == env.MessageID || env2.MessageID[:14] != env.MessageID[:14] {
		t.Errorf("same created_at, other message: %s and %s", env.MessageID, env2.MessageID)
	}
}

func TestImportForms(t *testing.T) {
	_, b := agents(t)
	to := peerOf(t, b)
	cid, err := peer.ToCid(to).StringOfBase('b')
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  func(map[string]any)
		check func(t *testing.T, imp iacp.Imported)
	}{
		{"recipient as CID", func(m map[string]any) { obj(m, "recipient")["agent_id"] = cid },
			func(t *testing.T, imp iacp.Imported) {
				if imp.Recipient != to || imp.Draft.Refs.Nodes[0] != to.String() || imp.Envelope.Recipient.AgentID != to.String() {
					t.Errorf("recipient %s / %v, want %s", imp.Recipient, imp.Draft.Refs.Nodes, to)
				}
			}},
		{"sub-millisecond time", func(m map[string]any) { m["timestamp"] = "2026-05-06T09:30:00.123999999Z" },
			func(t *testing.T, imp iacp.Imported) {
				if got := imp.Draft.CreatedAt.UnixMilli(); got != 1778059800123 {
					t.Errorf("created_at %d", got)
				}
			}},
		{"nulls for optional fields", func(m map[string]any) {
			m["correlation_id"], m["ttl_seconds"], m["x-weft"] = nil, nil, nil
			obj(m, "recipient")["channel"], obj(m, "message")["intent"] = nil, nil
		}, func(t *testing.T, imp iacp.Imported) {
			if imp.Draft.TTL != 0 || len(imp.Draft.Meta) != 2 {
				t.Errorf("ttl %s meta %v", imp.Draft.TTL, imp.Draft.Meta)
			}
		}},
		{"x-weft correlation without correlation_id", func(m map[string]any) {
			delete(m, "correlation_id")
			m["x-weft"] = map[string]any{"meta": map[string]any{"correlation": "call-1"}}
		}, func(t *testing.T, imp iacp.Imported) {
			if imp.Draft.Meta["correlation"] != "call-1" {
				t.Errorf("meta %v", imp.Draft.Meta)
			}
		}},
		{"later minor version", func(m map[string]any) { m["version"] = "1.42" },
			func(t *testing.T, imp iacp.Imported) {
				if imp.Envelope.Version != "1.42" {
					t.Errorf("version %q", imp.Envelope.Version)
				}
			}},
		{"custom channel", func(m map[string]any) { obj(m, "recipient")["channel"] = "x-review" },
			func(t *testing.T, imp iacp.Imported) {
				if imp.Draft.Meta["iacp.channel"] != "x-review" {
					t.Errorf("meta %v", imp.Draft.Meta)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustImport(t, editEnvelope(t, tt.edit)))
		})
	}
}

// baseEnvelope is a minimal valid envelope, as a value to edit.
func baseEnvelope(tb testing.TB) map[string]any {
	tb.Helper()
	_, b := agents(tb)
	return map[string]any{
		"version":        "1.0",
		"message_id":     requestID,
		"correlation_id": requestID,
		"sender":         map[string]any{"agent_id": builder},
		"recipient":      map[string]any{"agent_id": peerOf(tb, b).String(), "channel": "query"},
		"timestamp":      "2026-05-06T09:30:00Z",
		"ttl_seconds":    3600,
		"message":        map[string]any{"type": "request", "intent": "query", "payload": map[string]any{"q": 1}},
	}
}

func obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

// editEnvelope returns the base envelope changed by edit.
func editEnvelope(tb testing.TB, edit func(map[string]any)) []byte {
	tb.Helper()
	m := baseEnvelope(tb)
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

type badCase struct {
	name     string
	in       []byte
	sentinel error
	msg      string // the error names the problem
}

func badCases(tb testing.TB) []badCase {
	tb.Helper()
	e := func(edit func(map[string]any)) []byte { return editEnvelope(tb, edit) }
	base := e(func(map[string]any) {})
	replace := func(old, new string) []byte {
		if !bytes.Contains(base, []byte(old)) {
			tb.Fatalf("base envelope has no %s", old)
		}
		return bytes.Replace(base, []byte(old), []byte(new), 1)
	}
	bigMeta := make(map[string]any)
	for i := range 63 {
		bigMeta["k"+strconv.Itoa(i)] = "v"
	}
	mal, tooBig, badVer := protocol.ErrMalformed, protocol.ErrTooLarge, protocol.ErrVersion
	return []badCase{
		{"malformed JSON", []byte(`{"version":"1.0",`), mal, "iacp envelope"},
		{"not an object", []byte(`[1,2]`), mal, "not a JSON object"},
		{"empty", nil, mal, "not a JSON object"},
		{"data after the object", append(bytes.Clone(base), " {}"...), mal, "data after"},
		{"not UTF-8", replace(builder, "b\xffuilder"), mal, "not UTF-8"},
		{"oversized", append(bytes.Clone(base), bytes.Repeat([]byte(" "), iacp.MaxSize)...), tooBig, "limit"},
		{"payload too large", e(func(m map[string]any) {
			obj(m, "message")["payload"] = map[string]any{"x": strings.Repeat("a", protocol.MaxMessageSize)}
		}), tooBig, "message.payload"},
		{"repeated key", replace(`"version":"1.0"`, `"version":"1.0","version":"1.0"`), mal, `repeated key "version"`},
		{"key differs only in case", replace(`"message_id"`, `"Message_ID"`), mal, `key "Message_ID" is not "message_id"`},
		{"nested key differs only in case", replace(`"agent_id":"on-prem`, `"Agent_ID":"on-prem`), mal, "iacp sender"},
		{"both envelope forms", e(func(m map[string]any) { m["envelope"] = map[string]any{} }), mal, "use one form"},
		{"missing version", e(func(m map[string]any) { delete(m, "version") }), mal, "iacp version: malformed message: missing"},
		{"version 2", e(func(m map[string]any) { m["version"] = "2.0" }), badVer, "IACP 1.x"},
		{"version without minor", e(func(m map[string]any) { m["version"] = "1" }), mal, "MAJOR.MINOR"},
		{"version as number", e(func(m map[string]any) { m["version"] = 1.0 }), mal, "must be a string, not a number"},
		{"missing message_id", e(func(m map[string]any) { delete(m, "message_id") }), mal, "iacp message_id: malformed message: missing"},
		{"message_id is UUIDv4", e(func(m map[string]any) { m["message_id"] = "9b2f4c1e-3d5a-4f6b-8c7d-0e1f2a3b4c5d" }), mal, "version 4 UUID, want version 7"},
		{"message_id not a UUID", e(func(m map[string]any) { m["message_id"] = "msg-1" }), mal, "not a UUID"},
		{"message_id bad hex", e(func(m map[string]any) { m["message_id"] = "019acb7b-3g5e-7b0c-9d4f-8g5e6f7b9c0d" }), mal, "not a UUID"},
		{"message_id bad variant", e(func(m map[string]any) { m["message_id"] = "019dfc9f-6dc0-7a1b-cc3d-4e5f60718293" }), mal, "variant"},
		{"correlation_id not a UUID", e(func(m map[string]any) { m["correlation_id"] = "chain-1" }), mal, "iacp correlation_id"},
		{"missing sender", e(func(m map[string]any) { delete(m, "sender") }), mal, "iacp sender: malformed message: missing"},
		{"sender not an object", e(func(m map[string]any) { m["sender"] = "builder" }), mal, "must be a JSON object, not a string"},
		{"missing sender.agent_id", e(func(m map[string]any) { obj(m, "sender")["agent_id"] = "" }), mal, "sender.agent_id: malformed message: missing"},
		{"long sender.agent_id", e(func(m map[string]any) { obj(m, "sender")["agent_id"] = strings.Repeat("a", 1025) }), mal, "sender.agent_id"},
		{"missing recipient", e(func(m map[string]any) { delete(m, "recipient") }), mal, "iacp recipient: malformed message: missing"},
		{"recipient is an agent name", e(func(m map[string]any) { obj(m, "recipient")["agent_id"] = "reviewer-02" }), mal, "not a libp2p peer ID"},
		{"recipient wildcard", e(func(m map[string]any) { obj(m, "recipient")["agent_id"] = "*" }), mal, "not a libp2p peer ID"},
		{"bad channel", e(func(m map[string]any) { obj(m, "recipient")["channel"] = "two words" }), mal, "recipient.channel"},
		{"missing timestamp", e(func(m map[string]any) { delete(m, "timestamp") }), mal, "timestamp: malformed message: missing"},
		{"bad timestamp", e(func(m map[string]any) { m["timestamp"] = "2026-05-06 09:30" }), mal, "not an RFC 3339 time"},
		{"timestamp before 1970", e(func(m map[string]any) { m["timestamp"] = "1969-12-31T23:59:59Z" }), mal, "not after 1970"},
		{"ttl negative", e(func(m map[string]any) { m["ttl_seconds"] = -1 }), mal, "ttl_seconds: malformed message: -1 outside 1.."},
		{"ttl zero", e(func(m map[string]any) { m["ttl_seconds"] = 0 }), mal, "0 outside 1.."},
		{"ttl fraction", e(func(m map[string]any) { m["ttl_seconds"] = 1.5 }), mal, "not a whole number"},
		{"ttl string", e(func(m map[string]any) { m["ttl_seconds"] = "3600" }), mal, "not a whole number"},
		{"ttl too long", e(func(m map[string]any) { m["ttl_seconds"] = protocol.MaxTTL + 1 }), mal, "outside 1.."},
		{"missing message", e(func(m map[string]any) { delete(m, "message") }), mal, "iacp message: malformed message: missing"},
		{"missing type", e(func(m map[string]any) { delete(obj(m, "message"), "type") }), mal, "message.type: malformed message: missing"},
		{"unknown kind", e(func(m map[string]any) { obj(m, "message")["type"] = "notify" }), mal, `"notify" is not one of request, response, event, error, heartbeat`},
		{"bad intent", e(func(m map[string]any) { obj(m, "message")["intent"] = "-query" }), mal, "message.intent"},
		{"missing payload", e(func(m map[string]any) { delete(obj(m, "message"), "payload") }), mal, "message.payload: malformed message: missing"},
		{"null payload", e(func(m map[string]any) { obj(m, "message")["payload"] = nil }), mal, "message.payload: malformed message: missing"},
		{"array payload", e(func(m map[string]any) { obj(m, "message")["payload"] = []int{1} }), mal, "must be a JSON object, not an array"},
		{"string payload", e(func(m map[string]any) { obj(m, "message")["payload"] = "hi" }), mal, "must be a JSON object, not a string"},
		{"x-weft not an object", e(func(m map[string]any) { m["x-weft"] = []int{} }), mal, "iacp x-weft"},
		{"x-weft.reply_to not an ID", e(func(m map[string]any) { m["x-weft"] = map[string]any{"reply_to": "abc"} }), mal, "x-weft.reply_to"},
		{"x-weft.meta sets iacp.id", e(func(m map[string]any) {
			m["x-weft"] = map[string]any{"meta": map[string]any{"iacp.id": requestID}}
		}), mal, `key "iacp.id" is set by the envelope`},
		{"x-weft.meta sets correlation twice", e(func(m map[string]any) {
			m["x-weft"] = map[string]any{"meta": map[string]any{"correlation": "x"}}
		}), mal, `key "correlation" is set by the envelope`},
		{"x-weft.meta local key", e(func(m map[string]any) {
			m["x-weft"] = map[string]any{"meta": map[string]any{"local.x": "1"}}
		}), mal, "is local"},
		{"x-weft.meta not strings", e(func(m map[string]any) {
			m["x-weft"] = map[string]any{"meta": map[string]any{"n": 1}}
		}), mal, "must map names to strings"},
		{"x-weft.meta bad key", e(func(m map[string]any) {
			m["x-weft"] = map[string]any{"meta": map[string]any{"a b": "1"}}
		}), mal, "bad meta key"},
		{"x-weft.meta too many", e(func(m map[string]any) {
			m["x-weft"] = map[string]any{"meta": bigMeta}
		}), mal, "meta keys, at most 64"},
	}
}

func TestImportErrors(t *testing.T) {
	for _, c := range badCases(t) {
		t.Run(c.name, func(t *testing.T) {
			imp, err := iacp.Import(c.in)
			if !reflect.DeepEqual(imp, iacp.Imported{}) {
				t.Errorf("Import returned %+v with %v", imp, err)
			}
			if err == nil || !errors.Is(err, c.sentinel) {
				t.Fatalf("err = %v, want it to wrap %v", err, c.sentinel)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %q, want it to say %q", err, c.msg)
			}
		})
	}
}

func TestExportErrors(t *testing.T) {
	a, b := agents(t)
	to := peerOf(t, b)
	direct := func(edit func(*protocol.Draft)) *protocol.Message {
		d := protocol.Draft{
			Space:     protocol.InboxSpace(to),
			CreatedAt: created,
			Refs:      protocol.Refs{Nodes: []string{to.String()}},
			Type:      protocol.KindEvent,
			Content:   json.RawMessage(`{"x":1}`),
		}
		edit(&d)
		return sign(t, a, d)
	}
	meta := func(k, v string) func(*protocol.Draft) {
		return func(d *protocol.Draft) { d.Meta = map[string]string{k: v} }
	}
	unsigned := *direct(func(*protocol.Draft) {})
	unsigned.Sig = nil
	tests := []struct {
		name     string
		m        *protocol.Message
		sentinel error
		msg      string
	}{
		{"not addressed", sign(t, a, minimalDraft()), protocol.ErrMalformed, "names one recipient"},
		{"not in the inbox", direct(func(d *protocol.Draft) { d.Space = protocol.SpaceID("general") }), protocol.ErrMalformed, "inbox"},
		{"not a kind", direct(func(d *protocol.Draft) { d.Type = "text" }), protocol.ErrMalformed, "is not one of"},
		{"two replies", direct(func(d *protocol.Draft) {
			d.Refs.Messages = []protocol.ID{protocol.MessageID([]byte("1")), protocol.MessageID([]byte("2"))}
		}), protocol.ErrMalformed, "answers 2 messages"},
		{"iacp.id not a UUID", direct(meta("iacp.id", "m-1")), protocol.ErrMalformed, "not a UUID"},
		{"iacp.id not v7", direct(meta("iacp.id", "9b2f4c1e-3d5a-4f6b-8c7d-0e1f2a3b4c5d")), protocol.ErrMalformed, "want version 7"},
		{"bad iacp.channel", direct(meta("iacp.channel", "two words")), protocol.ErrMalformed, `meta "iacp.channel"`},
		{"bad iacp.intent", direct(meta("iacp.intent", "")), protocol.ErrMalformed, `meta "iacp.intent"`},
		{"empty iacp.sender", direct(meta("iacp.sender", "")), protocol.ErrMalformed, `meta "iacp.sender"`},
		{"unsigned", &unsigned, protocol.ErrBadSignature, "signature is 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := iacp.Export(tt.m)
			if out != nil || err == nil || !errors.Is(err, tt.sentinel) {
				t.Fatalf("Export = %s, %v; want an error wrapping %v", out, err, tt.sentinel)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %q, want it to say %q", err, tt.msg)
			}
		})
	}
}

// FuzzImport feeds arbitrary bytes to Import. It may not panic or
// change its input, and its errors must carry a code. Whatever it accepts
// must sign as a direct message and export, and the export must import
// back to the same draft.
func FuzzImport(f *testing.F) {
	for _, v := range vectors() {
		f.Add(readVector(f, v.name+".json"))
		f.Add(readVector(f, v.name+".export.json"))
	}
	f.Add(readVector(f, "native.export.json"))
	for _, c := range badCases(f) {
		if len(c.in) < 64<<10 {
			f.Add(c.in)
		}
	}
	key, _ := agents(f)
	lim := protocol.DefaultLimits()

	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		imp, err := iacp.Import(b)
		if !bytes.Equal(b, in) {
			t.Fatalf("Import modified its input")
		}
		if err != nil {
			if !reflect.DeepEqual(imp, iacp.Imported{}) {
				t.Fatalf("Import returned an import and %v", err)
			}
			if protocol.Code(err) == "invalid" {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		m, err := protocol.Sign(key, imp.Draft, lim)
		if errors.Is(err, protocol.ErrTooLarge) {
			return // the header pushed a payload near the limit over it
		}
		if err != nil {
			t.Fatalf("Sign refused an imported draft: %v", err)
		}
		if err := m.CheckDirect(imp.Recipient); err != nil {
			t.Fatalf("signed import is not direct: %v", err)
		}
		out, err := iacp.Export(m)
		if err != nil {
			t.Fatalf("Export refused a signed import: %v", err)
		}
		back, err := iacp.Import(out)
		if err != nil {
			t.Fatalf("Import refused its own export: %v\n%s", err, out)
		}
		if back.Recipient != imp.Recipient {
			t.Fatalf("recipient %s after export, %s before", back.Recipient, imp.Recipient)
		}
		checkSameDraft(t, back.Draft, imp.Draft)
	})
}
