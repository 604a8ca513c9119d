package protocol_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

func TestSpaceID(t *testing.T) {
	names := []string{"", "general", "General", "general ", "research/llm-eval", "équipe ☕", "a\x00b"}
	seen := make(map[protocol.ID]string)
	for _, name := range names {
		id := protocol.SpaceID(name)
		if id != protocol.SpaceID(name) {
			t.Errorf("SpaceID(%q) is not deterministic", name)
		}
		if id.IsZero() {
			t.Errorf("SpaceID(%q) is zero", name)
		}
		if want := protocol.ID(sha256.Sum256([]byte("weft/space/v1\x00" + name))); id != want {
			t.Errorf("SpaceID(%q) = %s, want SHA-256 of the domain-separated name %s", name, id, want)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("SpaceID(%q) == SpaceID(%q)", name, other)
		}
		seen[id] = name
		if protocol.MessageID([]byte(name)) == id {
			t.Errorf("space ID of %q equals a message ID of the same bytes", name)
		}
	}
	// Pin one value: changing the space hash splits the network.
	if got, want := protocol.SpaceID("general").String(), "y3nbgylts2cdyvhdrsh46saw37smutccgzg7zbkdejjtimi3sedq"; got != want {
		t.Errorf("SpaceID(general) = %s, want %s", got, want)
	}
}

func TestMessageID(t *testing.T) {
	body := []byte(`{"v":1}`)
	if got, want := protocol.MessageID(body), protocol.ID(sha256.Sum256(body)); got != want {
		t.Errorf("MessageID = %s, want %s", got, want)
	}
}

