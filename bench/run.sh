#!/usr/bin/env bash
# make bench: every benchmark of tests/e2e (build tags e2e and bench) one after another on the running
# test bed, sized by a scale, then bench/report: bench/results/<date>.json, <date>.md (every figure
# beside its goal), SVG plots under <date>/, and the README's section between the bench markers.
#
#   bench/run.sh [--scale small|default|large|fleet]     (or SCALE=...; default: default)
#
# small is a smoke run of a few minutes; default fits in about 15 minutes on 2 cores; large is the
# issues' sizes (100,000 Pods for the query API, the facade's memory and the stores; about an hour).
# fleet is issue 25's fleet: the fleet benchmark alone, 1,000 simulated clusters of 2,000 objects
# ingested by 1, 2 and 3 indexers, and on the first index a fresh query API: time to ready and
# memory, /v1alpha1/fleet, /v1alpha1/clusters, discovery and the collectors' /status, query p50/p99
# per kind through the REST search and the facade, a facade LIST of one namespace and of every Pod
# (hours on 2 cores; BENCHES=... adds the others at large sizes).
# A size variable already set in the environment (BENCH_PODS=...) wins over the scale's.
# BENCHES="stores query" runs only those (names as below), in the usual order.
# The log of the whole run is tee'd to bench/results/<date>-<scale>.log. A benchmark that fails is
# reported and the next one runs; the exit status is 1 if any failed.
set -uo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
# The Makefile's toolchain, when this is run without make.
if [[ -z ${GOTOOLCHAIN:-} ]]; then
  GOTOOLCHAIN=$(sed -n 's/^export GOTOOLCHAIN := //p' Makefile)
  export GOTOOLCHAIN
fi

scale=${SCALE:-default}
while (($#)); do
  case $1 in
    --scale) scale=${2:?--scale needs a value}; shift 2 ;;
    --scale=*) scale=${1#--scale=}; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument $1 (usage: bench/run.sh [--scale small|default|large])" >&2; exit 2 ;;
  esac
done

# Sizes. default is chosen from the time each benchmark took at the issues' sizes (README,
# "Measured"), cut to about 1.5-3 minutes each: collector 10k Pods ~1.5 min once created, indexer
# 50k docs ~4 min, freshness 30 s at 200 writes/s ~1.5 min, roll 50k ~3 min, query 100k ~7 min,
# facade 3k Pods per member ~10 min, facade memory 100k ~7 min, stores 100k ~6 min. The query
# benchmark needs at least 10,000 Pods (its selector asks for a full first page of 100 out of 1%).
size() { # name small default large
  local v
  case $scale in small) v=$2 ;; default) v=$3 ;; large) v=$4 ;; fleet) v=${5:-$4} ;; esac
  export "$1=${!1:-$v}"
}
case $scale in
  small|default|large) ;;
  # Hours: three cold ingests of 2M objects at ~500 documents/s, then the query figures.
  fleet) BENCHES=${BENCHES:-fleet}; BENCH_TIMEOUT=${BENCH_TIMEOUT:-8h} ;;
  *) echo "bench: unknown scale $scale (small, default, large, fleet)" >&2; exit 2 ;;
esac
#    variable                  small  default  large
size BENCH_PODS                500    3000     10000
size BENCH_RESYNC_PODS         1500   9000     100000
size BENCH_DOCS                3000   20000    50000
size BENCH_FRESHNESS_RATE      200    200      200
size BENCH_FRESHNESS_SECONDS   10     20       30
size BENCH_ROLL_DOCS           3000   20000    50000
size BENCH_QUERY_PODS          12000  30000    100000
size BENCH_QUERIES             50     200      1000
size BENCH_FACADE_PODS         200    1000     3000
size BENCH_FACADE_ROUNDS       2      3        5
size BENCH_WATCHERS            10     50       100
size BENCH_WATCH_SECONDS       5      15       20
size BENCH_FACADE_LISTERS      10     10       10
size BENCH_FACADE_MEMORY_PODS  3000   20000    100000
size BENCH_STORE_PODS          2000   20000    100000
size BENCH_STORE_QUERIES       20     100      300
size BENCH_PAGE_PODS           2000   100000   100000
#    variable                  small  default  large  fleet
size BENCH_FLEET_CLUSTERS      20     100      200    1000
size BENCH_FLEET_OBJECTS       500    1000     2000   2000
size BENCH_FLEET_INDEXERS      1      1        1      1,2,3
size BENCH_FLEET_QUERIES       50     100      200    300

