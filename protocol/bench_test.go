package protocol_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

var benchSizes = []int{256, 4 << 10, 64 << 10}

func sizeName(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// benchDraft is a draft whose content object is exactly size bytes.
func benchDraft(size int) protocol.Draft {
	d := minimalDraft()
	d.Prev = []protocol.ID{protocol.MessageID([]byte("p"))}
	d.Content = []byte(`{"text":"` + strings.Repeat("x", size-len(`{"text":""}`)) + `"}`)
	return d
}

func BenchmarkSign(b *testing.B) {
	key := testKey(b, 1)
	benchSign(b, func(d protocol.Draft, lim protocol.Limits) (*protocol.Message, error) {
		return protocol.Sign(key, d, lim)
	})
}

func benchSign(b *testing.B, sign func(protocol.Draft, protocol.Limits) (*protocol.Message, error)) {
	lim := protocol.DefaultLimits()
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			d := benchDraft(size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sign(d, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	benchValidate(b, protocol.Validate)
}

// BenchmarkVerifierValidate is Validate through a Verifier, for messages
// of one sender (as a catch-up fetches them, and gossip in a space).
func BenchmarkVerifierValidate(b *testing.B) {
	benchValidate(b, protocol.NewVerifier().Validate)
}

func benchValidate(b *testing.B, validate func([]byte, time.Time, protocol.Limits) (*protocol.Message, error)) {
	key := testKey(b, 1)
	lim := protocol.DefaultLimits()
	now := created.Add(time.Second)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			wire := sign(b, key, benchDraft(size)).Encode()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := validate(wire, now, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode is what reading a stored message back costs (a page of
// a space decodes each of its messages).
func BenchmarkDecode(b *testing.B) {
	key := testKey(b, 1)
	lim := protocol.StoredLimits()
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			wire := sign(b, key, benchDraft(size)).Encode()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.Decode(wire, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeStored is DecodeStored, for what a node stored.
func BenchmarkDecodeStored(b *testing.B) {
	key := testKey(b, 1)
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			wire := sign(b, key, benchDraft(size)).Encode()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.DecodeStored(wire); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSigner is Sign with the Signer a node keeps.
func BenchmarkSigner(b *testing.B) {
	s, err := protocol.NewSigner(testKey(b, 1))
	if err != nil {
		b.Fatal(err)
	}
	benchSign(b, s.Sign)
}
