package agent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/protocol"
)

func TestReadFrame(t *testing.T) {
	t.Parallel()
	uv := func(n uint64) []byte { return binary.AppendUvarint(nil, n) }
	cases := []struct {
		name string
		in   []byte
		want []byte
		err  error
	}{
		{"empty frame", uv(0), []byte{}, nil},
		{"at the limit", append(uv(8), "12345678"...), []byte("12345678"), nil},
		{"over the limit", append(uv(9), "123456789"...), nil, protocol.ErrTooLarge},
		{"huge length", uv(1 << 62), nil, protocol.ErrTooLarge},
		{"length overflows", bytes.Repeat([]byte{0xff}, 10), nil, protocol.ErrMalformed},
		{"length of 11 bytes", append(bytes.Repeat([]byte{0x80}, 10), 0), nil, protocol.ErrMalformed},
		{"nothing", nil, nil, io.EOF},
		{"length cut", []byte{0x80}, nil, io.ErrUnexpectedEOF},
		{"body cut", append(uv(5), "12"...), nil, io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFrame(bufio.NewReader(bytes.NewReader(tc.in)), 8)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("readFrame = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	var buf bytes.Buffer
	if err := writeFrame(&buf, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got, err := readFrame(bufio.NewReader(&buf), 8); err != nil || string(got) != "hello" {
		t.Fatalf("round trip = %q, %v", got, err)
	}
}

// FuzzDecodeAnswer: whatever a peer sends, decoding neither panics nor
// accepts a card that is not the peer's, with invalid or repeated
// capability names, or a health without a status.
func FuzzDecodeAnswer(f *testing.F) {
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		f.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	card, _ := json.Marshal(protocol.Card{ID: p.String(), Capabilities: []protocol.Capability{{Name: "a"}, {Name: "a"}, {Name: "b c"}}})
	for _, seed := range [][]byte{
		card,
		[]byte(`{"id":"x"}`),
		[]byte(`{"status":"ok","load":0.5}`),
		[]byte(`{"error":{"code":"bad_request","message":"no"}}`),
		[]byte(`{"error":{}}`),
		[]byte(`null`),
		[]byte(`[`),
	} {
		var buf bytes.Buffer
		_ = writeFrame(&buf, seed)
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := readFrame(bufio.NewReader(bytes.NewReader(in)), maxAnswer)
		if err != nil {
			return
		}
		if c, err := decodeCard(b, p); err == nil {
			if c.ID != p.String() {
				t.Fatalf("accepted a card for %q from %s", c.ID, p)
			}
			seen := map[string]bool{}
			for _, cp := range c.Capabilities {
				if protocol.CheckName(cp.Name) != nil || seen[cp.Name] {
					t.Fatalf("accepted capability %q", cp.Name)
				}
				seen[cp.Name] = true
			}
		}
		if h, err := decodeHealth(b); err == nil && h.Status == "" {
			t.Fatal("accepted a health without a status")
		}
		var ce *protocol.CallError
		if err := decodeAnswer(b, new(protocol.Card)); errors.As(err, &ce) && ce.Code == "" {
			t.Fatal("error answer without a code")
		}
	})
}
