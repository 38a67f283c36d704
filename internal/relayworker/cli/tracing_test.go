package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
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
