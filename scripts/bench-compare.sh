#!/usr/bin/env bash
# Runs the Go benchmarks of the hot paths (envelope encode and decode, object → document, query
# compile, Table rows, watch event encode: every package with a func Benchmark in its test files,
# found by go list) on the working tree and on BASE (default HEAD~1), COUNT times each (default 6),
# and prints benchstat's comparison, old = BASE, new = the working tree. No services needed.
#
# BASE is checked out with `git worktree add --detach` into a temporary folder, removed on exit. A
# package whose benchmarks do not run in BASE (absent there, or not building) is skipped for the old
# side with a note: a change that adds benchmarks still gets its new numbers. A failing benchmark in
# the working tree fails the script.
#
# Runs are noisy on a shared machine: compare with COUNT of 6 or more, and trust only the deltas
# benchstat does not mark ~.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
BASE=${BASE:-HEAD~1}
COUNT=${COUNT:-6}
BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
log() { printf '%s bench-compare: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[[ $COUNT =~ ^[1-9][0-9]*$ ]] || { log "COUNT must be a positive integer, not \"$COUNT\""; exit 2; }
base=$(git rev-parse --verify --quiet "$BASE^{commit}") || { log "BASE \"$BASE\" is not a commit"; exit 2; }

# Packages are found in the working tree: BASE may lack some of them, never the other way round
# that matters (a benchmark BASE had and the working tree dropped has nothing to compare with).
packages=()
while read -r dir files; do
  [[ -n $files ]] || continue
  if (cd "$dir" && grep -q '^func Benchmark' $files); then
    packages+=(".${dir#"$PWD"}")
  fi
done < <($GO list -f '{{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)
[[ ${#packages[@]} -gt 0 ]] || { log "no packages with benchmarks"; exit 1; }

tmp=$(mktemp -d)
worktree=$tmp/base
cleanup() {
  if [[ -d $worktree ]]; then
    git worktree remove --force "$worktree" || log "could not remove the worktree $worktree"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --quiet --detach "$worktree" "$base"

start=$(date +%s)
log "${#packages[@]} packages, COUNT=$COUNT, old = $BASE ($(git rev-parse --short "$base")), new = working tree"
: >"$tmp/old.txt"
: >"$tmp/new.txt"
skipped=()
for pkg in "${packages[@]}"; do
  # Old then new, package by package, so both sides of one package run close together in time.
  log "$pkg (old)"
  if ! (cd "$worktree" && $GO test -run '^$' -bench . -benchmem -count "$COUNT" "$pkg") >"$tmp/pkg.txt" 2>&1; then
    log "skipped in BASE: $pkg does not run there: $(tail -n 3 "$tmp/pkg.txt" | tr '\n' ' ')"
    skipped+=("$pkg")
  elif ! grep -q '^Benchmark' "$tmp/pkg.txt"; then
    log "skipped in BASE: $pkg has no benchmarks there"
    skipped+=("$pkg")
  else
    cat "$tmp/pkg.txt" >>"$tmp/old.txt"
  fi
  log "$pkg (new)"
  if ! $GO test -run '^$' -bench . -benchmem -count "$COUNT" "$pkg" >"$tmp/pkg.txt" 2>&1; then
    cat "$tmp/pkg.txt" >&2
    log "FAILED in the working tree: $pkg"
    exit 1
  fi
  cat "$tmp/pkg.txt" >>"$tmp/new.txt"
done
log "benchmarks done in $(( $(date +%s) - start ))s"
[[ ${#skipped[@]} -eq 0 ]] || log "new numbers only (not in BASE): ${skipped[*]}"

# benchstat runs outside the clone, so go run neither reads nor touches the module's go.mod.
(cd "$tmp" && GOWORK=off GOFLAGS= $GO run "$BENCHSTAT" old.txt new.txt)
