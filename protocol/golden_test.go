package protocol_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the vectors defined in golden_test.go")

const goldenPath = "testdata/golden.json"

// goldenFile is the layout of testdata/golden.json. It is meant to be read by
// other implementations: everything in it is plain JSON, hex or text.
type goldenFile struct {
	Comment       string         `json:"comment"`
	Seed          string         `json:"seed"`           // hex, 32-byte Ed25519 seed (RFC 8032)
	PublicKey     string         `json:"public_key"`     // hex, 32-byte raw Ed25519 public key
	Sender        string         `json:"sender"`         // libp2p peer ID of the key
	SigningDomain string         `json:"signing_domain"` // prepended to the body before signing
	Vectors       []goldenVector `json:"vectors"`
}

type goldenVector struct {
	Name      string      `json:"name"`
	SpaceName string      `json:"space_name"`
	Space     string      `json:"space"` // SpaceID(space_name), text
	Draft     goldenDraft `json:"draft"`
	Body      string      `json:"body"`      // the exact signed body bytes
	Wire      string      `json:"wire"`      // hex
	Signature string      `json:"signature"` // hex
	ID        string      `json:"id"`
}

type goldenDraft struct {
	CreatedAt  int64             `json:"created_at"` // Unix ms
	Prev       []string          `json:"prev,omitempty"`
	RefsMsgs   []string          `json:"refs_messages,omitempty"`
	RefsNodes  []string          `json:"refs_nodes,omitempty"`
	Type       string            `json:"type"`
	TTLSeconds int64             `json:"ttl_seconds,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Content    string            `json:"content"` // exact bytes handed to Sign, white space included
}

const goldenSeed = "776566742d676f6c64656e2d766563746f72732d7365656428763129000102ff"

// goldenInputs are the vectors' inputs; outputs are computed by Sign.
func goldenInputs(tb testing.TB) []goldenVector {
	tb.Helper()
	node2 := peerOf(tb, testKey(tb, 2)).String()
	node3 := peerOf(tb, testKey(tb, 3)).String()
	p1 := protocol.MessageID([]byte("golden parent 1")).String()
	p2 := protocol.MessageID([]byte("golden parent 2")).String()
	r1 := protocol.MessageID([]byte("golden reply target")).String()
	return []goldenVector{
		{
			Name:      "minimal-text",
			SpaceName: "general",
			Draft: goldenDraft{
				CreatedAt: 1767225600000,
				Type:      "text",
				Content:   `{"text":"hello, weft"}`,
			},
		},
		{
			Name:      "all-header-fields",
			SpaceName: "research/llm-eval",
			Draft: goldenDraft{
				CreatedAt:  1767225661234,
				Prev:       []string{p1, p2},
				RefsMsgs:   []string{r1},
				RefsNodes:  []string{node2, node3},
				Type:       "task.result",
				TTLSeconds: 3600,
				Meta:       map[string]string{"model": "m-7b", "agent": "planner", "lang": "en"},
				Content:    `{"status":"done","score":0.93,"items":[1,2,3]}`,
			},
		},
		{
			Name:      "unicode-nested-whitespace",
			SpaceName: "équipe ☕",
			Draft: goldenDraft{
				CreatedAt: 1767225722000,
				Type:      "text",
				Content: "\n\t  {\n  \"text\" : \"héllo wörld — 你好 🌍\",\n  \"escaped\": \"\\u00e9\\n\\\"q\\\"\",\n" +
					"  \"nested\" : { \"a\" : [ 1, 2.50, { \"b\" : null } ], \"c\" : { \"d\" : { } } },\n  \"empty\" : [ ]\n}  \r\n",
			},
		},
		{
			Name:      "html-chars",
			SpaceName: "general",
			Draft: goldenDraft{
				CreatedAt: 1767225783000,
				Type:      "text/html<>&",
				Meta:      map[string]string{"q": "a<b && c>d"},
				Content:   `{"html":"<p>fish & chips</p>","cmp":"1 < 2 > 0","amp":"&amp;"}`,
			},
		},
	}
}

func (g goldenDraft) draft(tb testing.TB, spaceName string) protocol.Draft {
	tb.Helper()
	d := protocol.Draft{
		Space:     protocol.SpaceID(spaceName),
		CreatedAt: time.UnixMilli(g.CreatedAt),
		Type:      g.Type,
		TTL:       time.Duration(g.TTLSeconds) * time.Second,
		Meta:      g.Meta,
		Content:   json.RawMessage(g.Content),
		Refs:      protocol.Refs{Nodes: g.RefsNodes},
	}
	for _, s := range g.Prev {
		d.Prev = append(d.Prev, mustParseID(tb, s))
	}
	for _, s := range g.RefsMsgs {
		d.Refs.Messages = append(d.Refs.Messages, mustParseID(tb, s))
	}
	return d
}

// computeGolden fills in each vector's outputs by signing its inputs.
func computeGolden(tb testing.TB, seed []byte, in []goldenVector) goldenFile {
	tb.Helper()
	key := keyFromSeed(tb, seed)
	raw, err := key.GetPublic().Raw()
	if err != nil {
		tb.Fatal(err)
	}
	f := goldenFile{
		Comment: "weft protocol golden vectors. body = the exact signed bytes; id = lower-case unpadded base32 of " +
			"SHA-256(body); signature = Ed25519(seed, signing_domain || body); wire = 0x01 || uvarint(len(body)) || " +
			"body || signature. Regenerate with: go test ./protocol -run Golden -update",
		Seed:          hex.EncodeToString(seed),
		PublicKey:     hex.EncodeToString(raw),
		Sender:        peerOf(tb, key).String(),
		SigningDomain: protocol.SigningDomain,
	}
	for _, v := range in {
		m, err := protocol.Sign(key, v.Draft.draft(tb, v.SpaceName), protocol.DefaultLimits())
		if err != nil {
			tb.Fatalf("%s: Sign: %v", v.Name, err)
		}
		v.Space = protocol.SpaceID(v.SpaceName).String()
		v.Body = string(m.Body)
		v.Wire = hex.EncodeToString(m.Encode())
		v.Signature = hex.EncodeToString(m.Sig)
		v.ID = m.ID.String()
		f.Vectors = append(f.Vectors, v)
	}
	return f
}

func marshalGolden(tb testing.TB, f goldenFile) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep bodies readable; the file is for people too
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func readGolden(tb testing.TB) goldenFile {
	tb.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		tb.Fatalf("read golden vectors (run with -update to create them): %v", err)
	}
	var f goldenFile
	if err := json.Unmarshal(b, &f); err != nil {
		tb.Fatalf("parse %s: %v", goldenPath, err)
	}
	return f
}

func TestGolden(t *testing.T) {
	if *update {
		f := computeGolden(t, mustHex(t, goldenSeed), goldenInputs(t))
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, marshalGolden(t, f), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d vectors)", goldenPath, len(f.Vectors))
	}
	stored := readGolden(t)

	// The file's inputs must be the ones defined here, so -update is the
	// only way to change it.
	var names, wantNames []string
	for _, v := range stored.Vectors {
		names = append(names, v.Name)
	}
	for _, v := range goldenInputs(t) {
		wantNames = append(wantNames, v.Name)
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("golden vectors %v, code defines %v; run with -update", names, wantNames)
	}

	// Regenerate from the file's own inputs, as another implementation would.
	got := computeGolden(t, mustHex(t, stored.Seed), stored.Vectors)
	if got.PublicKey != stored.PublicKey || got.Sender != stored.Sender || got.SigningDomain != stored.SigningDomain {
		t.Fatalf("key: got %s / %s / %q, stored %s / %s / %q", got.PublicKey, got.Sender, got.SigningDomain,
			stored.PublicKey, stored.Sender, stored.SigningDomain)
	}
	for i, want := range stored.Vectors {
		g := got.Vectors[i]
		t.Run(want.Name, func(t *testing.T) {
			if g.Space != want.Space {
				t.Errorf("space = %s, stored %s", g.Space, want.Space)
			}
			if g.Body != want.Body {
				t.Errorf("body:\n got %s\nwant %s", g.Body, want.Body)
			}
			if g.Signature != want.Signature {
				t.Errorf("signature:\n got %s\nwant %s", g.Signature, want.Signature)
			}
			if g.ID != want.ID {
				t.Errorf("id = %s, stored %s", g.ID, want.ID)
			}
			if g.Wire != want.Wire {
				t.Errorf("wire:\n got %s\nwant %s", g.Wire, want.Wire)
			}

			createdAt := time.UnixMilli(want.Draft.CreatedAt)
			m, err := protocol.Validate(mustHex(t, want.Wire), createdAt.Add(1500*time.Millisecond), protocol.DefaultLimits())
			if err != nil {
				t.Fatalf("Validate stored wire: %v", err)
			}
			if m.ID.String() != want.ID || string(m.Body) != want.Body || m.Sender().String() != stored.Sender {
				t.Errorf("Validate: id %s body %s sender %s", m.ID, m.Body, m.Sender())
			}
			if m.Space.String() != want.Space || m.CreatedAt != want.Draft.CreatedAt || m.Type != want.Draft.Type ||
				m.TTL != want.Draft.TTLSeconds {
				t.Errorf("Validate: header %+v does not match draft %+v", m.Header, want.Draft)
			}
		})
	}

	// The file is exactly what -update would write.
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := marshalGolden(t, computeGolden(t, mustHex(t, goldenSeed), goldenInputs(t))); !bytes.Equal(raw, want) {
		t.Errorf("%s differs from what -update would write; run go test ./protocol -run Golden -update", goldenPath)
	}
}

// TestGoldenForeign checks the golden vectors using only the documented
// algorithm and the standard library (no libp2p, no package decoder), as an
// implementation in another language would.
func TestGoldenForeign(t *testing.T) {
	f := readGolden(t)
	seed := mustHex(t, f.Seed)
	pub := ed25519.PublicKey(mustHex(t, f.PublicKey))
	if derived := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey); !derived.Equal(pub) {
		t.Fatalf("public_key does not derive from seed per RFC 8032")
	}
	// A libp2p Ed25519 peer ID is base58btc(identity multihash of the
	// protobuf PublicKey{Type: Ed25519, Data: raw}).
	wantPID := append([]byte{0x00, 0x24, 0x08, 0x01, 0x12, 0x20}, pub...)
	if got := base58Decode(t, f.Sender); !bytes.Equal(got, wantPID) {
		t.Fatalf("sender %s decodes to %x, want %x", f.Sender, got, wantPID)
	}
	b32 := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			// Frame: 0x01 | uvarint len | body | 64-byte signature.
			wire := mustHex(t, v.Wire)
			if wire[0] != 0x01 {
				t.Fatalf("format byte %#x", wire[0])
			}
			n, k := binary.Uvarint(wire[1:])
			if k <= 0 || uint64(len(wire)-1-k) != n+ed25519.SignatureSize {
				t.Fatalf("bad frame: len %d, k %d, n %d", len(wire), k, n)
			}
			body := wire[1+k : 1+k+int(n)]
			sig := wire[1+k+int(n):]
			if string(body) != v.Body {
				t.Fatalf("wire body %q != body %q", body, v.Body)
			}
			if hex.EncodeToString(sig) != v.Signature {
				t.Fatalf("wire signature != signature")
			}

			sum := sha256.Sum256(body)
			if got := b32.EncodeToString(sum[:]); got != v.ID {
				t.Errorf("base32(sha256(body)) = %s, id %s", got, v.ID)
			}
			space := sha256.Sum256([]byte("weft/space/v1\x00" + v.SpaceName))
			if got := b32.EncodeToString(space[:]); got != v.Space {
				t.Errorf("space id = %s, stored %s", got, v.Space)
			}

			msg := append([]byte(f.SigningDomain), body...)
			if !ed25519.Verify(pub, msg, sig) {
				t.Errorf("ed25519.Verify(pub, signing_domain || body, sig) = false")
			}
			if ed25519.Verify(pub, body, sig) {
				t.Errorf("signature verifies without the signing domain")
			}
			// Ed25519 is deterministic: signing again gives the stored bytes.
			if got := ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg); !bytes.Equal(got, sig) {
				t.Errorf("ed25519.Sign = %x, stored %x", got, sig)
			}

			// The body is one JSON object with the documented header fields.
			var h struct {
				V         int             `json:"v"`
				Space     string          `json:"space"`
				From      string          `json:"from"`
				CreatedAt int64           `json:"created_at"`
				Content   json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatal(err)
			}
			if h.V != 1 || h.Space != v.Space || h.From != f.Sender || h.CreatedAt != v.Draft.CreatedAt {
				t.Errorf("header %+v", h)
			}
			// Content is copied verbatim: only surrounding white space trimmed.
			if want := bytes.Trim([]byte(v.Draft.Content), " \t\r\n"); !bytes.Contains(body, want) {
				t.Errorf("body does not contain the trimmed content verbatim")
			}
		})
	}
}

// base58Decode decodes Bitcoin-alphabet base58, as libp2p writes peer IDs.
func base58Decode(tb testing.TB, s string) []byte {
	tb.Helper()
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	n := new(big.Int)
	for _, c := range []byte(s) {
		i := bytes.IndexByte([]byte(alphabet), c)
		if i < 0 {
			tb.Fatalf("base58: bad character %q in %s", c, s)
		}
		n.Mul(n, big.NewInt(58))
		n.Add(n, big.NewInt(int64(i)))
	}
	out := n.Bytes()
	for _, c := range []byte(s) {
		if c != '1' {
			break
		}
		out = append([]byte{0}, out...)
	}
	return out
}
