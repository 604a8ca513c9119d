package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/libp2p/go-libp2p/gologshim"
)

// newLogger returns the daemon's logger: text (slog's key=value lines) or
// JSON (one object per line), at level and above, on w (stderr, which
// journald and docker collect).
func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Sprintf("--log-format %q: want text or json", format)}
}

// routeLibraryLogs sends what the libraries log to the daemon's logger, in
// its format: libp2p's own loggers (errors only, as libp2p's default; its
// dependency-injection framework's lines are dropped: they repeat, with
// module-cache paths, the error the daemon reports in one line anyway),
// and the standard log package (zeroconf, which mDNS uses, writes there).
// These are process-wide settings, made once by the weft binary's daemon.
func routeLibraryLogs(log *slog.Logger) {
	gologshim.SetDefaultHandler(dropFx{log.Handler(), false})
	slog.SetDefault(log.With("part", "lib"))
}

// dropFx passes records on to the daemon's handler at error level and
// above, except those of libp2p's fx logger (system=fx).
type dropFx struct {
	slog.Handler
	fx bool
}

func (h dropFx) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.fx && l >= slog.LevelError && h.Handler.Enabled(ctx, l)
}

func (h dropFx) WithAttrs(attrs []slog.Attr) slog.Handler {
	fx := h.fx
	for _, a := range attrs {
		if a.Key == "system" && a.Value.String() == "fx" {
			fx = true
		}
	}
	return dropFx{h.Handler.WithAttrs(attrs), fx}
}

func (h dropFx) WithGroup(name string) slog.Handler { return dropFx{h.Handler.WithGroup(name), h.fx} }
