// tracing.go: the relay's OpenTelemetry export (docs/monitoring.md, "Tracing"). Only
// when the pod has an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) does the worker install a TracerProvider;
// without one the relay's spans are OpenTelemetry's no-op and cost nothing.

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
)

// tracingShutdown bounds the final flush of spans at exit.
const tracingShutdown = 5 * time.Second

// startTracing installs the global TracerProvider exporting to the OTLP endpoint the
// environment names (the exporter reads the OTEL_EXPORTER_OTLP_* variables, the SDK
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER), and returns
// the function that flushes and stops it. Without an endpoint it does nothing.
func startTracing(ctx context.Context, getenv config.Getenv, pipeline string) (stop func(), err error) {
	want, err := config.TracingEnabled(getenv)
	if err != nil || !want {
		return func() {}, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName("outbox-relay"), semconv.ServiceNamespace(pipeline)),
		resource.WithFromEnv()) // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		_ = tp.Shutdown(sctx) // best effort: spans are diagnostics, the rows are the record
	}, nil
}