func TestIDTextRoundTrip(t *testing.T) {
	for _, seed := range []string{"a", "b", "weft", strings.Repeat("x", 1000)} {
		id := protocol.MessageID([]byte(seed))
		s := id.String()
		if len(s) != protocol.IDStringLen || protocol.IDStringLen != 52 {
			t.Fatalf("len(%s) = %d, IDStringLen = %d, want 52", s, len(s), protocol.IDStringLen)
		}
		if s != strings.ToLower(s) || strings.ContainsRune(s, '=') {
			t.Errorf("%s is not lower-case unpadded base32", s)
		}
		got, err := protocol.ParseID(s)
		if err != nil || got != id {
			t.Errorf("ParseID(%s) = %s, %v", s, got, err)
		}
		text, err := id.MarshalText()
		if err != nil || string(text) != s {
			t.Errorf("MarshalText = %s, %v", text, err)
		}
		if app, err := id.AppendText([]byte("x")); err != nil || string(app) != "x"+s {
			t.Errorf("AppendText = %s, %v; want x%s", app, err, s)
		}
		var back protocol.ID
		if err := back.UnmarshalText(text); err != nil || back != id {
			t.Errorf("UnmarshalText = %s, %v", back, err)
		}

		// As a JSON value, in a struct and as a map key.
		type doc struct {
			ID   protocol.ID            `json:"id"`
			List []protocol.ID          `json:"list"`
			Map  map[protocol.ID]string `json:"map"`
		}
		in := doc{ID: id, List: []protocol.ID{id, id}, Map: map[protocol.ID]string{id: "x"}}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"id":%q,"list":[%q,%q],"map":{%q:"x"}}`, s, s, s, s); string(b) != want {
			t.Errorf("json = %s, want %s", b, want)
		}
		var out doc
		if err := json.Unmarshal(b, &out); err != nil || out.ID != id || out.List[1] != id || out.Map[id] != "x" {
			t.Errorf("json round trip = %+v, %v", out, err)
		}
	}
	if !(protocol.ID{}).IsZero() || protocol.MessageID(nil).IsZero() {
		t.Error("IsZero")
	}
}

func TestParseIDErrors(t *testing.T) {
	good := protocol.MessageID([]byte("good")).String()
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"too short", good[:51]},
		{"too long", good + "a"},
		{"much too long", strings.Repeat(good, 100)},
		{"upper case", strings.ToUpper(good)},
		{"digit 0", "0" + good[1:]},
		{"digit 1", good[:10] + "1" + good[11:]},
		{"digit 8", good[:51] + "8"},
		{"padding", good[:51] + "="},
		{"space", " " + good[1:]},
		{"non-ASCII", "é" + good[2:]},
		{"zero id", strings.Repeat("a", 52)},
		{"digit 9", "9" + good[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := protocol.ParseID(tt.in)
			wantErr(t, err, protocol.ErrBadID, "bad_id")
			if !id.IsZero() {
				t.Errorf("ParseID returned %s with its error", id)
			}
			var u protocol.ID
			if err := u.UnmarshalText([]byte(tt.in)); !errors.Is(err, protocol.ErrBadID) {
				t.Errorf("UnmarshalText err = %v", err)
			}
		})
	}
}

// TestParseIDCanonical: 52 base32 characters carry 260 bits for a 256-bit
// ID, so the last character has 4 unused bits. ParseID must refuse text
// whose unused bits are set, or one ID has 16 spellings (and a body can name
// its space or parents in a form that other parsers compare unequal).
func TestParseIDCanonical(t *testing.T) {
	id := protocol.SpaceID("general")
	s := id.String()
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	last := strings.IndexByte(alphabet, s[51])
	for low := 1; low < 16; low++ {
		alt := s[:51] + string(alphabet[last|low])
		if alt == s {
			continue
		}
		got, err := protocol.ParseID(alt)
		if err == nil {
			t.Fatalf("ParseID(%s) = %s, nil; the canonical form is %s", alt, got, s)
		}
		wantErr(t, err, protocol.ErrBadID, "bad_id")
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := protocol.DefaultLimits().Validate(); err != nil {
		t.Fatalf("DefaultLimits().Validate() = %v", err)
	}
	d := protocol.DefaultLimits()
	if d.MaxSize != 1<<20 || d.MaxSkew != 5*time.Minute {
		t.Errorf("DefaultLimits = %+v", d)
	}
	ok := []func(*protocol.Limits){
		func(l *protocol.Limits) { l.MaxSize = 1 },
		func(l *protocol.Limits) { l.MaxSize = protocol.MaxMessageSize },
		func(l *protocol.Limits) { l.MaxSkew = 0 },
		func(l *protocol.Limits) { l.MaxAge = 0 },
		func(l *protocol.Limits) { l.MaxPrev = 0 },
		func(l *protocol.Limits) { l.MaxRefs = 0 },
		func(l *protocol.Limits) { l.MaxMeta = 0 },
		func(l *protocol.Limits) { l.MaxType = 1 },
		func(l *protocol.Limits) { l.MaxMetaLen = 1 },
	}
	for i, f := range ok {
		l := protocol.DefaultLimits()
		f(&l)
		if err := l.Validate(); err != nil {
			t.Errorf("ok[%d] %+v: %v", i, l, err)
		}
	}
	bad := map[string]func(*protocol.Limits){
		"zero value":        func(l *protocol.Limits) { *l = protocol.Limits{} },
		"max size 0":        func(l *protocol.Limits) { l.MaxSize = 0 },
		"max size negative": func(l *protocol.Limits) { l.MaxSize = -1 },
		"max size too big":  func(l *protocol.Limits) { l.MaxSize = protocol.MaxMessageSize + 1 },
		"skew negative":     func(l *protocol.Limits) { l.MaxSkew = -time.Second },
		"age negative":      func(l *protocol.Limits) { l.MaxAge = -time.Second },
		"prev negative":     func(l *protocol.Limits) { l.MaxPrev = -1 },
		"refs negative":     func(l *protocol.Limits) { l.MaxRefs = -1 },
		"type zero":         func(l *protocol.Limits) { l.MaxType = 0 },
		"meta negative":     func(l *protocol.Limits) { l.MaxMeta = -1 },
		"meta len zero":     func(l *protocol.Limits) { l.MaxMetaLen = 0 },
	}
	for name, f := range bad {
		t.Run(name, func(t *testing.T) {
			l := protocol.DefaultLimits()
			f(&l)
			wantErr(t, l.Validate(), protocol.ErrMalformed, "malformed")
		})
	}
}

func TestCode(t *testing.T) {
	tests := []struct {
		err  error
		code string
	}{
		{protocol.ErrTooLarge, "too_large"},
		{protocol.ErrMalformed, "malformed"},
		{protocol.ErrVersion, "unsupported_version"},
		{protocol.ErrBadSender, "bad_sender"},
		{protocol.ErrBadSignature, "bad_signature"},
		{protocol.ErrIDMismatch, "id_mismatch"},
		{protocol.ErrClockSkew, "clock_skew"},
		{protocol.ErrExpired, "expired"},
		{protocol.ErrBadID, "bad_id"},
		{errors.New("other"), "invalid"},
		{nil, "invalid"},
	}
	for _, tt := range tests {
		if got := protocol.Code(tt.err); got != tt.code {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.code)
		}
		wrapped := fmt.Errorf("gossip: %w", fmt.Errorf("step: %w", tt.err))
		if got := protocol.Code(wrapped); got != tt.code {
			t.Errorf("Code(%v) = %q, want %q", wrapped, got, tt.code)
		}
	}
}

// TestNames pins the names other nodes must agree on.
func TestNames(t *testing.T) {
	s := protocol.SpaceID("general")
	for _, tt := range []struct{ got, want string }{
		{protocol.Topic(s), "/weft/space/1/" + s.String()},
		{protocol.Rendezvous(s), "weft/space/" + s.String()},
		{protocol.SyncProtocol, "/weft/sync/1.0.0"},
		{protocol.DHTPrefix, "/weft"},
		{protocol.MDNSService, "_weft._udp"},
		{protocol.SigningDomain, "weft/message/v1\x00"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if protocol.Version != 1 || protocol.SignatureSize != 64 || protocol.IDSize != 32 {
		t.Errorf("Version %d, SignatureSize %d, IDSize %d", protocol.Version, protocol.SignatureSize, protocol.IDSize)
	}
	if protocol.MaxWireSize != 1+10+protocol.MaxMessageSize+64 {
		t.Errorf("MaxWireSize = %d", protocol.MaxWireSize)
	}
}
