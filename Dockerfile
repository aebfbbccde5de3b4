# syntax=docker/dockerfile:1
# One static binary, every target: `docker run mnemos -target=extractor`.
#
#   docker build -t mnemos:local --build-arg VERSION=$(git describe --always) --build-arg REVISION=$(git rev-parse HEAD) .
#
# The build stage runs on the builder's own platform and cross-compiles
# (no emulation for multi-platform builds with buildx).
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# grpcnotrace: gRPC (the OTLP/gRPC span exporter) without golang.org/x/net/trace,
# whose html/template keeps every exported method alive (a 60% larger binary).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -tags grpcnotrace -trimpath -buildvcs=false -ldflags="-s -w" -o /out/mnemos ./cmd/mnemos

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), tzdata,
# no shell and no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="mnemos" \
      org.opencontainers.image.description="Memory and context management for hosted AI agents: one binary, every target" \
      org.opencontainers.image.source="https://github.com/mnemos-ai/mnemos" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/mnemos /usr/local/bin/mnemos
# -target=all embeds NATS and keeps its store under the working directory.
WORKDIR /home/nonroot
USER 65532:65532
EXPOSE 8080 9464
# For docker and compose; Kubernetes uses the chart's probes instead.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/mnemos", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mnemos"]
CMD ["-target=all"]
