// Package telemetry sets up a daemon's OpenTelemetry tracing from the
// standard OTEL_* environment variables: off unless an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// and then exported over OTLP (http/protobuf by default, or grpc as
// OTEL_EXPORTER_OTLP_PROTOCOL says), in batches. The
// exporter, the batch processor and the sampler read their other
// variables themselves (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// OTEL_BSP_SCHEDULE_DELAY, OTEL_TRACES_SAMPLER, …); OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES add to the resource, which names the node
// (service.instance.id is its peer ID).
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Configured reports whether getenv configures tracing: an OTLP endpoint
// is set, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none
// turns it off.
func Configured(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns a tracer provider that exports to the OTLP endpoint the
// environment names, for the node with peer ID id running version; nil
// (and no error) when the environment configures no tracing. Shut it down
// to flush the last spans.
func FromEnv(ctx context.Context, id, version string) (*sdktrace.TracerProvider, error) {
	if !Configured(os.Getenv) {
		return nil, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q is not supported: use http/protobuf (the default, the collector's port 4318) or grpc (port 4317)", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", "weft"),
			attribute.String("service.version", version),
			attribute.String("service.instance.id", id),
		),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES override
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
