# The test bed's Java services: a real Apache Kafka broker and a real OpenSearch node, both assembled from
# Maven Central artifacts only (no tarballs, no Docker) and started on loopback.
# Sourced by bash after lib.sh, never run. Uses lib.sh's CACHE_DIR, STATE_DIR, LOG_DIR, PID_DIR, log,
# run_service and free_port.
#
#   kafka_provision                    jars of kafka_2.13:$KAFKA_VERSION into $CACHE_DIR/kafka-$KAFKA_VERSION/libs
#   kafka_start PORT CONTROLLER_PORT [SECURE_PORT]   single-node KRaft broker+controller, data in $STATE_DIR/kafka
#   opensearch_provision               launcher + jars into $CACHE_DIR/opensearch-$OPENSEARCH_VERSION/libs
#   opensearch_start HTTP_PORT TRANSPORT_PORT   single node, home in $STATE_DIR/opensearch
#
# All four return non-zero on failure (they never exit the caller's shell). The start functions return
# only once the service answers for real; they provision first when needed, and work again on the
# state left by a previous run, also after kill -9. Stop the services with `stop_service kafka` and
# `stop_service opensearch`.

[[ -n ${CACHE_DIR:-} && -n ${STATE_DIR:-} ]] || { echo "java.sh: source lib.sh first" >&2; return 1; }
TESTBED_SRC="$ROOT/tests/testbed"

# The JDK both services run on. Kafka 4.x brokers need Java 17 or newer; OpenSearch 2.19 supports 17 and
# is not tested by its makers on JDKs that have removed the security manager (24+), so the machine's
# Java 17 is preferred over whatever `java` is first on PATH. KUBESEARCH_JAVA overrides.
if [[ -n ${KUBESEARCH_JAVA:-} ]]; then
  JAVA_BIN=$KUBESEARCH_JAVA
elif [[ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]]; then
  JAVA_BIN=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
else
  JAVA_BIN=java
fi

KAFKA_CACHE="$CACHE_DIR/kafka-$KAFKA_VERSION"
OPENSEARCH_CACHE="$CACHE_DIR/opensearch-$OPENSEARCH_VERSION"

# ---------------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------------

# _java_stamp VERSION FILE... prints one line identifying the inputs of a provisioning: the version and
# a hash of the pom and sources. The marker file holds it, so editing a pom re-provisions, while an
# unchanged cache costs only this hash (no mvn run).
_java_stamp() {
  local version=$1; shift
  printf '%s ' "$version"
  cat "$@" | sha256sum | cut -d' ' -f1
}

# _java_provision NAME DIR POM STAMP MVN_ARGS... runs Maven once to fill DIR/libs, unless DIR/.provisioned
# already holds STAMP. A lock on DIR.lock serialises concurrent callers (parallel test packages); the
# marker is written last, so an interrupted run is redone rather than trusted.
_java_provision() {
  local name=$1 dir=$2 pom=$3 stamp=$4; shift 4
  [[ -f $dir/.provisioned && $(<"$dir/.provisioned") == "$stamp" ]] && return 0
  mkdir -p "$CACHE_DIR"
  (
    flock 9
    # Another caller may have finished while this one waited for the lock.
    [[ -f $dir/.provisioned && $(<"$dir/.provisioned") == "$stamp" ]] && exit 0
    local start=$SECONDS
    log "provisioning $name from Maven Central into $dir"
    rm -rf "$dir" && mkdir -p "$dir/libs" || exit 1
    # Maven's output goes to DIR.mvn.log (shown on failure): -q still prints colour codes. Maven's local
    # repository (~/.m2) is the download cache, so re-provisioning after a pom edit is mostly offline.
    if ! mvn -B -ntp -f "$pom" "$@" >"$dir.mvn.log" 2>&1; then
      log "ERROR: mvn failed provisioning $name; end of $dir.mvn.log:"
      grep -E '^\[(ERROR|WARNING)\]' "$dir.mvn.log" | tail -n 20 >&2
      exit 1
    fi
    echo "$stamp" > "$dir/.provisioned"
    log "provisioned $name in $((SECONDS - start))s"
  ) 9>"$dir.lock"
}

# _java_wait NAME DESC STALL CMD... waits for a JVM service as lib.sh's wait_service does: given up at
# once when it has died, when its log has been quiet for STALL seconds, or after 4 × STALL.
_java_wait() { wait_service "$@"; }

