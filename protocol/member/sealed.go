package member

// Sealed spaces: content encrypted end to end. PRIVATE.md ("Sealed
// spaces") states the scheme; this file is its wire contract: the content
// envelope, the key shares that carry epoch keys to members, and the
// derivation of a peer's X25519 key from its Ed25519 identity.

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"filippo.io/edwards25519"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"

	"github.com/weftmesh/weft/protocol"
)

// TypeKey is the type of a key-share message: epoch keys wrapped to
// members (content {"keys": [KeyShares…]}). Only an admin or the owner
// may send one.
const TypeKey = "weft.space.key"

// KeySize is the size of an epoch key.
const KeySize = 32

// Key is an epoch key: the XChaCha20-Poly1305 key of a sealed space's
// content in one epoch.
type Key [KeySize]byte

// NewKey returns a random epoch key.
func NewKey() (Key, error) {
	var k Key
	_, err := rand.Read(k[:])
	return k, err
}

// ErrSealed: an envelope or key share that cannot be opened (no key,
// wrong key, tampered).
var ErrSealed = errors.New("sealed")

// Domain strings of the scheme's associated data and key derivation.
const (
	contentDomain = "weft/sealed/content/v1\x00"
	wrapDomain    = "weft/sealed/wrap/v1\x00"
)

// Envelope is the content of a sealed message on the wire:
// {"sealed": {"epoch": N, "nonce": B64, "ct": B64}}.
type Envelope struct {
	Epoch uint64 `json:"epoch"`
	Nonce []byte `json:"nonce"`
	CT    []byte `json:"ct"`
}

type envelopeContent struct {
	Sealed *Envelope `json:"sealed"`
}

