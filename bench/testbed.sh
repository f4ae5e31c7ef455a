# Sourced by bench/run.sh and bench/soak.sh (with $root set to the repository and $1 the name to
# print): they measure the running test bed and must not start (and stop) one of their own. It
# finds it as tests/testbed does — the three variables of your own services, or the env file of
# `make testbed-up` — and stops the caller when its OpenSearch or Kafka does not answer. It sets
# $opensearch and $broker.
testbed_missing() {
  echo "$bench_name: $1" >&2
  echo "$bench_name: start the test bed with \`make testbed-up\` (or set KUBESEARCH_TESTBED_KUBECONFIG, KAFKA_BROKERS and OPENSEARCH_URL), then run this again" >&2
  exit 1
}
bench_name=${1:-bench}
if [[ -z ${KUBESEARCH_TESTBED_KUBECONFIG:-} || -z ${KAFKA_BROKERS:-} || -z ${OPENSEARCH_URL:-} ]]; then
  envfile=${KUBESEARCH_TESTBED_DIR:-$root/.testbed}/env
  [[ -f $envfile ]] || testbed_missing "no running test bed ($envfile not found)"
  # shellcheck disable=SC1090
  bed=$(set -a; source "$envfile" >/dev/null 2>&1; echo "$OPENSEARCH_URL|$KAFKA_BROKERS")
else
  bed="$OPENSEARCH_URL|$KAFKA_BROKERS"
fi
opensearch=${bed%%|*}
broker=${bed#*|}; broker=${broker%%,*}
curl -fsS -m 5 -o /dev/null "$opensearch" 2>/dev/null || testbed_missing "the test bed's OpenSearch ($opensearch) does not answer"
(exec 3<>"/dev/tcp/${broker%:*}/${broker##*:}") 2>/dev/null || testbed_missing "the test bed's Kafka ($broker) does not answer"