# _port_open PORT succeeds when something accepts TCP connections on 127.0.0.1:PORT.
_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# _logged_since_start NAME PATTERN succeeds when PATTERN is in what the current run of service NAME has
# logged: its log is appended to across restarts, and lib.sh's start_service writes a line
# "==== <time> starting NAME" before each start, so only lines after the last such line count.
_logged_since_start() {
  local log="$LOG_DIR/$1.log" from
  from=$(grep -n "^==== .* starting $1\$" "$log" 2>/dev/null | tail -n 1 | cut -d: -f1)
  [[ -n $from ]] && tail -n "+$from" "$log" | grep -q -- "$2"
}

# ---------------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------------

# kafka_provision: idempotent. Resolves org.apache.kafka:kafka_2.13:$KAFKA_VERSION with its runtime
# dependencies, Kafka's own tools (console producer/consumer, API versions, config commands) and the
# log4j2 backend into $KAFKA_CACHE/libs. Fast no-op when the marker matches.
kafka_provision() {
  local pom="$TESTBED_SRC/kafka/pom.xml"
  _java_provision "kafka $KAFKA_VERSION" "$KAFKA_CACHE" "$pom" "$(_java_stamp "$KAFKA_VERSION" "$pom")" \
    -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$KAFKA_CACHE/libs"
}

# kafka_classpath prints the classpath for running Kafka's classes (broker and tools) with java -cp.
kafka_classpath() { printf '%s' "$KAFKA_CACHE/libs/*"; }

# kafka_java ARGS... runs a JVM on the Kafka classpath with a small heap and console logging at WARN,
# for Kafka's command-line classes (e.g. org.apache.kafka.tools.ConsoleProducer).
kafka_java() {
  "$JAVA_BIN" -Xms32m -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$STATE_DIR/kafka/log4j2-tools.properties" -Dlog4j.shutdownHookEnabled=false \
    -cp "$(kafka_classpath)" "$@"
}

# kafka_ready PORT checks once (no waiting) that the Kafka started last is ready on 127.0.0.1:PORT:
# "Kafka Server started" is logged by KafkaRaftServer only after BrokerServer.startup has waited for the
# broker to be registered with the controller and unfenced, i.e. when it can lead partitions and take
# produce requests; the port check guards against a log line without a listener. Cheap (no JVM; a
# Kafka tool such as BrokerApiVersionsCommand takes 2-5 s per try here), so it can be polled, and it also
# serves after a restart by svc.sh start: `_java_wait kafka DESC TIMEOUT kafka_ready PORT`.
kafka_ready() { _port_open "$1" && _logged_since_start "${2:-kafka}" 'Kafka Server started'; }

