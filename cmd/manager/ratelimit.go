/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"

	"k8s.io/client-go/rest"
)

// applyRateLimit sets the manager's own limit on its API requests from --kube-api-qps
// and --kube-api-burst. qps 0, the default, keeps controller-runtime's choice: no limit
// in the client, so the API server's priority and fairness paces the manager with
// every other client (a limit in the client only makes reconciles wait in line
// behind each other, docs/operations.md). burst 0 with a qps is twice the qps.
func applyRateLimit(cfg *rest.Config, qps float64, burst int) error {
	switch {
	case qps < 0:
		return fmt.Errorf("--kube-api-qps=%g: must be 0 (no client-side limit) or more", qps)
	case burst < 0:
		return fmt.Errorf("--kube-api-burst=%d: must be 0 (twice --kube-api-qps) or more", burst)
	case qps == 0 && burst > 0:
		return fmt.Errorf("--kube-api-burst=%d needs --kube-api-qps: without a qps the client has no limit to burst above", burst)
	case qps == 0:
		return nil
	}
	if burst == 0 {
		burst = max(1, int(2*qps))
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	return nil
}
