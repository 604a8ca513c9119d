package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"github.com/weftmesh/weft/internal/atomicfile"
	"github.com/weftmesh/weft/node/localapi"
	"github.com/weftmesh/weft/node/web"
)

// listenWeb binds the loopback HTTP listener of the config, writes its
// token to <home>/web.token and serves the routes mounted on it.
func (d *Daemon) listenWeb(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.WebListen)
	if err != nil {
		return fmt.Errorf("web listen: %w", err)
	}
	token, err := web.NewToken()
	if err == nil {
		err = atomicfile.Write(filepath.Join(d.cfg.Home, web.TokenFile), []byte(token+"\n"))
	}
	if err == nil {
		d.web, err = web.New(ln.Addr(), token, d.log.With("part", "web"))
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("web: %w", err)
	}
	d.webLn = ln
	d.webSrv = d.newServer(ctx, localapi.BoundBodies(d.cfg.bodyTimeout(), d.web))
	limited := d.limitConns(ln)
	d.wg.Go(func() {
		if err := d.webSrv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("web listener stopped", "err", err)
		}
	})
	d.log.Info("web listener", "url", d.web.BaseURL(), "token_file", filepath.Join(d.cfg.Home, web.TokenFile))
	return nil
}

// Web returns the loopback HTTP listener's routes, to mount handlers on,
// or nil when it is not configured.
func (d *Daemon) Web() *web.Server { return d.web }

// WebAddr returns the loopback HTTP listener's address, or "" if none.
func (d *Daemon) WebAddr() string {
	if d.webLn == nil {
		return ""
	}
	return d.webLn.Addr().String()
}

// webURL returns the loopback HTTP listener's base URL (no token), or ""
// if none.
func (d *Daemon) webURL() string {
	if d.web == nil {
		return ""
	}
	return d.web.BaseURL()
}
