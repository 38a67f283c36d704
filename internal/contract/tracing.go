package contract

// Environment variables of `relayworker relay` for OpenTelemetry export
// (docs/monitoring.md, "Tracing"): the standard OTEL_* names, which the worker's
// OTLP exporter reads itself.
const (
	EnvOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	// OTLPProtocol is the only OTLP protocol the worker ships.
	OTLPProtocol = "http/protobuf"
)
