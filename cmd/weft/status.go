package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := e.flags("status")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	st, err := e.client().Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, st)
	}
	printStatus(e, st)
	return nil
}

// printStatus writes the status as one screen for a person.
func printStatus(e *env, st api.Status) {
	w := e.stdout
	fmt.Fprintf(w, "weft %s, up %s\n", st.Version, (time.Duration(st.UptimeSeconds) * time.Second).String())
	fmt.Fprintf(w, "id        %s\n", st.ID)
	fmt.Fprintf(w, "home      %s\n", st.Home)
	for i, a := range st.Addrs {
		label := ""
		if i == 0 {
			label = "addrs"
		}
		fmt.Fprintf(w, "%-9s %s\n", label, a)
	}
	fmt.Fprintf(w, "reach     %s\n", st.Reachability)
	relayed := 0
	for _, p := range st.Peers {
		if p.Relayed {
			relayed++
		}
	}
	fmt.Fprintf(w, "peers     %s", plural(len(st.Peers), "peer", "peers"))
	if len(st.Peers) > 0 {
		fmt.Fprintf(w, " (%d direct, %d relayed)", len(st.Peers)-relayed, relayed)
	}
	fmt.Fprintln(w)
	for _, p := range st.Peers {
		how := "direct"
		if p.Relayed {
			how = "relayed"
		}
		fmt.Fprintf(w, "          %s  %s %s\n", p.ID, p.Direction, how)
	}
	fmt.Fprintf(w, "spaces    %s\n", plural(len(st.Spaces), "space", "spaces"))
	for _, sp := range st.Spaces {
		fmt.Fprintf(w, "          %s  %s, %s%s\n", sp.Name, plural(sp.Messages, "message", "messages"), plural(sp.Peers, "peer", "peers"), spaceSync(sp.Sync))
	}
	sync := "idle"
	if st.Sync.Active {
		sync = "catching up (a sync with a peer runs now)"
	}
	fmt.Fprintf(w, "sync      %s; %s fetched since start\n", sync, plural(st.Sync.Received, "message", "messages"))
	fmt.Fprintf(w, "outbox    %s waiting for delivery\n", plural(st.Outbox, "direct message", "direct messages"))
	if len(st.Handlers) == 0 {
		fmt.Fprintln(w, "handlers  none")
	} else {
		fmt.Fprintf(w, "handlers  %s\n", strings.Join(st.Handlers, ", "))
	}
}

// spaceSync says what sync does for a space: ", in sync (last 15:04:05)",
// ", catching up: 42 left", and so on ("" when the daemon does not say).
func spaceSync(s *api.SpaceSync) string {
	if s == nil {
		return ""
	}
	last := ""
	if !s.LastEnd.IsZero() {
		last = " (last sync " + s.LastEnd.Local().Format(time.TimeOnly) + ")"
	}
	switch s.State {
	case api.SyncInSync:
		return ", in sync" + last
	case api.SyncCatchingUp:
		return fmt.Sprintf(", catching up: %d left", s.Left)
	case api.SyncRunning:
		return ", syncing now"
	case api.SyncFailed:
		return ", last sync failed" + last + ": " + s.LastError
	case api.SyncNone:
		return ", not synced yet"
	}
	return ", sync " + s.State
}

// plural says "1 message" or "3 messages".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