// plain is what an envelope's ciphertext holds: everything of the
// message that means something to its readers.
type plain struct {
	Content json.RawMessage   `json:"content"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// Headers are the message's routing headers an envelope is bound to (its
// associated data): the ciphertext cannot be moved into another message.
type Headers struct {
	Space     protocol.ID
	From      string
	CreatedAt int64 // Unix milliseconds, as on the wire
	Type      string
}

// HeadersOf returns m's routing headers.
func HeadersOf(m *protocol.Message) Headers {
	return Headers{Space: m.Space, From: m.From, CreatedAt: m.CreatedAt, Type: m.Type}
}

func (h Headers) ad(epoch uint64) []byte {
	b := make([]byte, 0, len(contentDomain)+protocol.IDSize+len(h.From)+len(h.Type)+18)
	b = append(b, contentDomain...)
	b = append(b, h.Space[:]...)
	b = append(b, h.From...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(h.CreatedAt))
	b = append(b, h.Type...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, epoch)
	return b
}

// Seal encrypts content and meta under key (of epoch) for a message with
// headers h and returns the envelope content that replaces them on the
// wire.
func Seal(key Key, epoch uint64, h Headers, content json.RawMessage, meta map[string]string) (json.RawMessage, error) {
	pt, err := json.Marshal(plain{Content: content, Meta: meta})
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(key[:])
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	env := Envelope{Epoch: epoch, Nonce: nonce, CT: aead.Seal(nil, nonce, pt, h.ad(epoch))}
	return json.Marshal(envelopeContent{Sealed: &env})
}

// ParseEnvelope reads a sealed message's content; ok is false for content
// that is not an envelope.
func ParseEnvelope(content json.RawMessage) (Envelope, bool) {
	var c envelopeContent
	if err := json.Unmarshal(content, &c); err != nil || c.Sealed == nil {
		return Envelope{}, false
	}
	if len(c.Sealed.Nonce) != chacha20poly1305.NonceSizeX || len(c.Sealed.CT) < chacha20poly1305.Overhead {
		return Envelope{}, false
	}
	return *c.Sealed, true
}

// Open decrypts an envelope of a message with headers h with one of the
// keys of its epoch (concurrent rekeys may have made two for one epoch:
// each is tried) and returns the content and meta it sealed.
func Open(env Envelope, h Headers, keys []Key) (json.RawMessage, map[string]string, error) {
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%w: no key for epoch %d", ErrSealed, env.Epoch)
	}
	ad := h.ad(env.Epoch)
	for _, k := range keys {
		aead, err := chacha20poly1305.NewX(k[:])
		if err != nil {
			return nil, nil, err
		}
		pt, err := aead.Open(nil, env.Nonce, env.CT, ad)
		if err != nil {
			continue
		}
		var p plain
		if err := json.Unmarshal(pt, &p); err != nil || len(p.Content) == 0 {
			return nil, nil, fmt.Errorf("%w: epoch %d: plaintext is not a sealed message", ErrSealed, env.Epoch)
		}
		return p.Content, p.Meta, nil
	}
	return nil, nil, fmt.Errorf("%w: no key of epoch %d opens it (tampered, or a key this node lacks)", ErrSealed, env.Epoch)
}

// Share is an epoch key wrapped to one peer: an ephemeral X25519 public
// key and the epoch key sealed with XChaCha20-Poly1305 under
// HKDF-SHA256(X25519(ephemeral, peer's X25519 key)).
type Share struct {
	Peer string `json:"peer"`
	Eph  []byte `json:"eph"`
	Box  []byte `json:"box"`
}

// KeyShares is one epoch's key wrapped to some peers.
type KeyShares struct {
	Epoch  uint64  `json:"epoch"`
	Shares []Share `json:"shares"`
}

// KeyMessage is the content of a TypeKey message.
type KeyMessage struct {
	Keys []KeyShares `json:"keys"`
}

// ParseKeyMessage reads a TypeKey message's content.
func ParseKeyMessage(m *protocol.Message) (KeyMessage, error) {
	var k KeyMessage
	if m.Type != TypeKey {
		return k, errorf(ErrMalformed, "type %q is not %s", m.Type, TypeKey)
	}
	if err := json.Unmarshal(m.Content, &k); err != nil {
		return k, errorf(ErrMalformed, "key message content: %v", err)
	}
	if len(k.Keys) == 0 {
		return k, errorf(ErrMalformed, "key message without keys")
	}
	return k, nil
}

// X25519Public returns the X25519 public key of a peer with an Ed25519
// identity: its Edwards point in Montgomery form.
func X25519Public(p peer.ID) ([]byte, error) {
	pub, err := p.ExtractPublicKey()
	if err != nil {
		return nil, err
	}
	if pub.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("%w: %s has no Ed25519 key", ErrSealed, p)
	}
	raw, err := pub.Raw()
	if err != nil {
		return nil, err
	}
	pt, err := new(edwards25519.Point).SetBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSealed, p, err)
	}
	return pt.BytesMontgomery(), nil
}

// X25519Private returns the X25519 private key matching X25519Public of
// an Ed25519 identity key: SHA-512 of its seed, first half, clamped (the
// Ed25519 secret scalar).
func X25519Private(key crypto.PrivKey) (*ecdh.PrivateKey, error) {
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("%w: key type %s, want Ed25519", ErrSealed, key.Type())
	}
	raw, err := key.Raw()
	if err != nil {
		return nil, err
	}
	h := sha512.Sum512(raw[:32]) // the seed
	s := h[:32]
	s[0] &= 248
	s[31] &= 127
	s[31] |= 64
	return ecdh.X25519().NewPrivateKey(s)
}

func wrapKey(shared, eph, recip []byte, space protocol.ID, epoch uint64) ([]byte, []byte, error) {
	info := make([]byte, 0, len(wrapDomain)+protocol.IDSize+8)
	info = append(info, wrapDomain...)
	info = append(info, space[:]...)
	info = binary.BigEndian.AppendUint64(info, epoch)
	salt := sha256.Sum256(append(append([]byte{}, eph...), recip...))
	kek := make([]byte, chacha20poly1305.KeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, shared, salt[:], info), kek); err != nil {
		return nil, nil, err
	}
	return kek, info, nil
}

// Wrap seals an epoch key to peer p (its X25519 key from its identity).
func Wrap(p peer.ID, space protocol.ID, epoch uint64, key Key) (Share, error) {
	recip, err := X25519Public(p)
	if err != nil {
		return Share{}, err
	}
	rpub, err := ecdh.X25519().NewPublicKey(recip)
	if err != nil {
		return Share{}, err
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return Share{}, err
	}
	shared, err := eph.ECDH(rpub)
	if err != nil {
		return Share{}, err
	}
	kek, info, err := wrapKey(shared, eph.PublicKey().Bytes(), recip, space, epoch)
	if err != nil {
		return Share{}, err
	}
	aead, err := chacha20poly1305.NewX(kek)
	if err != nil {
		return Share{}, err
	}
	// The key-encryption key is used once (its ephemeral key is fresh):
	// a zero nonce is safe.
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	return Share{Peer: p.String(), Eph: eph.PublicKey().Bytes(), Box: aead.Seal(nil, nonce, key[:], info)}, nil
}

// Unwrap opens a share with key, the identity key of the peer it was
// wrapped to.
func Unwrap(key crypto.PrivKey, space protocol.ID, epoch uint64, s Share) (Key, error) {
	var k Key
	priv, err := X25519Private(key)
	if err != nil {
		return k, err
	}
	epub, err := ecdh.X25519().NewPublicKey(s.Eph)
	if err != nil {
		return k, fmt.Errorf("%w: share's ephemeral key: %v", ErrSealed, err)
	}
	shared, err := priv.ECDH(epub)
	if err != nil {
		return k, fmt.Errorf("%w: %v", ErrSealed, err)
	}
	kek, info, err := wrapKey(shared, s.Eph, priv.PublicKey().Bytes(), space, epoch)
	if err != nil {
		return k, err
	}
	aead, err := chacha20poly1305.NewX(kek)
	if err != nil {
		return k, err
	}
	pt, err := aead.Open(nil, make([]byte, chacha20poly1305.NonceSizeX), s.Box, info)
	if err != nil || len(pt) != KeySize {
		return k, fmt.Errorf("%w: share of epoch %d does not open with this key", ErrSealed, epoch)
	}
	copy(k[:], pt)
	return k, nil
}

// WrapAll wraps an epoch key to each of peers.
func WrapAll(peers []peer.ID, space protocol.ID, epoch uint64, key Key) (KeyShares, error) {
	ks := KeyShares{Epoch: epoch}
	for _, p := range peers {
		s, err := Wrap(p, space, epoch, key)
		if err != nil {
			return ks, err
		}
		ks.Shares = append(ks.Shares, s)
	}
	return ks, nil
}

// Mine returns the keys in ks wrapped to the holder of key (its peer ID
// self) that open with it.
func Mine(key crypto.PrivKey, self peer.ID, space protocol.ID, ks []KeyShares) map[uint64]Key {
	out := map[uint64]Key{}
	for _, e := range ks {
		for _, s := range e.Shares {
			if s.Peer != self.String() {
				continue
			}
			if k, err := Unwrap(key, space, e.Epoch, s); err == nil {
				out[e.Epoch] = k
			}
		}
	}
	return out
}

// InviteKey is the epoch key an invite carries, so that its joiner reads
// the space with no admin online: wrapped to the bound peer (Share), or,
// for an invite any holder may use, the key itself (the token is then a
// bearer secret: whoever holds it reads that epoch).
type InviteKey struct {
	Epoch uint64 `json:"epoch"`
	Share *Share `json:"share,omitempty"`
	Key   []byte `json:"key,omitempty"`
}

// Open returns the invite's key for the holder of key (its peer ID self).
func (ik InviteKey) Open(key crypto.PrivKey, self peer.ID, space protocol.ID) (Key, error) {
	var k Key
	switch {
	case ik.Share != nil:
		if ik.Share.Peer != self.String() {
			return k, fmt.Errorf("%w: the invite's key is wrapped to %s", ErrSealed, ik.Share.Peer)
		}
		return Unwrap(key, space, ik.Epoch, *ik.Share)
	case len(ik.Key) == KeySize:
		copy(k[:], ik.Key)
		return k, nil
	}
	return k, fmt.Errorf("%w: the invite carries no key", ErrSealed)
}
