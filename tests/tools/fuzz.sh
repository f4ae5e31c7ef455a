#!/usr/bin/env bash
# Runs every `go test -fuzz` target of the module for FUZZTIME each (default 10s), one after another:
# go test fuzzes one target per package run. Targets are found by their declarations in the test files
# each package builds (go list), so a new FuzzXxx is picked up without touching this script. An input
# that fails is written by go test to <package>/testdata/fuzz/<Target>/ — commit it with the fix, and
# plain `go test` replays it from then on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
log() { printf '%s fuzz: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

targets=()
while read -r dir files; do
  [[ -n $files ]] || continue
  rel=.${dir#"$PWD"}
  for name in $(cd "$dir" && grep -ho '^func Fuzz[A-Za-z0-9_]*(' $files | sed 's/^func //; s/($//' | sort -u); do
    targets+=("$rel:$name")
  done
done < <($GO list -f '{{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)
[[ ${#targets[@]} -gt 0 ]] || { log "no Fuzz targets found"; exit 1; }

start=$(date +%s)
stamp=$(mktemp); trap 'rm -f "$stamp"' EXIT
failed=()
log "${#targets[@]} targets, $FUZZTIME each"
for t in "${targets[@]}"; do
  pkg=${t%%:*} name=${t#*:}
  log "$pkg $name"
  if ! $GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$pkg"; then
    failed+=("$t")
  fi
done
log "done in $(( $(date +%s) - start ))s"
if [[ ${#failed[@]} -gt 0 ]]; then
  log "FAILED: ${failed[*]}"
  new=$(find . -path '*/testdata/fuzz/*' -type f -newer "$stamp" 2>/dev/null || true)
  [[ -z $new ]] || log "failing inputs written (commit them with the fix):"$'\n'"$new"
  exit 1
fi
