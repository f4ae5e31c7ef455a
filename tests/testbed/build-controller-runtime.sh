#!/usr/bin/env bash
# Builds the controller-runtime manager TestRealClients drives the facade with
# (tests/clients/controllerruntime, a module of its own) into a cache folder keyed by
# controller-runtime's version and a hash of the module's files, and prints the binary's path. A
# no-op when it is there. Not part of build.sh: only that test needs it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

src="$CLIENTS_DIR/controllerruntime"
grep -q "sigs.k8s.io/controller-runtime $CONTROLLER_RUNTIME_VERSION\$" "$src/go.mod" ||
  die "$src/go.mod does not require controller-runtime $CONTROLLER_RUNTIME_VERSION (lib.sh)"
key=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)
dir="$CACHE_DIR/bin/controller-runtime-$CONTROLLER_RUNTIME_VERSION-$key"

if [[ ! -x "$dir/controllerruntime" ]]; then
  log "building the controller-runtime $CONTROLLER_RUNTIME_VERSION manager (4.5 minutes cold on 2 busy cores, 4.3 CPU-minutes)"
  start=$(date +%s)
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (cd "$src" && go build -trimpath -o "$dir.tmp/controllerruntime" .)
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  log "built in $(( $(date +%s) - start ))s into $dir"
fi
echo "$dir/controllerruntime"
