#!/usr/bin/env bash
# Smoke test of java.sh: provisions and starts the real Kafka and OpenSearch on free loopback ports in a
# throw-away state dir, proves with real clients that the features kubesearch relies on work, restarts
# both (SIGTERM and kill -9) on their existing state, then stops them by their recorded PIDs.
# Prints the figures asked for: provisioning time, start-to-ready time, resident memory.
#
#   tests/testbed/java-smoke.sh            # uses the shared cache ($CACHE_DIR, ~/.m2)
#   KEEP=1 tests/testbed/java-smoke.sh     # leave the state dir (logs) behind
set -euo pipefail

# A private state dir, set before lib.sh reads it, so a running test bed is never touched.
export KUBESEARCH_TESTBED_DIR=${KUBESEARCH_TESTBED_DIR:-$(mktemp -d /tmp/kubesearch-java-smoke.XXXXXX)}
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/lib.sh"
source "$here/java.sh"

cleanup() {
  local rc=$?
  stop_service kafka 20
  stop_service opensearch 20
  if [[ $rc != 0 ]]; then log "FAILED (rc $rc); logs in $LOG_DIR"; fi
  if [[ -z ${KEEP:-} && $rc == 0 ]]; then rm -rf "$STATE_DIR"; fi
}
trap cleanup EXIT

fail() { log "FAIL: $*"; exit 1; }
ok() { log "ok: $*"; }
rss_mib() { local pid; read -r pid _ < "$PID_DIR/$1.pid"; awk '/^VmRSS/ {printf "%d", $2 / 1024}' "/proc/$pid/status"; }
now() { date +%s.%N; }
since() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }

declare -A figure

# --- provisioning (cold when the cache is empty, a no-op otherwise) -----------------------------------
t=$(now); kafka_provision; figure[kafka_provision]=$(since "$t")
t=$(now); opensearch_provision; figure[opensearch_provision]=$(since "$t")

kport=$(free_port); kcport=$(free_port); hport=$(free_port); tport=$(free_port)

# --- start both, one after the other so each start-to-ready time is its own --------------------------
t=$(now); kafka_start "$kport" "$kcport"; figure[kafka_ready]=$(since "$t")
t=$(now); opensearch_start "$hport" "$tport"; figure[opensearch_ready]=$(since "$t")
# Resident memory right after start (again at the end, after the work and the restarts).
figure[kafka_rss_mib_after_start]=$(rss_mib kafka)
figure[opensearch_rss_mib_after_start]=$(rss_mib opensearch)

# Nothing may listen beyond loopback. Java's sockets are IPv6 ones, so ss may show 127.0.0.1 as
# [::ffff:127.0.0.1].
for p in "$kport" "$kcport" "$hport" "$tport"; do
  addrs=$(ss -Hltn "sport = :$p" | awk '{print $4}')
  [[ -n $addrs ]] || fail "nothing listens on $p"
  grep -Evq '^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):' <<<"$addrs" && fail "port $p listens beyond 127.0.0.1: $addrs"
  log "listening: $(tr '\n' ' ' <<<"$addrs")"
done
ok "all four ports listen on 127.0.0.1 only"