# kafka_start PORT CONTROLLER_PORT starts a single-node KRaft Kafka (broker and controller in one
# process) on 127.0.0.1:PORT (clients, PLAINTEXT) and 127.0.0.1:CONTROLLER_PORT (KRaft controller),
# data in $STATE_DIR/kafka, config in $STATE_DIR/kafka/server.properties, log in $LOG_DIR/kafka.log.
# Returns once the broker has registered with the controller, been unfenced and accepts connections.
# With SECURE_PORT, a SASL_SSL listener there too, for the clients' TLS and SASL: the serving key
# and certificate in $STATE_DIR/kafka/tls/broker.p12 (password in broker.pass), mechanisms PLAIN (one
# user, from tls/plain-username and tls/plain-password), SCRAM-SHA-256 and SCRAM-SHA-512 (users are
# created by whoever needs them, through the admin API). No authorizer: any authenticated client may
# do anything.
#
# A cluster of several brokers (the HA test bed, up.sh): KAFKA_NODE_ID (1, 2, ...) names the node,
# whose service, folder and log are kafka-<id>; KAFKA_VOTERS is the quorum ("1@127.0.0.1:port,...",
# every node a controller and a broker); KAFKA_CLUSTER_ID, the same for every node, formats their
# storage. Internal topics then get min(3, nodes) replicas and min.insync.replicas one less (at
# least 1), as the product's own topics do.
kafka_start() {
  local port=${1:?kafka_start PORT CONTROLLER_PORT} cport=${2:?kafka_start PORT CONTROLLER_PORT} sport=${3:-}
  local id=${KAFKA_NODE_ID:-1} voters=${KAFKA_VOTERS:-1@127.0.0.1:$cport} name=kafka
  [[ -n ${KAFKA_VOTERS:-} ]] && name=kafka-$id
  local nodes rf isr
  nodes=$(tr ',' '\n' <<<"$voters" | grep -c .)
  rf=$(( nodes < 3 ? nodes : 3 )); isr=$(( rf > 1 ? rf - 1 : 1 ))
  local dir="$STATE_DIR/$name"
  kafka_provision || return 1
  mkdir -p "$dir/data" "$LOG_DIR" || return 1
  local listeners="PLAINTEXT://127.0.0.1:$port" protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT" secure=""
  # KAFKA_ADVERTISED_PORT: the broker is reached through a proxy there (the HA test bed's partition).
  local advertised="PLAINTEXT://127.0.0.1:${KAFKA_ADVERTISED_PORT:-$port}"
  if [[ -n $sport ]]; then
    local tls="$STATE_DIR/kafka/tls" pass
    pass=$(<"$tls/broker.pass")
    listeners+=",SASL_SSL://127.0.0.1:$sport"; advertised+=",SASL_SSL://127.0.0.1:$sport"
    protocols+=",SASL_SSL:SASL_SSL"
    secure="sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$tls/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$pass
listener.name.sasl_ssl.ssl.key.password=$pass
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$(<"$tls/plain-username")=\"$(<"$tls/plain-password")\";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
  fi

  # Rewritten at every start so a restart picks up edits here; nothing in it is state. The quorum is
  # static (controller.quorum.voters), which is not recorded in the metadata log, so a restart on other
  # ports would work too.
  cat > "$dir/server.properties" <<EOF
# Written by tests/testbed/java.sh (kafka_start); rewritten at every start.
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=$listeners,CONTROLLER://127.0.0.1:$cport
advertised.listeners=$advertised
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$dir/data
$secure

# Topics appear on first use, as the collector expects, with several partitions so that per-key
# ordering across partitions is really exercised.
auto.create.topics.enable=true
num.partitions=6
default.replication.factor=$rf
min.insync.replicas=$isr

# Internal topics replicated as far as the brokers allow (one broker: one replica).
offsets.topic.replication.factor=$rf
# Kafka's default of 50 offsets partitions makes every consumer group's first join slow on a test bed.
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr

# Consumer groups form at once instead of after the default 3 s.
group.initial.rebalance.delay.ms=0

# Kubernetes objects reach 1.5 MiB of JSON. message.max.bytes is the largest record batch the broker
# takes and also the default of every topic's max.message.bytes (there is no separate broker setting
# for the latter). The fetch and request limits must be at least as large.
message.max.bytes=4194304
replica.fetch.max.bytes=4194304
socket.request.max.bytes=104857600
fetch.max.bytes=57671680
EOF

  # Kafka 4.x logs through log4j2. Everything to stdout, which run_service appends to $LOG_DIR/kafka.log.
  cat > "$dir/log4j2.properties" <<'EOF'
# Written by tests/testbed/java.sh: the broker logs to stdout only.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
# Per-request and per-partition state-change logging is far too chatty for a test bed (the
# distribution sends the latter to a file of its own).
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
EOF
  # The command-line tools (kafka_java) log only warnings, to stderr, so their stdout stays clean.
  cat > "$dir/log4j2-tools.properties" <<'EOF'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
EOF

  # KRaft storage must be formatted once with a cluster id. Skipped when meta.properties exists (a
  # restart), which also saves a JVM start; --ignore-formatted keeps it idempotent even if a previous
  # format was interrupted after writing some directories.
  if [[ ! -f $dir/data/meta.properties ]]; then
    local cluster_id=${KAFKA_CLUSTER_ID:-$(kafka_cluster_id)}
    log "formatting Kafka storage in $dir/data (cluster id $cluster_id)"
    kafka_java kafka.tools.StorageTool format --config "$dir/server.properties" --cluster-id "$cluster_id" \
      --ignore-formatted >>"$LOG_DIR/$name.log" 2>&1 \
      || { log "ERROR: formatting Kafka storage failed, see $LOG_DIR/$name.log"; return 1; }
  fi

  local start=$SECONDS
  log "starting Kafka $KAFKA_VERSION ($name) on 127.0.0.1:$port (controller 127.0.0.1:$cport)"
  # JVM flags follow kafka-server-start.sh / kafka-run-class.sh (G1 with short pauses), with a heap for
  # a test bed rather than the script's 1 GiB. ExitOnOutOfMemoryError: a dead broker is a clear failure,
  # a half-dead one is not. log4j's shutdown hook off: the broker logs its own shutdown, which log4j
  # would otherwise refuse ("JVM is shutting down") and hand to a fallback logger; the console appender
  # flushes every line, so nothing is lost.
  run_service "$name" "$JAVA_BIN" -Xms256m -Xmx768m \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$dir/log4j2.properties" \
    -Dlog4j.shutdownHookEnabled=false \
    -Dkafka.logs.dir="$LOG_DIR" \
    -cp "$(kafka_classpath)" kafka.Kafka "$dir/server.properties"
  _java_wait "$name" "Kafka on 127.0.0.1:$port" 180 kafka_ready "$port" "$name" || return 1
  log "Kafka ($name) ready on 127.0.0.1:$port in $((SECONDS - start))s"
}

