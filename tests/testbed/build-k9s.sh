#!/usr/bin/env bash
# Builds k9s, the terminal UI the e2e drives the facade with (TestRealClients/k9s), from the Go module
# proxy into its own version-keyed cache folder, and prints the binary's path. A no-op when it is
# there (16 minutes cold on 2 busy cores, 9 CPU-minutes). Not part of build.sh: only that test needs
# it. k9s has its own dependency graph (Helm, client-go 0.34, an image scanner), so it is installed
# as its own module; the version is stamped as k9s' Makefile does (`k9s version`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

go_install_tool k9s "$K9S_VERSION" "$K9S_BIN_DIR" \
  "-s -w -X github.com/derailed/k9s/cmd.version=$K9S_VERSION" github.com/derailed/k9s
echo "$K9S_BIN_DIR/k9s"
