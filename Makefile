# outbox-operator Makefile (kubebuilder v4 tradition).
IMG ?= outbox-operator:dev
RELAY_IMG ?= outbox-relayworker:dev
DEVBROKER_IMG ?= outbox-devbroker:dev
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
CONTROLLER_TOOLS_VERSION ?= v0.23.0
# envtest control plane (kube-apiserver, etcd) built from the Go module proxy.
ENVTEST_ASSETS_DIR ?= $(LOCALBIN)/k8s
export KUBEBUILDER_ASSETS ?= $(ENVTEST_ASSETS_DIR)
GO_TEST_FLAGS ?= -count=1 -timeout 45m
# The version every binary reports (internal/buildinfo): the git tag or commit, stamped with -ldflags.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION_LDFLAGS := -X github.com/outbox-operator/outbox-operator/internal/buildinfo.version=$(VERSION)

.PHONY: all
all: build

##@ General
.PHONY: help
help: ## Show targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Development
.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from kubebuilder markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/..." paths="./internal/controller/..." output:crd:artifacts:config=config/crd/bases
	$(MAKE) --no-print-directory chart-crds

.PHONY: chart-crds
chart-crds: ## Copy the generated CRDs, the manager ClusterRole, the alerts and the relay PodMonitor into the Helm chart (test/ops fails on drift).
	rm -f charts/outbox-operator/crds/*.yaml
	cp config/crd/bases/*.yaml charts/outbox-operator/crds/
	cp config/rbac/role.yaml charts/outbox-operator/files/manager-role.yaml
	cp config/prometheus/prometheusrule.yaml config/prometheus/podmonitor.yaml charts/outbox-operator/files/

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: envtest
envtest: ## Build (once) kube-apiserver and etcd for envtest into bin/k8s.
	ENVTEST_ASSETS_DIR=$(ENVTEST_ASSETS_DIR) hack/envtest-assets.sh

.PHONY: postgres
postgres: ## Install PostgreSQL server binaries when missing (Debian package; with PG_VERSION=N also that version's, hack/install-pg-matrix.sh).
	hack/install-postgres.sh
	$(if $(PG_VERSION),hack/install-pg-matrix.sh $(PG_VERSION))

.PHONY: runc
runc: ## Install runc when missing (Debian package; hack/images' runc test uses it).
	hack/install-runc.sh

.PHONY: test
test: postgres envtest vet ## Run every test: units, Postgres + kfake integration, envtest suites, e2e, test/ops, images, and the one-node cluster where the host can run it (PG_VERSION=16: against that PostgreSQL).
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory test-ops
	$(MAKE) --no-print-directory test-gitops
	$(MAKE) --no-print-directory test-images
	$(MAKE) --no-print-directory e2e-cluster

# The supported PostgreSQL majors (internal/pgversion); PG_MATRIX="13 18" runs some.
PG_MATRIX ?= 13 14 15 16 17 18

.PHONY: test-pg-matrix
test-pg-matrix: postgres envtest ## Run the PostgreSQL-facing suites against each supported PostgreSQL version (PG_MATRIX); one pass/fail line per version at the end.
	GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/pg-matrix.sh $(PG_MATRIX)

.PHONY: test-images
test-images: runc ## OCI images: Dockerfile vs builder table, tarball contents, entrypoints under runc (nested module hack/images).
	cd hack/images && go vet ./... && go test $(GO_TEST_FLAGS) -v ./...

.PHONY: test-ops
test-ops: postgres envtest controller-gen ## Helm chart, Prometheus rules and Grafana dashboard checks (nested module test/ops).
	cd test/ops && go vet ./... && CONTROLLER_GEN=$(CONTROLLER_GEN) go test $(GO_TEST_FLAGS) ./...

.PHONY: test-gitops
test-gitops: postgres envtest ## kstatus and the Argo CD health checks of config/argocd against real status objects (nested module test/gitops).
	cd test/gitops && go vet ./... && go test $(GO_TEST_FLAGS) ./...

.PHONY: bench
bench: postgres ## Black-box benchmark: relayworker processes vs Watermill's forwarder, drain and latency; prints a table.
	go run ./hack/bench $(BENCH_ARGS)

.PHONY: bench-large
bench-large: postgres ## The large variants, relay and relay-v2: a 1,000,000-event drain, and a 100k drain behind 1,000,000 rows of history.
	go run ./hack/bench -runs drain -peers relay,relay-v2 -events 1000000
	go run ./hack/bench -runs drain -peers relay,relay-v2 -history 1000000

.PHONY: bench-operator
bench-operator: postgres envtest ## Black-box benchmark of one manager with 50 and 500 pipelines on one database (kube-apiserver + etcd, RBAC user, leader election): reconcile time, idle API requests, CPU, memory, connections; prints a table.
	go run ./hack/bench-operator $(BENCH_OPERATOR_ARGS)

##@ Build
.PHONY: build
build: ## Build manager, relayworker, the dev broker and the kubectl-outbox plugin into bin/.
	CGO_ENABLED=0 go build -ldflags '$(VERSION_LDFLAGS)' -o $(LOCALBIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -ldflags '$(VERSION_LDFLAGS)' -o $(LOCALBIN)/relayworker ./cmd/relayworker
	CGO_ENABLED=0 go build -o $(LOCALBIN)/devbroker ./hack/devbroker
	CGO_ENABLED=0 go build -ldflags '$(VERSION_LDFLAGS)' -o $(LOCALBIN)/kubectl-outbox ./cmd/kubectl-outbox

.PHONY: krew-manifest
krew-manifest: ## Release archives of the plugin (bin/release/*.tar.gz, linux/darwin x amd64/arm64) and the krew manifest plugins/outbox.yaml; needs VERSION=vX.Y.Z.
	go run ./hack/krew -version $(VERSION)

.PHONY: run
run: manifests ## Run the manager against the cluster in ~/.kube/config.
	go run ./cmd/manager

.PHONY: demo
demo: postgres envtest ## The sample pipeline moving events: on the local one-node cluster where the host can run it, else the process-pod fallback.
	hack/cluster/demo.sh

.PHONY: images
images: ## Build the manager, relay and dev broker images as OCI tarballs in bin/images/ (no Docker engine, no base image; docs/images.md).
	cd hack/images && go run . -out $(LOCALBIN)/images -manager-image $(IMG) -relayworker-image $(RELAY_IMG) -devbroker-image $(DEVBROKER_IMG)

.PHONY: docker-build
docker-build: ## Build the manager, relay and dev broker images (needs a Docker engine; `make images` does not).
	docker build --target manager -t $(IMG) .
	docker build --target devbroker -t $(DEVBROKER_IMG) .
	docker build --target relayworker -t $(RELAY_IMG) .

##@ Local cluster (docs/cluster.md)
CLUSTER_KUBECONFIG ?= /var/lib/outbox-cluster/admin.kubeconfig

.PHONY: cluster-deps
cluster-deps: runc ## Debian packages the one-node cluster needs when missing (iptables, conntrack, CNI plugins, openssl).
	hack/cluster/install-deps.sh

.PHONY: cluster-assets
cluster-assets: envtest ## Build (once, cached like envtest) kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl and containerd.
	hack/cluster/assets.sh

.PHONY: cluster-images
cluster-images: images ## The images plus the cluster's own pause (sandbox) image, in bin/images/.
	cd hack/images && go run . -out $(LOCALBIN)/images -only pause

.PHONY: cluster-up
cluster-up: cluster-deps cluster-assets cluster-images ## Start (idempotently) a one-node cluster on this machine; prints its admin kubeconfig. Refuses next to another kubelet, containerd or KUBE-* chains.
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove what it made (only that), restore the sysctls, then check that nothing is left.
	hack/cluster/down.sh
	hack/cluster/check-clean.sh

.PHONY: e2e-cluster
e2e-cluster: ## Up refuses next to foreign KUBE-* chains/kubelet/containerd/addresses; then the product on a real kubelet with foreign canaries that must survive (skips with a reason where the host cannot; E2E_CLUSTER=require fails).
	hack/cluster/e2e.sh

##@ Deployment
.PHONY: install
install: manifests ## Install CRDs into the current cluster.
	kubectl apply -k config/crd

.PHONY: uninstall
uninstall: ## Remove CRDs from the current cluster.
	kubectl delete -k config/crd --ignore-not-found

.PHONY: deploy
deploy: manifests ## Deploy CRDs, RBAC and the manager (config/default).
	kubectl apply -k config/default

.PHONY: undeploy
undeploy: ## Remove everything config/default installs.
	kubectl delete -k config/default --ignore-not-found

##@ Tools
.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