# kafka_cluster_id prints a new KRaft cluster id: a Kafka Uuid is 16 random bytes in unpadded
# base64url; one starting with '-' would read as an option.
kafka_cluster_id() {
  python3 -c 'import base64,os
while True:
    s = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    if not s.startswith("-"): print(s); break'
}

# ---------------------------------------------------------------------------------------------------
# OpenSearch
# ---------------------------------------------------------------------------------------------------

# opensearch_provision: idempotent. Builds the launcher in tests/testbed/opensearch (see
# OpenSearchNode.java) and copies it with org.opensearch:opensearch:$OPENSEARCH_VERSION, the modules
# transport-netty4, reindex, analysis-common and mapper-extras and their dependencies into
# $OPENSEARCH_CACHE/libs. Maven's build directory is $OPENSEARCH_CACHE/build, outside the clone.
opensearch_provision() {
  local src="$TESTBED_SRC/opensearch"
  local stamp
  stamp=$(_java_stamp "$OPENSEARCH_VERSION" "$src/pom.xml" $(find "$src/src" -type f -name '*.java' | sort)) || return 1
  _java_provision "opensearch $OPENSEARCH_VERSION" "$OPENSEARCH_CACHE" "$src/pom.xml" "$stamp" \
    -Dopensearch.version="$OPENSEARCH_VERSION" -Dtestbed.build.dir="$OPENSEARCH_CACHE/build" \
    -Dtestbed.libs.dir="$OPENSEARCH_CACHE/libs" \
    package dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$OPENSEARCH_CACHE/libs"
}

# opensearch_ready HTTP_PORT checks once that the node answers and the cluster is at least yellow (all
# primaries allocated). It waits up to 4 s server-side, so polling it does not spin.
opensearch_ready() {
  curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$1/_cluster/health?wait_for_status=yellow&timeout=4s"
}

