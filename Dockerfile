# syntax=docker/dockerfile:1
# One static binary, every target: `docker run mnemos -target=extractor`.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mnemos ./cmd/mnemos

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mnemos /usr/local/bin/mnemos
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mnemos"]
CMD ["-target=all"]
