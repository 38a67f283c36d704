package config

import (
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// TracingEnabled says whether the environment asks for OTLP export of the relay's
// spans (an OTLP endpoint is set; docs/monitoring.md, "Tracing"), and refuses a
// protocol other than http/protobuf, the only one the worker ships.
func TracingEnabled(getenv Getenv) (bool, error) {
	endpoint := false
	for _, k := range []string{contract.EnvOTLPTracesEndpoint, contract.EnvOTLPEndpoint} {
		if v, ok := getenv(k); ok && v != "" {
			endpoint = true
		}
	}
	if !endpoint {
		return false, nil
	}
	for _, k := range []string{contract.EnvOTLPTracesProtocol, contract.EnvOTLPProtocol} {
		if v, ok := getenv(k); ok && v != "" && v != contract.OTLPProtocol {
			return false, fmt.Errorf("%s=%q: the relay exports OTLP over %s only", k, v, contract.OTLPProtocol)
		}
	}
	return true, nil
}
