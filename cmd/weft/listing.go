package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// isTerminal reports whether w is a terminal (a character device), where
// a person reads what weft prints.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// empty says, on a terminal, that a listing has nothing in it (scripts
// reading a pipe get nothing, as before).
func (e *env) empty(what string) {
	if e.tty || isTerminal(e.stdout) {
		fmt.Fprintln(e.stdout, what)
	}
}

// dialable picks the address peers elsewhere are most likely to reach this
// node at: a public one, then a private (LAN) one, then loopback; TCP
// before QUIC; never a relayed one unless there is nothing else.
func dialable(addrs []string) string {
	best, bestScore := "", -1
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			continue
		}
		score := 0
		switch {
		case isRelayed(a):
		case manet.IsPublicAddr(a):
			score = 30
		case manet.IsPrivateAddr(a):
			score = 20
		default:
			score = 10
		}
		if _, err := a.ValueForProtocol(ma.P_TCP); err == nil && score > 0 {
			score += 5
		}
		if score > bestScore {
			best, bestScore = s, score
		}
	}
	return best
}

func isRelayed(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// peerNames returns the names this node knows peers by (its trust list),
// for messages printed for a person; empty if it cannot tell.
func (e *env) peerNames(ctx context.Context) map[string]string {
	names := make(map[string]string)
	c := e.client()
	if list, err := c.Trusted(ctx); err == nil {
		for _, t := range list.Peers {
			if t.Name != "" {
				names[t.Peer] = t.Name
			}
		}
	}
	if n, err := c.Node(ctx); err == nil {
		name := "me"
		if card, err := c.Card(ctx); err == nil && strings.TrimSpace(card.Name) != "" {
			name = card.Name + " (me)"
		}
		names[n.ID] = name
	}
	return names
}
