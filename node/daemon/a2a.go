package daemon

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/weftmesh/weft/internal/atomicfile"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/a2abridge"
	"github.com/weftmesh/weft/node/web"
)

// A2AFile is the file in the home that says where the daemon serves A2A
// (written at start when the loopback listener is on): `weft a2a` reads it.
const A2AFile = "a2a.json"

// A2AInfo is the content of A2AFile.
type A2AInfo struct {
	URL       string `json:"url"`        // the bridge's root: http://127.0.0.1:PORT/a2a/
	TokenFile string `json:"token_file"` // the bearer token A2A clients send
}

// mountA2A serves A2A for the mesh's agents on the loopback listener, behind
// its bearer token (A2A clients send headers, not cookies).
func (d *Daemon) mountA2A() error {
	tokenFile := filepath.Join(d.cfg.Home, web.TokenFile)
	b, err := a2abridge.New(a2abridge.Config{Backend: d.node, Records: d.node.Store(), BaseURL: d.web.BaseURL(),
		TokenHint: "send Authorization: Bearer <the content of " + tokenFile + ">",
		Version:   node.Version, Logger: d.log.With("part", "a2a")})
	if err != nil {
		return err
	}
	info, _ := json.MarshalIndent(A2AInfo{URL: d.web.BaseURL() + a2abridge.Prefix, TokenFile: tokenFile}, "", "  ")
	if err := atomicfile.Write(filepath.Join(d.cfg.Home, A2AFile), info); err != nil {
		return fmt.Errorf("a2a: %w", err)
	}
	d.a2a = b
	d.web.Handle(a2abridge.Prefix, b, web.Bearer)
	return nil
}
