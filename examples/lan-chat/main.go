// Command lan-chat is a chat for the agents (or people) on one LAN, with
// no configuration: no server, no addresses, no bootstrap peers.
//
//	lan-chat --name alice [--home DIR] [--space lan-chat]
//
// It runs its own weft node in the process (packages node and node/daemon), with mDNS on and
// listening on every interface, so copies of it on one LAN find each other
// by themselves. It joins the space "lan-chat", prints "found PEER" when a
// peer connects, prints what others say as "NAME: text", and sends each
// line typed on stdin as {"text": …, "name": …}. Its home (identity and
// store) is --home, else ~/.weft-lan-chat/NAME; while it runs, the weft CLI
// can use it too: weft read --home ~/.weft-lan-chat/alice lan-chat.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/daemon"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// Line is the content of one chat message.
type Line struct {
	Text string `json:"text"`
	Name string `json:"name"`
}

func main() {
	name := flag.String("name", "", "your name in the chat (required)")
	home := flag.String("home", "", "the node's home (default ~/.weft-lan-chat/NAME)")
	space := flag.String("space", "lan-chat", "the space to chat in")
	flag.Parse()
	if *name == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: lan-chat --name NAME [--home DIR] [--space SPACE]")
		os.Exit(2)
	}
	if *home == "" {
		dir, err := os.UserHomeDir()
		if err != nil {
			dir = os.TempDir()
		}
		*home = filepath.Join(dir, ".weft-lan-chat", *name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *name, *home, *space, os.Stdin, log.New(os.Stdout, "", 0), log.New(os.Stderr, "lan-chat: ", 0))
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lan-chat: %v\n", err)
		os.Exit(1)
	}
}

// run starts the node, chats until ctx ends or stdin does, then stops the
// node. The chat goes to out, problems to errs. It uses the node in the
// process directly (package node); the daemon around it also serves the
// local API on home/weft.sock, so the weft CLI can join in.
func run(ctx context.Context, name, home, space string, stdin io.Reader, out, errs *log.Logger) error {
	cfg := daemon.Default() // mDNS on, every interface, random ports
	cfg.Home = home
	cfg.Card.Name = name
	d, err := daemon.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	go func() { // the local API on home/weft.sock, until d closes
		if err := d.Serve(); err != nil {
			errs.Printf("api: %v", err)
		}
	}()

	n := d.Node()
	sp, _, err := n.Join(space, nil)
	if err != nil {
		return err
	}
	me := n.ID().String()
	out.Printf("joined %s as %s (%s); type a line to send it", space, name, me)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchPeers(ctx, n, out)
	go func() {
		err := follow(ctx, n, sp.ID, func(m node.Message) {
			var l Line
			if m.From == me || json.Unmarshal(m.Content, &l) != nil || l.Text == "" {
				return // our own lines, and messages that are not chat
			}
			if l.Name == "" {
				l.Name = m.From
			}
			out.Printf("%s: %s", l.Name, l.Text)
		})
		if ctx.Err() == nil {
			errs.Printf("reading %s: %v", space, err)
			cancel()
		}
	}()

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case text, ok := <-lines:
			if !ok {
				return nil // end of input: leave the chat
			}
			if text = strings.TrimSpace(text); text == "" {
				continue
			}
			content, _ := json.Marshal(Line{Text: text, Name: name})
			if _, err := n.Send(ctx, sp.ID, node.Post{Content: content, Type: "text"}); err != nil {
				return err
			}
		}
	}
}

// follow calls f with every message of the space, from its start, as
// the node stores them, until ctx ends.
func follow(ctx context.Context, n *node.Node, space protocol.ID, f func(node.Message)) error {
	var after store.Cursor
	for {
		changed := n.Changed(space)
		msgs, next, err := n.Read(space, after, 256)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			f(m)
		}
		after = next
		if len(msgs) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// watchPeers prints "found PEER" when a peer connects and "lost PEER" when
// its last connection closes. mDNS finds peers on the LAN and the node
// connects to them; this only watches the node's list of connections.
func watchPeers(ctx context.Context, n *node.Node, out *log.Logger) {
	known := make(map[string]bool)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		now := make(map[string]bool)
		for _, p := range n.Peers() {
			id := p.ID.String()
			now[id] = true
			if !known[id] {
				out.Printf("found %s", id)
			}
		}
		for id := range known {
			if !now[id] {
				out.Printf("lost %s", id)
			}
		}
		known = now
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
