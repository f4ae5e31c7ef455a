#!/usr/bin/env bash
# Builds the Helm CLI the e2e tests drive the facade with, from the Go module proxy into its own
# version-keyed cache folder, and prints the binary's path. A no-op when it is there. Not part of
# build.sh: only the Helm e2e needs it, and a cache of the test bed's binaries stays valid without it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ! -x "$HELM_BIN_DIR/helm" ]]; then
  log "building Helm $HELM_VERSION (about 5 minutes cold on 2 busy cores, 3 CPU-minutes)"
  start=$(date +%s)
  rm -rf "$HELM_BIN_DIR.tmp" && mkdir -p "$HELM_BIN_DIR.tmp"
  # Helm has its own dependency graph, so it is installed as its own module, like kwok. The version
  # is stamped as Helm's Makefile does, so `helm version` names it.
  GOBIN="$HELM_BIN_DIR.tmp" GOFLAGS=-trimpath go install \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  rm -rf "$HELM_BIN_DIR" && mv "$HELM_BIN_DIR.tmp" "$HELM_BIN_DIR"
  log "built in $(( $(date +%s) - start ))s into $HELM_BIN_DIR"
fi
echo "$HELM_BIN_DIR/helm"
