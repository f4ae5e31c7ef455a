#!/usr/bin/env bash
# Builds the Helm CLI the e2e tests drive the facade with, from the Go module proxy into its own
# version-keyed cache folder, and prints the binary's path. A no-op when it is there (about 5
# minutes cold on 2 busy cores, 3 CPU-minutes). Not part of build.sh: only the Helm e2e needs it, and
# a cache of the test bed's binaries stays valid without it. Helm has its own dependency graph, so
# it is installed as its own module, like kwok; the version is stamped as Helm's Makefile does, so
# `helm version` names it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

go_install_tool helm "$HELM_VERSION" "$HELM_BIN_DIR" \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm.sh/helm/v3/cmd/helm
echo "$HELM_BIN_DIR/helm"
