package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/weftmesh/weft/internal/atomicfile"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/node/localapi"
	weftmcp "github.com/weftmesh/weft/node/mcp"
	"github.com/weftmesh/weft/protocol/api"
)

// MCPTokenFile is the file in the home that holds the bearer token of the
// loopback MCP endpoint (mode 0600), rewritten at every start.
const MCPTokenFile = "mcp.token"

// minMCPToken is the shortest token the loopback MCP endpoint accepts.
const minMCPToken = 16

// mcpHandler is the daemon's MCP server over streamable HTTP. Its tools
// act through the daemon's own API, exactly as `weft mcp` does, reached in
// memory.
func (d *Daemon) mcpHandler() http.Handler {
	c := &client.Client{Dial: d.mem.Dial}
	log := d.log.With("part", "mcp")
	return weftmcp.Handler(weftmcp.NewServer(c, node.Version, log), log)
}

// checkLoopback reports whether addr (host:port) names a loopback host.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mcp listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("mcp listen address %q: only loopback addresses (127.0.0.1, [::1], localhost) are allowed", addr)
	}
	return nil
}

// listenMCP serves MCP on the loopback TCP address of the config, behind a
// bearer token (the configured one, or a new random one written to
// <home>/mcp.token).
func (d *Daemon) listenMCP(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.MCPListen)
	if err != nil {
		return fmt.Errorf("mcp listen: %w", err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return fmt.Errorf("mcp listen: %s is not a loopback address", ln.Addr())
	}
	token := strings.TrimSpace(d.cfg.MCPToken)
	if token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			ln.Close()
			return err
		}
		token = hex.EncodeToString(b)
	}
	path := filepath.Join(d.cfg.Home, MCPTokenFile)
	if err := atomicfile.Write(path, []byte(token+"\n")); err != nil {
		ln.Close()
		return fmt.Errorf("mcp token: %w", err)
	}
	d.mcpLn = ln
	d.mcpSrv = d.newServer(ctx, localapi.BoundBodies(d.cfg.bodyTimeout(),
		requireToken(token, localapi.RefuseBrowsers(d.mcpHandler()))))
	limited := d.limitConns(ln)
	d.wg.Go(func() {
		if err := d.mcpSrv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("mcp endpoint stopped", "err", err)
		}
	})
	d.log.Info("mcp endpoint", "url", "http://"+ln.Addr().String()+weftmcp.Path, "token_file", path)
	return nil
}

// MCPAddr returns the loopback address MCP is served on, or "" if none.
func (d *Daemon) MCPAddr() string {
	if d.mcpLn == nil {
		return ""
	}
	return d.mcpLn.Addr().String()
}

// requireToken lets through only requests carrying "Authorization: Bearer
// token" (the scheme in any case, the token compared in constant time).
func requireToken(token string, h http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weft"`)
			localapi.WriteError(w, api.CodeUnauthorized,
				"missing or wrong bearer token: send Authorization: Bearer <the token in "+MCPTokenFile+" in the daemon's home>")
			return
		}
		h.ServeHTTP(w, r)
	})
}
