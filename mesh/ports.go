package mesh

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// checkPorts binds each TCP and UDP listen address, without
// SO_REUSEPORT, and releases it at once. libp2p's TCP transport listens
// with SO_REUSEPORT (so that its dials can leave from the listen port), and
// two such listeners share a port: a second weft daemon would start on a
// port another one already holds, and each would get half of the dials
// meant for the other. A plain bind fails on a port anyone listens on, so
// this refuses the port before libp2p can share it, and says in one line
// what is wrong with an address no interface has.
func checkPorts(listen []ma.Multiaddr) error {
	for _, a := range listen {
		network, addr, err := manet.DialArgs(a)
		if err != nil {
			continue // libp2p reports what it cannot listen on
		}
		switch network {
		case "tcp", "tcp4", "tcp6":
			ln, err := net.Listen(network, addr)
			if err != nil {
				return listenError(a, err)
			}
			ln.Close()
		case "udp", "udp4", "udp6":
			pc, err := net.ListenPacket(network, addr)
			if err != nil {
				return listenError(a, err)
			}
			pc.Close()
		}
	}
	return nil
}

// listenError says in one line why this node cannot listen on a.
func listenError(a ma.Multiaddr, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("cannot listen on %s: the port is in use (by another weft daemon or another program); pick another --listen port, or 0 for any free one", a)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("cannot listen on %s: no interface of this machine has that address", a)
	}
	return fmt.Errorf("cannot listen on %s: %w", a, err)
}