# name → test, in the order they run.
all=(collector resync indexer freshness roll query facade facade-memory stores page fleet)
declare -A tests=(
  [collector]=TestBenchCollectorList [resync]=TestBenchColdResync [indexer]=TestBenchIndexer [freshness]=TestBenchFreshness
  [roll]=TestBenchRoll [query]=TestBenchQuery [facade]=TestBenchFacade
  [facade-memory]=TestBenchFacadeMemory [stores]=TestBenchStores [page]=TestBenchSearchPage [fleet]=TestBenchFleetIngest
)
selected=()
if [[ -n ${BENCHES:-} ]]; then
  for b in ${BENCHES//,/ }; do
    [[ -n ${tests[$b]:-} ]] || { echo "bench: unknown benchmark $b (${all[*]})" >&2; exit 2; }
  done
  for b in "${all[@]}"; do
    [[ " ${BENCHES//,/ } " == *" $b "* ]] && selected+=("$b")
  done
else
  selected=("${all[@]}")
fi

# The test bed: a measurement must not start (and stop) one of its own (bench/testbed.sh).
# shellcheck source=bench/testbed.sh
source "$root/bench/testbed.sh" bench

stamp=$(date -u +%Y-%m-%d-%H%M)
mkdir -p bench/results
log=bench/results/$stamp-$scale.log
results=$(mktemp -t kubesearch-bench.XXXXXX.jsonl)
steps=$(mktemp -t kubesearch-bench-steps.XXXXXX.tsv)
trap 'rm -f "$results" "$steps"' EXIT
export BENCH_RESULTS=$results

{
  echo "bench: scale $scale, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), benchmarks: ${selected[*]}"
  env | grep '^BENCH_' | grep -v '^BENCH_RESULTS=' | sort | sed 's/^/bench:   /'
} | tee "$log"

# settle waits, before each benchmark, until OpenSearch has finished what the previous one left it
# (merges, refreshes and bulk writes of its documents): a benchmark measured while the last one's
# segments still merge measures both. At most SETTLE_SECONDS (default 120).
settle() {
  local deadline=$((SECONDS + ${SETTLE_SECONDS:-120})) quiet=0 busy
  while ((SECONDS < deadline)); do
    # The sum of every node's merges.current and indexing.index_current.
    local stats n
    if stats=$(curl -fsS -m 5 "$opensearch/_nodes/stats/indices/merge,indexing" 2>/dev/null); then
      busy=0
      for n in $(grep -oE '"(merges":\{"current|index_current)":[0-9]+' <<<"$stats" | grep -oE '[0-9]+$'); do
        busy=$((busy + n))
      done
    else
      busy=unknown
    fi
    if [[ $busy == 0 ]]; then
      ((++quiet >= 3)) && return 0
    else
      quiet=0
    fi
    sleep 2
  done
  echo "bench: OpenSearch still busy ($busy merges and writes in flight) after ${SETTLE_SECONDS:-120}s; going on" | tee -a "$log"
}

failed=()
for b in "${selected[@]}"; do
  t=${tests[$b]}
  settle
  echo "bench: === $b ($t)" | tee -a "$log"
  start=$SECONDS
  out=$(mktemp -t kubesearch-bench-out.XXXXXX)
  $GO test -tags 'e2e bench' -count=1 -timeout "${BENCH_TIMEOUT:-90m}" -v -run "^$t\$" ./tests/e2e/ 2>&1 | tee -a "$log" "$out"
  status=${PIPESTATUS[0]}
  secs=$((SECONDS - start))
  if grep -q '^testing: warning: no tests to run' "$out"; then
    echo "bench: --- $b: no test $t in tests/e2e, skipped" | tee -a "$log"
    printf '%s\tskipped\t%d\n' "$b" "$secs" >>"$steps"
  elif ((status != 0)); then
    echo "bench: --- $b: FAILED after ${secs}s (the log: $log)" | tee -a "$log"
    printf '%s\tfailed\t%d\n' "$b" "$secs" >>"$steps"
    failed+=("$b")
  else
    echo "bench: --- $b: done in ${secs}s" | tee -a "$log"
    printf '%s\tok\t%d\n' "$b" "$secs" >>"$steps"
  fi
  rm -f "$out"
done

echo "bench: report" | tee -a "$log"
# A fleet run is not the README's table of the usual benchmarks: its figures stay in its results.
readme=README.md
[[ $scale == fleet ]] && readme=
$GO run ./bench/report -results "$results" -steps "$steps" -scale "$scale" -date "$stamp" \
  -out bench/results -readme "$readme" 2>&1 | tee -a "$log"
report_status=${PIPESTATUS[0]}

if ((${#failed[@]})); then
  echo "bench: failed: ${failed[*]}" | tee -a "$log"
  exit 1
fi
exit "$report_status"
