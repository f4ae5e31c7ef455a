#!/usr/bin/env bash
# make soak: tests/e2e's TestSoak (build tags e2e and soak) on the running test bed for SOAK_MINUTES
# (default 60), reading every SOAK_SAMPLE (default 15s); it writes bench/results/<date>-soak/
# (README.md with the table, samples.json, SVG plots) and fails when a series does not level off
# (bench/soak). The test's log is tee'd to bench/results/<date>-soak.log; the components' logs are
# kept when KUBESEARCH_E2E_LOGDIR names a folder.
set -uo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
if [[ -z ${GOTOOLCHAIN:-} ]]; then
  GOTOOLCHAIN=$(sed -n 's/^export GOTOOLCHAIN := //p' Makefile)
  export GOTOOLCHAIN
fi
minutes=${SOAK_MINUTES:-60}
[[ $minutes =~ ^[1-9][0-9]*$ ]] || { echo "soak: SOAK_MINUTES=$minutes: want a positive whole number of minutes" >&2; exit 2; }

# The test bed: a measurement must not start (and stop) one of its own (bench/testbed.sh).
# shellcheck source=bench/testbed.sh
source "$root/bench/testbed.sh" soak

stamp=$(date -u +%Y-%m-%d-%H%M)
export SOAK_OUT=${SOAK_OUT:-$root/bench/results/$stamp-soak}
[[ -z ${KUBESEARCH_E2E_LOGDIR:-} ]] || mkdir -p "$KUBESEARCH_E2E_LOGDIR"
echo "soak: $minutes minutes, a reading every ${SOAK_SAMPLE:-15s}, report in $SOAK_OUT"
# The run, plus building and seeding, plus the report.
$GO test -tags 'e2e soak' -count=1 -timeout "$((minutes + 20))m" -v -run '^TestSoak$' ./tests/e2e/ 2>&1 | tee "bench/results/$stamp-soak.log"
exit "${PIPESTATUS[0]}"
