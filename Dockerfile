# syntax=docker/dockerfile:1
# The hoplite image: `docker build -t hoplite .` at the repository root.
# The binaries are static (CGO_ENABLED=0) and run as an unprivileged
# user on distroless/static, which has CA certificates, /etc/passwd and
# /tmp but no shell. deploy/image_test.go runs the command line below.

# Keep equal to the go directive of go.mod (image_test.go checks it).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Modules first: their layer stays cached until go.mod or go.sum change.
# The caches are the golang image's GOPATH (/go) and GOCACHE.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The health probe is in the deploy module and imports only the standard
# library, so building it downloads nothing.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/hoplite ./cmd/hoplite && \
    cd deploy && go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/hoplite-probe ./cmd/hoplite-probe

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hoplite /out/hoplite-probe /usr/local/bin/
# nonroot (65532) by number, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# The actor system (--bind), the data plane (--data-bind) and the manage
# port (/_health, /metrics, /live/).
EXPOSE 7000 7100 8000
# hoplite-probe GETs $HOPLITE_PROBE_URL (default the manage port's
# /_health on 127.0.0.1:8000, as CMD below binds) and shows
# $HOPLITE_PROBE_CERT to a member with --tls-*; set them when the
# command's --bind or --manage-port differ.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/hoplite-probe"]
ENTRYPOINT ["/usr/local/bin/hoplite"]
# One member on the container's loopback: replace the command to join a
# cluster (a --bind other hosts reach, with --tls-* or --insecure).
CMD ["node", "--bind", "127.0.0.1:7000", "--manage-port", "8000", "--data-bind", "127.0.0.1:7100"]
