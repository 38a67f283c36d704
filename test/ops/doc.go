// Package ops tests what an operator of outbox-operator installs next to it: the Helm
// chart (charts/outbox-operator), the Prometheus Operator objects and alerts
// (config/prometheus) and the Grafana dashboard (config/grafana).
//
// It is a module of its own so that Helm and Prometheus (promql, rules), and their
// many dependencies, never enter the root module: the root module is replaced by
// ../.., like hack/bench/peers/watermill. `make test-ops` runs it; `make test` too.
//
// TestMain brings up, once: a real kube-apiserver (envtest) with the project's CRDs and
// the Prometheus Operator's (generated from its Go types by controller-gen), a private
// PostgreSQL, an in-process Kafka-protocol broker and the manager binary (see
// internal/testenv/localstack), so the tests dry-run the rendered manifests on a real
// API server and scrape the real manager and relay processes.
package ops
