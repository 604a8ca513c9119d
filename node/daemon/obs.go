package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/node/localapi"
	"github.com/weftmesh/weft/node/metrics"
	"github.com/weftmesh/weft/node/telemetry"
	"github.com/weftmesh/weft/node/web"
)

// setupObs gives the node's config a metrics registry of the daemon's own
// (unless it has one) and, when the OTEL_* variables configure tracing and
// the config has no tracer, a tracer provider that the daemon shuts down
// at Close.
func (d *Daemon) setupObs(ctx context.Context, cfg *node.Config) error {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Tracer != nil {
		return nil
	}
	key, err := mesh.LoadOrCreateIdentity(cfg.IdentityPath())
	if err != nil {
		return err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return err
	}
	tp, err := telemetry.FromEnv(ctx, id.String(), node.Version)
	if err != nil || tp == nil {
		return err
	}
	d.tracer = tp
	cfg.Tracer = tp
	d.log.Info("tracing on: spans are exported over OTLP (OTEL_EXPORTER_OTLP_* variables)")
	return nil
}

// apiObs are the local API's options that serve and count its metrics.
func (d *Daemon) apiObs() []localapi.Option {
	m := d.node.Config().Metrics
	return []localapi.Option{
		localapi.WithMetrics(m.Handler()),
		localapi.WithObserver(m.APIRequest),
	}
}

// mountObs mounts /metrics and pprof (/debug/pprof/) on the loopback
// listener, behind its bearer token.
func (d *Daemon) mountObs() {
	w := d.web
	w.Handle("GET /metrics", d.node.Config().Metrics.Handler(), web.Bearer)
	w.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index), web.Bearer)
	w.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline), web.Bearer)
	w.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile), web.Bearer)
	w.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol), web.Bearer)
	w.Handle("POST /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol), web.Bearer)
	w.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace), web.Bearer)
}

// shutdownTracer flushes the spans not exported yet, waiting up to 5 s.
func shutdownTracer(tp *sdktrace.TracerProvider) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	return nil
}