# opensearch_start HTTP_PORT TRANSPORT_PORT starts a single OpenSearch node with HTTP on
# 127.0.0.1:HTTP_PORT and transport on 127.0.0.1:TRANSPORT_PORT; path.home is $STATE_DIR/opensearch
# (config/, data/, logs/ beneath it), its log is $LOG_DIR/opensearch.log. Returns once
# GET /_cluster/health?wait_for_status=yellow answers 200.
#
# A cluster of several nodes (the HA test bed, up.sh): OPENSEARCH_NODE (1, 2, ...) names the node,
# whose service, home and log are opensearch-<n>; OPENSEARCH_SEEDS lists every node's transport
# address and OPENSEARCH_NODES their names, all cluster-manager-eligible data nodes.
opensearch_start() {
  local http=${1:?opensearch_start HTTP_PORT TRANSPORT_PORT} transport=${2:?opensearch_start HTTP_PORT TRANSPORT_PORT}
  local name=opensearch node=testbed discovery="discovery.type: single-node"
  if [[ -n ${OPENSEARCH_SEEDS:-} ]]; then
    name=opensearch-${OPENSEARCH_NODE:?OPENSEARCH_NODE with OPENSEARCH_SEEDS}; node=testbed-$OPENSEARCH_NODE
    # Fault detection as README "High availability" asks an operator to set it: a node that stops
    # answering (hung, or cut off) is removed after 3 checks of 5 s instead of 3 of 10 s, and a cluster
    # manager replaced as soon; a publication waits 15 s, not 30, for a node that cannot apply it (the
    # new cluster manager's first one still names the old). The writes held by its shard copies then
    # go on within a minute.
    discovery="discovery.seed_hosts: [$OPENSEARCH_SEEDS]
cluster.initial_cluster_manager_nodes: [${OPENSEARCH_NODES:?OPENSEARCH_NODES with OPENSEARCH_SEEDS}]
cluster.fault_detection.leader_check.timeout: 5s
cluster.fault_detection.leader_check.retry_count: 3
cluster.fault_detection.follower_check.timeout: 5s
cluster.fault_detection.follower_check.retry_count: 3
cluster.publish.timeout: 15s"
  fi
  local home="$STATE_DIR/$name" publish=""
  # OPENSEARCH_PUBLISH_PORT: the other nodes reach this one through a proxy there (the HA test
  # bed's partition).
  [[ -n ${OPENSEARCH_PUBLISH_PORT:-} ]] && publish="transport.publish_port: $OPENSEARCH_PUBLISH_PORT"
  opensearch_provision || return 1
  # plugins/ and modules/ stay empty: the modules come in as classpath plugins (see OpenSearchNode.java).
  mkdir -p "$home"/{config,data,logs,plugins,modules,tmp} "$LOG_DIR" || return 1

  # Rewritten at every start; the node reads it through InternalSettingsPreparer like the distribution.
  cat > "$home/config/opensearch.yml" <<EOF
# Written by tests/testbed/java.sh (opensearch_start); rewritten at every start.
cluster.name: kubesearch-testbed
node.name: $node
path.data: $home/data
path.logs: $home/logs
# Loopback only. With a non-loopback address the node would also enforce the production bootstrap
# checks in the distribution; here it simply must not be reachable from elsewhere.
network.host: 127.0.0.1
http.host: 127.0.0.1
transport.host: 127.0.0.1
http.port: $http
transport.port: $transport
$publish
# One node elects itself, with no discovery; several find each other on loopback.
$discovery
# Test machines' disks may be nearly full; the watermarks would otherwise make indices read-only.
cluster.routing.allocation.disk.threshold_enabled: false
EOF

  # OpenSearch configures log4j2 from config/log4j2.properties (LogConfigurator). Console only, so the
  # node's log is what run_service captures; %node_name is OpenSearch's own pattern converter.
  cat > "$home/config/log4j2.properties" <<'EOF'
# Written by tests/testbed/java.sh: the node logs to stdout only.
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
EOF

  local start=$SECONDS
  log "starting OpenSearch $OPENSEARCH_VERSION ($name) on 127.0.0.1:$http (transport 127.0.0.1:$transport)"
  # JVM flags from the distribution's config/jvm.options for 2.x on JDK 17 that matter here: netty
  # without Unsafe and without direct arenas (OpenSearch manages its buffers), log4j's own shutdown hook
  # off so the node can still log while closing, the COMPAT locale data 2.x date formats expect.
  # ExitOnOutOfMemoryError stands in for the uncaught-exception handler that Bootstrap would install.
  run_service "$name" "$JAVA_BIN" -Xms1g -Xmx1g \
    -XX:+UseG1GC -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30 \
    -XX:+ExitOnOutOfMemoryError -XX:-OmitStackTraceInFastThrow \
    -Djava.io.tmpdir="$home/tmp" -Dfile.encoding=UTF-8 -Djava.awt.headless=true -Djna.nosys=true \
    -Dio.netty.noUnsafe=true -Dio.netty.noKeySetOptimization=true \
    -Dio.netty.recycler.maxCapacityPerThread=0 -Dio.netty.allocator.numDirectArenas=0 \
    -Dlog4j.shutdownHookEnabled=false -Dlog4j2.disable.jmx=true -Dlog4j2.formatMsgNoLookups=true \
    -Djava.locale.providers=SPI,COMPAT \
    -cp "$OPENSEARCH_CACHE/libs/*" kubesearch.testbed.OpenSearchNode "$home"
  _java_wait "$name" "OpenSearch on 127.0.0.1:$http" 180 opensearch_ready "$http" || return 1
  log "OpenSearch ($name) ready on 127.0.0.1:$http in $((SECONDS - start))s"
}
