package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/weftmesh/weft/internal/version"
	"github.com/weftmesh/weft/protocol/api"
)

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func runVersion(_ context.Context, e *env, args []string) error {
	if _, err := parse(e.flags("version"), args, 0); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "weft", version.String())
	return nil
}

func runID(ctx context.Context, e *env, args []string) error {
	fs := e.flags("id")
	asJSON := fs.Bool("json", false, "print JSON")
	addr := fs.Bool("addr", false, "print one full address peers can dial (for --bootstrap or weft connect elsewhere): public, else LAN, else loopback")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	n, err := e.client().Node(ctx)
	if err != nil {
		return err
	}
	if *addr {
		a := dialable(n.Addrs)
		if a == "" {
			return fmt.Errorf("this node listens on no address peers can dial")
		}
		fmt.Fprintln(e.stdout, a)
		return nil
	}
	if *asJSON {
		return printJSON(e.stdout, struct {
			ID    string   `json:"id"`
			Addrs []string `json:"addrs"`
		}{n.ID, n.Addrs})
	}
	fmt.Fprintln(e.stdout, n.ID)
	for _, a := range n.Addrs {
		fmt.Fprintln(e.stdout, " ", a)
	}
	return nil
}

func runPeers(ctx context.Context, e *env, args []string) error {
	fs := e.flags("peers")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	peers, err := e.client().Peers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, api.Peers{Peers: peers})
	}
	if len(peers) == 0 {
		e.empty("no peers connected (weft connect ADDR, or weft daemon --bootstrap ADDR)")
	}
	for _, p := range peers {
		addr := ""
		if len(p.Addrs) > 0 {
			addr = p.Addrs[0]
		}
		via := ""
		if p.Relayed {
			via = "  (relayed)"
		}
		fmt.Fprintf(e.stdout, "%s  %-8s %s%s\n", p.ID, p.Direction, addr, via)
	}
	return nil
}

func runConnect(ctx context.Context, e *env, args []string) error {
	fs := e.flags("connect")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	p, err := e.client().Connect(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, p)
	}
	fmt.Fprintln(e.stdout, "connected to", p.ID)
	return nil
}

func runJoin(ctx context.Context, e *env, args []string) error {
	fs := e.flags("join")
	asJSON := fs.Bool("json", false, "print JSON")
	invite := fs.String("invite", "", "join a private space by an invite token (from weft invite), instead of NAME")
	keepCount := fs.Int("keep-count", 0, "keep only the newest N messages of the space (0: no limit)")
	keepAge := fs.Duration("keep-age", 0, "keep only messages younger than this, e.g. 720h (0: no limit)")
	var maxBytes, maxSender, maxMessage byteSize
	fs.Var(&maxBytes, "max-bytes", "the space's quota: bytes it may hold, e.g. 256MiB (0: the daemon's default)")
	fs.Var(&maxSender, "max-sender-bytes", "bytes one sender may hold in the space (0: the daemon's default)")
	fs.Var(&maxMessage, "max-message-size", "largest message body the space takes, e.g. 64KiB (0: the daemon's default)")
	want := 1
	if hasInviteFlag(args) {
		want = 0
	}
	pos, err := parse(fs, args, want)
	if err != nil {
		return err
	}
	if want == 0 {
		return joinInvite(ctx, e, *invite, *asJSON) // private.go
	}
	req := api.JoinRequest{Name: pos[0]}
	set := flagsSet(fs)
	if set["keep-count"] || set["keep-age"] {
		req.Retention = &api.Retention{MaxCount: *keepCount}
		if *keepAge != 0 {
			req.Retention.MaxAge = keepAge.String()
		}
	}
	if set["max-bytes"] || set["max-sender-bytes"] || set["max-message-size"] {
		if maxBytes < 0 || maxSender < 0 || maxMessage < 0 {
			return usageError{"space limits are sizes; none is not one (0 takes the daemon's default)"}
		}
		req.Limits = &api.SpaceLimits{MaxBytes: int64(maxBytes), MaxSenderBytes: int64(maxSender), MaxMessageSize: int(maxMessage)}
	}
	sp, err := e.client().JoinSpace(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, sp)
	}
	fmt.Fprintf(e.stdout, "joined %s (%s)\n", sp.Name, sp.ID)
	return nil
}

func runSpaces(ctx context.Context, e *env, args []string) error {
	fs := e.flags("spaces")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	spaces, err := e.client().Spaces(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, api.Spaces{Spaces: spaces})
	}
	if len(spaces) == 0 {
		e.empty("no spaces joined (weft join NAME)")
	}
	for _, sp := range spaces {
		fmt.Fprintf(e.stdout, "%-20s %15s %9s  %9s  %s%s%s\n", sp.Name, plural(sp.Messages, "message", "messages"), formatBytes(sp.Bytes), plural(sp.Peers, "peer", "peers"), sp.ID, retentionText(sp.Retention), limitsText(sp.Limits))
	}
	return nil
}

func runLeave(ctx context.Context, e *env, args []string) error {
	pos, err := parse(e.flags("leave"), args, 1)
	if err != nil {
		return err
	}
	if err := e.client().Leave(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "left", pos[0])
	return nil
}

// limitsText describes a space's quotas for people ("" for none).
func limitsText(l *api.SpaceLimits) string {
	if l == nil {
		return ""
	}
	var parts []string
	if l.MaxBytes > 0 {
		parts = append(parts, "quota "+formatBytes(l.MaxBytes))
	}
	if l.MaxSenderBytes > 0 {
		parts = append(parts, formatBytes(l.MaxSenderBytes)+" per sender")
	}
	if l.MaxMessageSize > 0 {
		parts = append(parts, "messages up to "+formatBytes(int64(l.MaxMessageSize)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "  (" + strings.Join(parts, ", ") + ")"
}

// retentionText describes a space's retention for people ("" for none).
func retentionText(r *api.Retention) string {
	if r == nil {
		return ""
	}
	var parts []string
	if r.MaxCount > 0 {
		parts = append(parts, fmt.Sprintf("newest %d", r.MaxCount))
	}
	if r.MaxAge != "" {
		parts = append(parts, "younger than "+r.MaxAge)
	}
	return "  (keeps " + strings.Join(parts, ", ") + ")"
}
