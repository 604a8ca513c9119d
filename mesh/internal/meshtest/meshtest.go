// Package meshtest has test helpers shared by the mesh protocol packages:
// addresses and peers that are not there.
package meshtest

import (
	"crypto/rand"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
)

// RefusingAddr returns a loopback TCP address nothing listens on.
func RefusingAddr(tb testing.TB) ma.Multiaddr {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	a, err := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/" + strconv.Itoa(port))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// AbsentPeer returns the ID of a peer that is not running, known to h at
// addrs.
func AbsentPeer(tb testing.TB, h host.Host, addrs ...ma.Multiaddr) peer.ID {
	tb.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	h.Peerstore().AddAddrs(id, addrs, peerstore.TempAddrTTL)
	return id
}

// WaitFor polls cond every 10 ms until it holds, failing the test after d.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
