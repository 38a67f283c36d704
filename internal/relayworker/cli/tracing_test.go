package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestTracingWanted(t *testing.T) {
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
			got, err := tracingWanted(envMap(tc.env))
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("tracingWanted = %v, %v; want %v, error containing %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, the relay's spans reach an OTLP/HTTP
// receiver; stop flushes them.
func TestStartTracingExportsOverOTLP(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && len(body) > 0 {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	prevProp := otel.GetTextMapPropagator()
	defer otel.SetTextMapPropagator(prevProp)

	stop, err := startTracing(context.Background(), envMap(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}), "orders")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "send orders")
	if !span.IsRecording() {
		t.Fatal("the installed TracerProvider does not record")
	}
	span.End()
	stop()
	if posts.Load() == 0 {
		t.Error("no span reached the OTLP receiver")
	}
}
