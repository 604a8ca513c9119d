package telemetry

import (
	"strings"
	"testing"
)

func TestConfigured(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		if got := Configured(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: %v, want %v", c.env, got, c.want)
		}
	}
}

// TestFromEnv: nothing without an endpoint; a provider with one, over
// http/protobuf or grpc; a clear error for another protocol.
func TestFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	tp, err := FromEnv(t.Context(), "id", "v")
	if tp != nil || err != nil {
		t.Fatalf("without an endpoint: %v, %v", tp, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for _, proto := range []string{"", "http/protobuf", "grpc"} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
		tp, err := FromEnv(t.Context(), "id", "v")
		if err != nil || tp == nil {
			t.Fatalf("protocol %q: %v, %v", proto, tp, err)
		}
		tp.Shutdown(t.Context())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := FromEnv(t.Context(), "id", "v"); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Fatalf("http/json: %v", err)
	}
}
