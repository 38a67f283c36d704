package config

import (
	"strings"
	"testing"
)

func envMap(m map[string]string) Getenv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestTracingEnabled(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr string
	}{
		{"no endpoint: off", nil, false, ""},
		{"empty endpoint: off", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true, ""},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, ""},
		{"grpc refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "http/protobuf only"},
		{"protocol without endpoint: off", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TracingEnabled(envMap(tc.env))
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("TracingEnabled = %v, %v; want %v, error containing %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
