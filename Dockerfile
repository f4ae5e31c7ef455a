# syntax=docker/dockerfile:1
# kubesearch's container image: one static binary for every subcommand (collector, indexer, queryapi,
# standalone, kubeconfig, version) on an empty base, run as a non-root user.
#
#   docker build --build-arg VERSION=v0.3.0 --build-arg COMMIT=$(git rev-parse HEAD) -t kubesearch/kubesearch:v0.3.0 .
#   docker run --rm kubesearch/kubesearch:v0.3.0 version
#
# Without Docker, `make image` assembles the same image (same files, user, entrypoint, environment and
# labels) with tests/packaging/tools/image; tests/packaging checks that both agree.

ARG GO_IMAGE=golang:1.26.8-bookworm

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG COMMIT=unknown
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" \
      -o /rootfs/usr/local/bin/kubesearch ./cmd/kubesearch
# The runtime's few files: the CA bundle, and passwd/group naming the non-root user.
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/home/kubesearch /rootfs/data /rootfs/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nkubesearch:x:65532:65532:kubesearch:/home/kubesearch:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nkubesearch:x:65532:\n' > /rootfs/etc/group \
 && chmod 1777 /rootfs/tmp && chmod 0750 /rootfs/home/kubesearch /rootfs/data

FROM scratch
ARG VERSION=dev
ARG COMMIT=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /rootfs/etc/ /etc/
COPY --from=build /rootfs/tmp/ /tmp/
COPY --from=build --chown=65532:65532 /rootfs/home/kubesearch/ /home/kubesearch/
COPY --from=build --chown=65532:65532 /rootfs/data/ /data/
COPY --from=build /rootfs/usr/local/bin/kubesearch /usr/local/bin/kubesearch
ENV PATH=/usr/local/bin HOME=/home/kubesearch SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
LABEL org.opencontainers.image.title="kubesearch" \
      org.opencontainers.image.description="Multi-cluster Kubernetes search: collector, indexer, query API and standalone mode in one binary" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/kubesearch/kubesearch" \
      org.opencontainers.image.base.name="scratch" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.documentation="https://github.com/kubesearch/kubesearch#readme"
USER 65532:65532
WORKDIR /home/kubesearch
ENTRYPOINT ["/usr/local/bin/kubesearch"]
CMD ["--help"]
