# Multi-stage build: static binaries, distroless non-root final images.
#   docker build --target manager     -t outbox-operator:dev .
#   docker build --target relayworker -t outbox-relayworker:dev .
FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY relayworker/ relayworker/
COPY outbox/ outbox/
COPY inbox/ inbox/
ENV CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH}
RUN go build -trimpath -ldflags='-s -w' -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags='-s -w' -o /out/relayworker ./cmd/relayworker

# The relay image: the operator's pods run "/relayworker relay|migrate|replay|archive".
FROM gcr.io/distroless/static:nonroot AS relayworker
COPY --from=builder /out/relayworker /relayworker
USER 65532:65532
ENTRYPOINT ["/relayworker"]

# The operator image (last, so a plain `docker build .` gives the manager).
FROM gcr.io/distroless/static:nonroot AS manager
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
