# Multi-stage build: static binaries, distroless non-root final images.
#   docker build --target manager     -t outbox-operator:dev .
#   docker build --target relayworker -t outbox-relayworker:dev .
#   docker build --target devbroker   -t outbox-devbroker:dev .
# Without a Docker engine: `make images` (hack/images) builds the same images as OCI
# tarballs; TestDockerfileAgrees there keeps the two in step.
FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY outbox/ outbox/
COPY inbox/ inbox/
COPY hack/devbroker/ hack/devbroker/
ENV CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH}
RUN go build -trimpath -ldflags='-s -w' -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags='-s -w' -o /out/relayworker ./cmd/relayworker && \
    go build -trimpath -ldflags='-s -w' -o /out/devbroker ./hack/devbroker

# The relay image: the operator's pods run "/relayworker relay|migrate|replay|archive".
FROM gcr.io/distroless/static:nonroot AS relayworker
COPY --from=builder /out/relayworker /relayworker
USER 65532:65532
ENTRYPOINT ["/relayworker"]

# The in-memory Kafka-protocol dev broker (not a production broker; data lives in memory).
FROM gcr.io/distroless/static:nonroot AS devbroker
COPY --from=builder /out/devbroker /devbroker
USER 65532:65532
EXPOSE 9092
ENTRYPOINT ["/devbroker", "--listen", ":9092"]

# The operator image (last, so a plain `docker build .` gives the manager).
FROM gcr.io/distroless/static:nonroot AS manager
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
