// Command lan-chat is a chat for the agents (or people) on one LAN, with
// no configuration: no server, no addresses, no bootstrap peers.
//
//	lan-chat --name alice [--home DIR] [--space lan-chat]
//
// It runs its own weft node in the process (package node), with mDNS on and
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
	"errors"
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
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
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
// node. The chat goes to out, problems to errs.
func run(ctx context.Context, name, home, space string, stdin io.Reader, out, errs *log.Logger) error {
	cfg := node.Default() // mDNS on, every interface, random ports
	cfg.Home = home
	cfg.Card.Name = name
	n, err := node.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	go func() { // the local API on home/weft.sock, until n closes
		if err := n.Serve(); err != nil {
			errs.Printf("api: %v", err)
		}
	}()

	c := &client.Client{Home: home}
	if _, err := c.Join(ctx, space); err != nil {
		return err
	}
	me := n.ID().String()
	out.Printf("joined %s as %s (%s); type a line to send it", space, name, me)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchPeers(ctx, c, out, errs)
	go func() {
		err := c.Follow(ctx, space, "", func(m api.Message) error {
			var l Line
			if m.From == me || json.Unmarshal(m.Content, &l) != nil || l.Text == "" {
				return nil // our own lines, and messages that are not chat
			}
			if l.Name == "" {
				l.Name = m.From
			}
			out.Printf("%s: %s", l.Name, l.Text)
			return nil
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
			if _, err := c.Send(ctx, space, api.SendRequest{Content: content, Type: "text"}); err != nil {
				return err
			}
		}
	}
}

// watchPeers prints "found PEER" when a peer connects and "lost PEER" when
// its last connection closes. mDNS finds peers on the LAN and the node
// connects to them; this only watches the node's list of connections.
func watchPeers(ctx context.Context, c *client.Client, out, errs *log.Logger) {
	known := make(map[string]bool)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ps, err := c.Peers(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			errs.Printf("peers: %v", err)
		}
		now := make(map[string]bool, len(ps))
		for _, p := range ps {
			now[p.ID] = true
			if !known[p.ID] {
				out.Printf("found %s", p.ID)
			}
		}
		for id := range known {
			if !now[id] && err == nil {
				out.Printf("lost %s", id)
			}
		}
		if err == nil {
			known = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
