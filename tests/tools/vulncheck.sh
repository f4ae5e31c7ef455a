#!/usr/bin/env bash
# govulncheck over the module, against an offline vulnerability database: vuln.go.dev is not
# reachable from CI, the Go module proxy is. The golang.org/x/vulndb module carries the database's
# OSV reports (data/osv/GO-*.json); its own cmd/indexdb writes them in the layout `govulncheck -db
# file://...` reads (index/db.json, index/modules.json, ID/<id>.json). The database is built once
# per vulndb version into the cache outside the clone ($KUBESEARCH_CACHE, ~/.cache/kubesearch), as is
# govulncheck itself.
#
# VULNDB_VERSION: a golang.org/x/vulndb version, default latest (a vulnerability check against a
# pinned database goes stale silently). When the proxy cannot say which is latest, the newest cached
# database is used, with a warning. GOVULNCHECK_VERSION pins the scanner.
#
# Fails (exit 3, govulncheck's) when the code reaches a vulnerable function of a module or of the
# standard library it is built with; vulnerable code the module requires but never calls is listed
# with -show verbose and does not fail.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
GO=${GO:-go}
VULNDB_VERSION=${VULNDB_VERSION:-latest}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}
CACHE_DIR=${KUBESEARCH_CACHE:-$HOME/.cache/kubesearch}
DB_ROOT=$CACHE_DIR/vulndb
log() { printf '%s vulncheck: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# run prints a command, runs it, and on failure says exactly what failed.
run() {
  if ! "$@"; then
    log "FAILED: $*"
    return 1
  fi
}

# The module-proxy queries run outside the clone: they must not read or touch its go.mod.
outside=$(mktemp -d); trap 'rm -rf "$outside"' EXIT

# 1. Which database.
if ! info=$(cd "$outside" && GOFLAGS=-mod=mod GOWORK=off $GO mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" 2>&1); then
  newest=$(ls -1 "$DB_ROOT" 2>/dev/null | grep -v '\.tmp$' | sort | tail -n1 || true)
  if [[ $VULNDB_VERSION == latest && -n $newest && -f $DB_ROOT/$newest/index/db.json ]]; then
    log "WARNING: cannot download golang.org/x/vulndb@latest (go mod download: $info); using the cached database $newest"
    version=$newest
  else
    log "FAILED: go mod download -json golang.org/x/vulndb@$VULNDB_VERSION"
    printf '%s\n' "$info" >&2
    exit 1
  fi
else
  version=$(sed -n 's/^[[:space:]]*"Version": "\(.*\)",$/\1/p' <<<"$info")
  src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
fi
db=$DB_ROOT/$version

# 2. The database, built when not cached.
if [[ ! -f $db/index/db.json || ! -f $db/index/modules.json ]]; then
  if [[ ! -d $src/data/osv ]]; then
    log "FAILED: golang.org/x/vulndb@$version has no data/osv/ (OSV reports) in $src: this script cannot build a database from it"
    ls "$src/data" >&2 || true
    exit 1
  fi
  log "building the database of golang.org/x/vulndb@$version ($(ls "$src/data/osv" | wc -l) reports) into $db"
  rm -rf "$db.tmp"
  mkdir -p "$DB_ROOT"
  # indexdb is built with vulndb's own go.mod (cd outside the clone).
  (cd "$outside" && run env GOFLAGS=-mod=mod GOWORK=off $GO run "golang.org/x/vulndb/cmd/indexdb@$version" \
    -vulns "$src/data/osv" -out "$db.tmp")
  mv "$db.tmp" "$db"
  # Older databases are superseded; keep the previous one as the offline fallback.
  ls -1d "$DB_ROOT"/*/ 2>/dev/null | sed 's:/$::' | grep -v '\.tmp$' | sort | head -n -2 | xargs -r rm -rf
fi

# 3. govulncheck, installed once per version and Go version: it type-checks the code with the
# standard library it was built with, so one built by an older Go cannot read a newer one's.
goversion=$($GO env GOVERSION)
bin=$CACHE_DIR/bin/govulncheck-$GOVULNCHECK_VERSION-$goversion
if [[ ! -x $bin/govulncheck ]]; then
  log "installing golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION into $bin"
  (cd "$outside" && run env GOBIN="$bin" GOFLAGS=-mod=mod GOWORK=off $GO install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION")
fi

# 4. The scan.
log "govulncheck $GOVULNCHECK_VERSION, $($GO env GOVERSION), database golang.org/x/vulndb@$version"
status=0
"$bin/govulncheck" -db "file://$db" ./... || status=$?
case $status in
  0) log "no vulnerable code reached" ;;
  3) log "FAILED: the code reaches known vulnerabilities (above: each with the module or Go release that fixes it)" ;;
  *) log "FAILED: govulncheck -db file://$db ./... exited $status" ;;
esac
exit $status
