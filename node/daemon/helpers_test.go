package daemon

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node/client"
)

// tempHome makes a short data dir (Unix socket paths are limited to ~100 bytes).
func tempHome(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "weft-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startNode runs a daemon on 127.0.0.1 with mDNS off, serving its API, and
// stops it when the test ends.
func startNode(t testing.TB, mutate func(*Config)) (*Daemon, *client.Client) {
	t.Helper()
	n, c, stop := runNode(t, mutate)
	t.Cleanup(stop)
	return n, c
}

// runNode is startNode with the stop left to the caller (stop must be
// called once).
func runNode(t testing.TB, mutate func(*Config)) (*Daemon, *client.Client, func()) {
	t.Helper()
	cfg := Default()
	cfg.Home = tempHome(t)
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	cfg.MDNS = false
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- n.Serve() }()
	stop := func() {
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	return n, &client.Client{Home: cfg.Home}, stop
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawHTTP is a plain HTTP client on a daemon's socket, for requests the Go
// client would never make.
func rawHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// keyOf returns a daemon's identity key, read from its home.
func keyOf(t testing.TB, d *Daemon) crypto.PrivKey {
	t.Helper()
	k, err := mesh.LoadOrCreateIdentity(filepath.Join(d.cfg.Home, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// trust puts daemon d on the trust list of c's daemon, so d may call the
// handlers there that take calls from trusted peers (the default).
func trust(t testing.TB, c *client.Client, d *Daemon) {
	t.Helper()
	if _, err := c.Trust(context.Background(), d.ID().String(), ""); err != nil {
		t.Fatalf("trust %s: %v", d.ID(), err)
	}
}
