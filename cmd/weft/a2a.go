package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weftmesh/weft/node/daemon"
)

// a2aAgent is what `weft a2a --json` prints: where an A2A client finds a
// weft agent through the local daemon.
type a2aAgent struct {
	URL       string   `json:"url"`     // the agent's base URL (give it to A2A clients)
	Card      string   `json:"card"`    // its agent card
	JSONRPC   string   `json:"jsonrpc"` // the JSON-RPC binding
	REST      string   `json:"rest"`    // the HTTP+JSON binding
	TokenFile string   `json:"token_file"`
	Name      string   `json:"name"`
	Skills    []string `json:"skills"`
}

func runA2A(ctx context.Context, e *env, args []string) error {
	fs := e.flags("a2a")
	capability := fs.String("capability", "", "the agent that calls whichever peer offers this capability (instead of PEER)")
	skill := fs.String("skill", "", "with PEER: the agent of that one call of the peer")
	asJSON := fs.Bool("json", false, "print the agent's URLs, token file and skills as JSON")
	pos, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	var path string
	switch {
	case *capability != "" && len(pos) == 0 && *skill == "":
		path = "capability/" + url.PathEscape(*capability)
	case *capability == "" && len(pos) == 1:
		path = "peer/" + url.PathEscape(pos[0])
		if *skill != "" {
			path += "/skill/" + url.PathEscape(*skill)
		}
	default:
		return usageError{"give a PEER (with --skill NAME or not), or --capability NAME"}
	}
	b, err := os.ReadFile(filepath.Join(e.home, daemon.A2AFile))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the daemon of %s does not serve A2A: start it with its loopback listener on (weft daemon --web 127.0.0.1:0, the default)", e.home)
	}
	if err != nil {
		return err
	}
	var info daemon.A2AInfo
	if err := json.Unmarshal(b, &info); err != nil || info.URL == "" {
		return fmt.Errorf("%s: unreadable", daemon.A2AFile)
	}
	token, err := os.ReadFile(info.TokenFile)
	if err != nil {
		return fmt.Errorf("the loopback token: %w", err)
	}
	base := strings.TrimRight(info.URL, "/") + "/" + path
	ag := a2aAgent{URL: base, Card: base + "/.well-known/agent-card.json", JSONRPC: base + "/jsonrpc", REST: base + "/rest", TokenFile: info.TokenFile, Skills: []string{}}

	// Fetch the card: the agent is reachable, and the daemon is up.
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ag.Card, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the daemon's A2A endpoint does not answer (is the daemon running?): %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return errors.New(e.Error.Message)
		}
		return fmt.Errorf("agent card: %s", resp.Status)
	}
	var card struct {
		Name   string `json:"name"`
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	}
	if err := json.Unmarshal(body, &card); err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	ag.Name = card.Name
	for _, s := range card.Skills {
		ag.Skills = append(ag.Skills, s.ID)
	}
	if *asJSON {
		return printJSON(e.stdout, ag)
	}
	fmt.Fprintln(e.stdout, ag.URL)
	fmt.Fprintf(e.stderr, "%s: skills %s\ne.g. a2a send %s --auth \"Bearer $(cat %s)\" \"hello\"\n",
		ag.Name, strings.Join(ag.Skills, ", "), ag.URL, ag.TokenFile)
	return nil
}
