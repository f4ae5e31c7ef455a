#!/usr/bin/env bash
# Builds k9s, the terminal UI the e2e drives the facade with (TestRealClients/k9s), from the Go module
# proxy into its own version-keyed cache folder, and prints the binary's path. A no-op when it is
# there. Not part of build.sh: only that test needs it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ! -x "$K9S_BIN_DIR/k9s" ]]; then
  log "building k9s $K9S_VERSION (16 minutes cold on 2 busy cores, 9 CPU-minutes)"
  start=$(date +%s)
  rm -rf "$K9S_BIN_DIR.tmp" && mkdir -p "$K9S_BIN_DIR.tmp"
  # k9s has its own dependency graph (Helm, client-go 0.34, an image scanner), so it is installed as
  # its own module, like Helm and kwok. The version is stamped as k9s' Makefile does (`k9s version`).
  GOBIN="$K9S_BIN_DIR.tmp" GOFLAGS=-trimpath go install \
    -ldflags "-s -w -X github.com/derailed/k9s/cmd.version=$K9S_VERSION" \
    "github.com/derailed/k9s@$K9S_VERSION"
  rm -rf "$K9S_BIN_DIR" && mv "$K9S_BIN_DIR.tmp" "$K9S_BIN_DIR"
  log "built in $(( $(date +%s) - start ))s into $K9S_BIN_DIR"
fi
echo "$K9S_BIN_DIR/k9s"