# --- OpenSearch ----------------------------------------------------------------------------------------
os="http://127.0.0.1:$hport"
# curl_json METHOD PATH [BODY] prints the response; the body is JSON, or NDJSON for _bulk.
curl_json() {
  local ctype=application/json body=(); [[ $2 == *_bulk* ]] && ctype=application/x-ndjson
  (($# > 2)) && body=(--data-binary "$3")
  curl -sS --max-time 60 -X "$1" -H "Content-Type: $ctype" "$os$2" "${body[@]}"
}
# jqe FILTER: the JSON on stdin must satisfy FILTER; otherwise show (the start of) the JSON and fail.
jqe() {
  local in; in=$(cat)
  jq -e "$@" >/dev/null <<<"$in" || { printf '%s\n' "${in:0:2000}" >&2; fail "jq $* did not hold"; }
}

curl_json GET / | jq -r '"OpenSearch \(.version.distribution) \(.version.number), lucene \(.version.lucene_version)"'
curl_json GET '/_cat/plugins?h=component' >/dev/null
curl_json GET '/_nodes/plugins' | jq -r '[.nodes[].plugins[].name] | "plugins: \(join(", "))"'

# An index like the indexer's: a flat_object for the Kubernetes object (dotted label keys and all).
curl_json PUT /smoke-objects '{
  "settings": {"number_of_shards": 2, "number_of_replicas": 0},
  "mappings": {"properties": {
    "cluster": {"type": "keyword"}, "key": {"type": "keyword"}, "rv": {"type": "long"},
    "object": {"type": "flat_object"}}}}' | jqe '.acknowledged == true'
ok "index with a flat_object mapping created"

# _bulk with external_gte versions (the resourceVersion-derived version of the indexer): 3 members x 4
# objects of the same names; then a replay of an equal version (accepted by _gte) and an older one
# (refused with a 409 version conflict).
bulk=$(for c in member1 member2 member3; do for i in 1 2 3 4; do
  printf '{"index":{"_index":"smoke-objects","_id":"%s/default/web-%d","version":%d,"version_type":"external_gte"}}\n' "$c" "$i" $((100 + i))
  printf '{"cluster":"%s","key":"%s/default/web-%d","rv":%d,"object":{"kind":"Deployment","metadata":{"name":"web-%d","namespace":"default","labels":{"app.kubernetes.io/name":"web","app.kubernetes.io/part-of":"shop"}},"spec":{"replicas":%d}}}\n' "$c" "$c" "$i" $((100 + i)) "$i" "$i"
done; done)
curl_json POST '/_bulk?refresh=true' "$bulk"$'\n' | jqe '.errors == false and (.items | length) == 12'
replay='{"index":{"_index":"smoke-objects","_id":"member1/default/web-1","version":101,"version_type":"external_gte"}}
{"cluster":"member1","key":"member1/default/web-1","rv":101,"object":{"kind":"Deployment"}}
{"index":{"_index":"smoke-objects","_id":"member1/default/web-2","version":50,"version_type":"external_gte"}}
{"cluster":"member1","key":"member1/default/web-2","rv":50,"object":{"kind":"Deployment"}}
'
curl_json POST '/_bulk?refresh=true' "$replay" |
  jqe '.items[0].index.status == 200 and .items[1].index.status == 409 and .items[1].index.error.type == "version_conflict_engine_exception"'
ok "_bulk with version_type=external_gte: 12 indexed, equal version accepted, older version 409"

# flat_object: a query on a dotted label key inside the object.
curl_json POST /smoke-objects/_search '{"query":{"term":{"object.metadata.labels.app.kubernetes.io/name":"web"}},"size":0,"track_total_hits":true}' |
  jqe '.hits.total.value == 11'
ok "flat_object term query on a dotted label key: 11 hits (one document was replaced by a stub)"

# Point in time + search_after, 5 per page, until exhausted: must return all 12 keys exactly once.
pit=$(curl_json POST '/smoke-objects/_search/point_in_time?keep_alive=1m' | jq -r .pit_id)
[[ -n $pit && $pit != null ]] || fail "no pit_id"
after=null; seen=()
while :; do
  body=$(jq -nc --arg pit "$pit" --argjson after "$after" \
    '{size: 5, pit: {id: $pit, keep_alive: "1m"}, sort: [{key: "asc"}], _source: ["key"]} + (if $after == null then {} else {search_after: $after} end)')
  page=$(curl_json POST /_search "$body")
  n=$(jq '.hits.hits | length' <<<"$page")
  ((n > 0)) || break
  mapfile -t -O "${#seen[@]}" seen < <(jq -r '.hits.hits[]._source.key' <<<"$page")
  after=$(jq -c '.hits.hits[-1].sort' <<<"$page")
done
[[ ${#seen[@]} == 12 && $(printf '%s\n' "${seen[@]}" | sort -u | wc -l) == 12 ]] || fail "PIT paging saw ${#seen[@]} keys"
curl_json DELETE /_search/point_in_time "{\"pit_id\":[\"$pit\"]}" | jqe '.pits[0].successful == true'
ok "point in time + search_after paged all 12 documents in pages of 5, PIT deleted"

# _delete_by_query (the reindex module): drop one member's documents.
curl_json POST '/smoke-objects/_delete_by_query?refresh=true&conflicts=proceed' '{"query":{"term":{"cluster":"member2"}}}' |
  jqe '.deleted == 4 and (.failures | length) == 0'
curl_json GET /smoke-objects/_count | jqe '.count == 8'
ok "_delete_by_query deleted member2's 4 documents, 8 left"

# --- Kafka ---------------------------------------------------------------------------------------------
kb="127.0.0.1:$kport"
kafka_java org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$kb" | grep -q "^$kb (id: 1 rack: null isFenced: false)" ||
  fail "BrokerApiVersionsCommand did not list broker 1 unfenced"
ok "BrokerApiVersionsCommand: broker 1 registered and unfenced"

# One small and one ~1.4 MiB record (a big Kubernetes object) through Kafka's own console producer,
# into a topic that auto-creation makes. The producer's own max.request.size (1 MiB by default) must be
# raised; the broker already takes 4 MiB.
big=$(head -c 1100000 /dev/urandom | base64 -w0)   # 1,466,668 bytes, no newline
big_sum=$(printf '%s' "$big" | sha256sum | cut -d' ' -f1)
printf 'small\thello kubesearch\nbig\t%s\n' "$big" |
  kafka_java org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$kb" --topic smoke-objects \
    --reader-property parse.key=true --reader-property key.separator=$'\t' \
    --command-property max.request.size=4194304 --command-property acks=all \
  || fail "ConsoleProducer failed"
ok "produced a small and a ${#big}-byte record"

kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$kb" --describe --topic smoke-objects |
  grep -q 'PartitionCount: 6' || fail "auto-created topic does not have 6 partitions"
kafka_java org.apache.kafka.tools.ConfigCommand --bootstrap-server "$kb" --describe --all \
  --entity-type topics --entity-name smoke-objects | grep -q 'max.message.bytes=4194304' ||
  fail "topic max.message.bytes is not 4194304"
ok "topic auto-created with 6 partitions and max.message.bytes=4194304"

# consume_all: both records through a consumer group (the group coordinator and __consumer_offsets with
# one replica must work), printing key TAB value.
consume_all() {
  kafka_java org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$kb" --topic smoke-objects \
    --group "$1" --from-beginning --max-messages 2 --timeout-ms 60000 \
    --formatter-property print.key=true --formatter-property key.separator=$'\t'
}
check_consumed() {
  local out=$1
  grep -qx $'small\thello kubesearch' <<<"$out" || fail "small record not consumed"
  [[ $(awk -F'\t' '$1 == "big" {printf "%s", $2}' <<<"$out" | sha256sum | cut -d' ' -f1) == "$big_sum" ]] ||
    fail "big record not consumed intact"
}
check_consumed "$(consume_all smoke-group-1)"
ok "consumed both records through consumer group smoke-group-1; the big one intact"

# --- restarts on the existing state --------------------------------------------------------------------
# kill9 NAME: SIGKILL the service by its recorded PID, and reap it (it is this shell's child) so bash
# reports no "Killed" job.
kill9() {
  local pid; read -r pid _ < "$PID_DIR/$1.pid"
  kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
}
# A clean stop (SIGTERM) and start, then kill -9 and start: the fault tests' path. The data must survive.
stop_service kafka 30
t=$(now); kafka_start "$kport" "$kcport"; figure[kafka_restart]=$(since "$t")
kill9 kafka
t=$(now); kafka_start "$kport" "$kcport"; figure[kafka_restart_after_kill9]=$(since "$t")
check_consumed "$(consume_all smoke-group-2)"
ok "Kafka restarted after SIGTERM and after kill -9; the records are still there"

stop_service opensearch 30
t=$(now); opensearch_start "$hport" "$tport"; figure[opensearch_restart]=$(since "$t")
kill9 opensearch
t=$(now); opensearch_start "$hport" "$tport"; figure[opensearch_restart_after_kill9]=$(since "$t")
curl_json GET /smoke-objects/_count | jqe '.count == 8'
ok "OpenSearch restarted after SIGTERM and after kill -9; 8 documents still there"

# --- figures -------------------------------------------------------------------------------------------
figure[kafka_rss_mib_at_end]=$(rss_mib kafka)
figure[opensearch_rss_mib_at_end]=$(rss_mib opensearch)
log "figures (seconds, MiB):"
for k in kafka_provision opensearch_provision kafka_ready opensearch_ready kafka_restart \
  kafka_restart_after_kill9 opensearch_restart opensearch_restart_after_kill9 \
  kafka_rss_mib_after_start opensearch_rss_mib_after_start kafka_rss_mib_at_end opensearch_rss_mib_at_end; do
  printf '  %-32s %s\n' "$k" "${figure[$k]}" >&2
done
log "all smoke checks passed"
