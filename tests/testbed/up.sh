#!/usr/bin/env bash
# Starts the test bed on free loopback ports and writes $STATE_DIR/env (shell-sourceable):
#   - N member clusters (default 3), each its own etcd, kube-apiserver, kube-controller-manager,
#     kube-scheduler and kwok with a few fake nodes — token auth + RBAC, one resourceVersion sequence each;
#   - one Apache Kafka broker (KRaft) and one OpenSearch node; with KUBESEARCH_TESTBED_HA=1, three
#     brokers (each a KRaft controller too, topics replicated 3 times, 2 in sync) and three OpenSearch
#     nodes (one cluster, every node data and cluster-manager-eligible), services kafka-1..3 and
#     opensearch-1..3, for the high availability tests.
# Idempotent: whatever an earlier run left behind (crashed or not) is stopped and removed first.
# KUBESEARCH_TESTBED_KARMADA=1 adds a "Karmada control plane" (karmada.sh): a fourth kube-apiserver with
# the aggregation layer configured. KUBESEARCH_TESTBED_SERVICES=members starts the member clusters only (no Kafka, no OpenSearch, no Java
# needed), as the demo (demo/run.sh) does; KUBESEARCH_TESTBED_KWOK_STAGES names a folder of extra kwok
# Stage files (*.yaml) every member's kwok loads besides the test bed's own.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/lib.sh"
source "$here/java.sh"

MEMBERS=${KUBESEARCH_TESTBED_MEMBERS:-3}
NODES_PER_MEMBER=${KUBESEARCH_TESTBED_NODES:-3}
SERVICES=${KUBESEARCH_TESTBED_SERVICES:-all}
HA=${KUBESEARCH_TESTBED_HA:-0}
[[ $HA == 0 || $HA == 1 ]] || die "KUBESEARCH_TESTBED_HA is 0 or 1, not $HA"
[[ $SERVICES == all || $SERVICES == members ]] || die "KUBESEARCH_TESTBED_SERVICES is all or members, not $SERVICES"
started=$(date +%s)

"$here/down.sh"
"$here/build.sh"
kwok_stages=("$BIN_DIR"/kwok-stages/*.yaml)
if [[ -n ${KUBESEARCH_TESTBED_KWOK_STAGES:-} ]]; then
  kwok_stages+=("$KUBESEARCH_TESTBED_KWOK_STAGES"/*.yaml)
fi
if [[ $SERVICES == all ]]; then
  kafka_provision
  opensearch_provision
fi
mkdir -p "$STATE_DIR" "$LOG_DIR" "$PID_DIR"

# One CA and one serving certificate (127.0.0.1, localhost) shared by every member's apiserver; one
# service-account key pair per member so tokens of one member are worthless on another.
pki="$STATE_DIR/pki"
mkdir -p "$pki"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=kubesearch-testbed-ca \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$pki/apiserver.key" \
  -out "$pki/apiserver.csr" 2>/dev/null
openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
  -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth') \
  -out "$pki/apiserver.crt" 2>/dev/null
admin_token=$(openssl rand -hex 24)

if [[ $SERVICES == all ]]; then
  # Kafka's SASL_SSL listener: a serving certificate of the same CA in a PKCS#12 keystore, and the
  # PLAIN user's credentials, in files (as the clients take them).
  ktls="$STATE_DIR/kafka/tls"
  mkdir -p "$ktls"
  openssl req -newkey rsa:2048 -nodes -subj /CN=kafka -keyout "$ktls/broker.key" -out "$ktls/broker.csr" 2>/dev/null
  openssl x509 -req -in "$ktls/broker.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth') \
    -out "$ktls/broker.crt" 2>/dev/null
  openssl rand -hex 16 > "$ktls/broker.pass"
  openssl pkcs12 -export -in "$ktls/broker.crt" -inkey "$ktls/broker.key" -name kafka \
    -passout "file:$ktls/broker.pass" -out "$ktls/broker.p12"
  printf kubesearch > "$ktls/plain-username"
  openssl rand -hex 16 | tr -d '\n' > "$ktls/plain-password"
  # Kafka and OpenSearch take the longest to start; they come up while the members do.
  data_jobs=()
  if [[ $HA == 0 ]]; then
    kafka_port=$(free_port); kafka_ctl_port=$(free_port); kafka_secure_port=$(free_port)
    os_port=$(free_port); os_transport_port=$(free_port)
    ( kafka_start "$kafka_port" "$kafka_ctl_port" "$kafka_secure_port" ) & data_jobs+=($!)
    ( opensearch_start "$os_port" "$os_transport_port" ) & data_jobs+=($!)
    kafka_brokers=127.0.0.1:$kafka_port; os_urls=http://127.0.0.1:$os_port
  else
    # Every node of a cluster starts at once: a KRaft quorum and a cluster manager need a majority.
    #
    # Node $CUT (3) of each cluster sits behind a partition proxy (cutproxy, service cut-kafka-3 and
    # cut-opensearch-3), which a fault test cuts and heals while the node runs: every address the
    # others and the clients reach it by is the proxy's. The broker advertises its listener through
    # it and the other controllers know its controller port through it; its own view of the other
    # controllers goes through it too (its controller.quorum.voters names their proxied ports), so
    # a cut stops its heartbeats and Raft traffic both ways. What is not cut: the broker's replica
    # fetches from the other brokers' listeners and the OpenSearch node's own connections to the
    # other nodes' transport ports (they reach the addresses every node publishes; loopback has no
    # way to tell who connects), so a cut broker or node can still send, but never hears back from
    # anyone who must answer it (see README "High availability test bed").
    CUT=3
    declare -a kports kctl kctlx osports ostransport
    voters="" cut_voters="" seeds="" osnodes="" kafka_brokers="" os_urls=""
    for n in 1 2 3; do
      kports[n]=$(free_port); kctl[n]=$(free_port); kctlx[n]=$(free_port); osports[n]=$(free_port); ostransport[n]=$(free_port)
    done
    kcut_port=$(free_port); oscut_http=$(free_port); oscut_transport=$(free_port)
    kcut_control=$(free_port); oscut_control=$(free_port)
    for n in 1 2 3; do
      if [[ $n == "$CUT" ]]; then
        voters+="${voters:+,}$n@127.0.0.1:${kctlx[n]}"; cut_voters+="${cut_voters:+,}$n@127.0.0.1:${kctl[n]}"
        seeds+="${seeds:+, }127.0.0.1:$oscut_transport"; kafka_brokers+="${kafka_brokers:+,}127.0.0.1:$kcut_port"
        os_urls+="${os_urls:+,}http://127.0.0.1:$oscut_http"
      else
        voters+="${voters:+,}$n@127.0.0.1:${kctl[n]}"; cut_voters+="${cut_voters:+,}$n@127.0.0.1:${kctlx[n]}"
        seeds+="${seeds:+, }127.0.0.1:${ostransport[n]}"; kafka_brokers+="${kafka_brokers:+,}127.0.0.1:${kports[n]}"
        os_urls+="${os_urls:+,}http://127.0.0.1:${osports[n]}"
      fi
      osnodes+="${osnodes:+, }testbed-$n"
    done
    mkdir -p "$STATE_DIR/bin"
    GOFLAGS=-trimpath go build -C "$ROOT" -o "$STATE_DIR/bin/cutproxy" ./tests/testbed/cutproxy || die "cannot build the partition proxy"
    links=()
    for n in 1 2 3; do [[ $n == "$CUT" ]] || links+=(--link "127.0.0.1:${kctlx[n]}=127.0.0.1:${kctl[n]}"); done
    run_service "cut-kafka-$CUT" "$STATE_DIR/bin/cutproxy" --control "127.0.0.1:$kcut_control" \
      --link "127.0.0.1:$kcut_port=127.0.0.1:${kports[CUT]}" --link "127.0.0.1:${kctlx[CUT]}=127.0.0.1:${kctl[CUT]}" "${links[@]}"
    run_service "cut-opensearch-$CUT" "$STATE_DIR/bin/cutproxy" --control "127.0.0.1:$oscut_control" \
      --link "127.0.0.1:$oscut_http=127.0.0.1:${osports[CUT]}" --link "127.0.0.1:$oscut_transport=127.0.0.1:${ostransport[CUT]}"
    kafka_secure_port=$(free_port); kafka_port=${kports[1]}; os_port=${osports[1]}
    cluster_id=$(kafka_cluster_id)
    for n in 1 2 3; do
      secure=""; [[ $n == 1 ]] && secure=$kafka_secure_port
      v=$voters advertised="" publish=""
      if [[ $n == "$CUT" ]]; then v=$cut_voters advertised=$kcut_port publish=$oscut_transport; fi
      ( KAFKA_NODE_ID=$n KAFKA_VOTERS=$v KAFKA_ADVERTISED_PORT=$advertised KAFKA_CLUSTER_ID=$cluster_id kafka_start "${kports[n]}" "${kctl[n]}" $secure ) & data_jobs+=($!)
      ( OPENSEARCH_NODE=$n OPENSEARCH_SEEDS=$seeds OPENSEARCH_NODES=$osnodes OPENSEARCH_PUBLISH_PORT=$publish opensearch_start "${osports[n]}" "${ostransport[n]}" ) & data_jobs+=($!)
    done
  fi
fi

clusters=()
declare -A api_port etcd_port
for ((m = 1; m <= MEMBERS; m++)); do
  name=member$m; clusters+=("$name")
  dir="$STATE_DIR/$name"; mkdir -p "$dir"
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  echo "$admin_token,admin,admin,system:masters" > "$dir/tokens.csv"
  etcd_port[$name]=$(free_port); peer=$(free_port); api_port[$name]=$(free_port)
  # --unsafe-no-fsync: a killed process loses nothing with it (the page cache survives), only a machine
  # crash would, and fsync from five etcds on two cores would make every test slow.
  run_service "$name-etcd" "$BIN_DIR/etcd" --name "$name" --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:${etcd_port[$name]}" \
    --advertise-client-urls "http://127.0.0.1:${etcd_port[$name]}" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$name=http://127.0.0.1:$peer" \
    --quota-backend-bytes $((8 * 1024 * 1024 * 1024)) --unsafe-no-fsync --log-level warn
done
for name in "${clusters[@]}"; do
  wait_service "$name-etcd" "$name etcd" 60 curl -sf "http://127.0.0.1:${etcd_port[$name]}/health"
done

for name in "${clusters[@]}"; do
  dir="$STATE_DIR/$name"
  run_service "$name-apiserver" "$BIN_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:${etcd_port[$name]}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${api_port[$name]}" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --cert-dir "$dir/apiserver-certs" \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer "https://kubernetes.default.svc" \
    --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 \
    --enable-priority-and-fairness=false \
    --max-requests-inflight 1000 --max-mutating-requests-inflight 500 \
    --shutdown-delay-duration 0s \
    --endpoint-reconciler-type none
  cat > "$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster: {server: "https://127.0.0.1:${api_port[$name]}", certificate-authority: "$pki/ca.crt"}
users:
- name: $name-admin
  user: {token: "$admin_token"}
contexts:
- name: $name
  context: {cluster: $name, user: $name-admin}
current-context: $name
EOF
done

api_ready() { curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $admin_token" "https://127.0.0.1:$1/readyz"; }
for name in "${clusters[@]}"; do
  wait_service "$name-apiserver" "$name kube-apiserver /readyz" 120 api_ready "${api_port[$name]}"
done

for name in "${clusters[@]}"; do
  dir="$STATE_DIR/$name"
  # Client rate limits are raised everywhere so thousands of Pods settle in minutes, not hours.
  # The node lifecycle controller must run: it lifts the not-ready taint every new node is born with.
  # Node IPAM is off: kwok hands out Pod IPs itself (--cidr).
  run_service "$name-controller-manager" "$BIN_DIR/kube-controller-manager" \
    --kubeconfig "$dir/kubeconfig" --bind-address 127.0.0.1 --secure-port "$(free_port)" \
    --service-account-private-key-file "$dir/sa.key" --root-ca-file "$pki/ca.crt" \
    --leader-elect=false --kube-api-qps 1000 --kube-api-burst 2000 \
    --concurrent-deployment-syncs 20 --concurrent-replicaset-syncs 20 \
    --controllers '*,-nodeipam'
  cat > "$dir/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$dir/kubeconfig", qps: 1000, burst: 2000}
leaderElection: {leaderElect: false}
EOF
  run_service "$name-scheduler" "$BIN_DIR/kube-scheduler" --config "$dir/scheduler.yaml" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)"
  run_service "$name-kwok" "$BIN_DIR/kwok" --kubeconfig "$dir/kubeconfig" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --cidr 10.244.0.0/16 --node-ip 10.0.0.1 --server-address "127.0.0.1:$(free_port)" \
    $(printf -- '--config %s ' "${kwok_stages[@]}")
done

KUBECTL="$BIN_DIR/kubectl"
for name in "${clusters[@]}"; do
  for ((n = 1; n <= NODES_PER_MEMBER; n++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$n
  annotations: {kwok.x-k8s.io/node: fake}
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-$n
    kubernetes.io/os: linux
    topology.kubernetes.io/zone: zone-$n
spec:
  taints: []
EOF
  done | "$KUBECTL" --kubeconfig "$STATE_DIR/$name/kubeconfig" apply -f - >/dev/null
done

# A member is usable once its nodes are Ready and the default ServiceAccount exists (Pods are refused
# without it).
member_ready() {
  local kc=$1
  [[ $("$KUBECTL" --kubeconfig "$kc" get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True) == "$NODES_PER_MEMBER" ]] &&
    "$KUBECTL" --kubeconfig "$kc" -n default get serviceaccount default
}
for name in "${clusters[@]}"; do
  wait_for "$name nodes Ready and default ServiceAccount" 120 member_ready "$STATE_DIR/$name/kubeconfig"
done

# The fleet kubeconfig: one context per member, named like the member.
kubeconfigs=""
for name in "${clusters[@]}"; do kubeconfigs+="$STATE_DIR/$name/kubeconfig:"; done
KUBECONFIG=${kubeconfigs%:} "$KUBECTL" config view --flatten > "$STATE_DIR/kubeconfig"

if [[ $SERVICES == all ]]; then
  for job in "${data_jobs[@]}"; do
    wait "$job" || die "Kafka or OpenSearch did not start; see $LOG_DIR/kafka*.log and $LOG_DIR/opensearch*.log"
  done
fi

{
  echo "# Written by tests/testbed/up.sh at $(date -u +%FT%TZ); source it to use the test bed."
  echo "export KUBESEARCH_TESTBED_DIR=$STATE_DIR"
  echo "export KUBESEARCH_TESTBED_KUBECONFIG=$STATE_DIR/kubeconfig"
  echo "export KUBESEARCH_TESTBED_CLUSTERS=\"${clusters[*]}\""
  echo "export KUBESEARCH_TESTBED_LOGS=$LOG_DIR"
  for name in "${clusters[@]}"; do
    echo "export KUBESEARCH_TESTBED_ETCD_$name=http://127.0.0.1:${etcd_port[$name]}"
  done
  if [[ $SERVICES == all ]]; then
    echo "export KAFKA_BROKERS=$kafka_brokers"
    echo "export KUBESEARCH_TESTBED_KAFKA_SASL_SSL=127.0.0.1:$kafka_secure_port"
    echo "export KUBESEARCH_TESTBED_KAFKA_CA=$pki/ca.crt"
    echo "export KUBESEARCH_TESTBED_KAFKA_PLAIN_USERNAME_FILE=$ktls/plain-username"
    echo "export KUBESEARCH_TESTBED_KAFKA_PLAIN_PASSWORD_FILE=$ktls/plain-password"
    echo "export OPENSEARCH_URL=http://127.0.0.1:$os_port"
    echo "export KUBESEARCH_TESTBED_OPENSEARCH_URLS=$os_urls"
    echo "export KUBESEARCH_TESTBED_HA=$HA"
    if [[ $HA == 1 ]]; then
      # The partition proxies' control APIs, by the service they cut (tests/testbed/cutproxy).
      echo "export KUBESEARCH_TESTBED_CUT_KAFKA_$CUT=http://127.0.0.1:$kcut_control"
      echo "export KUBESEARCH_TESTBED_CUT_OPENSEARCH_$CUT=http://127.0.0.1:$oscut_control"
    fi
  fi
  echo "export KUBECTL=$KUBECTL"
} > "$STATE_DIR/env.tmp"
mv "$STATE_DIR/env.tmp" "$STATE_DIR/env"
# KUBESEARCH_TESTBED_KARMADA=1 adds the Karmada control plane now; the tests needing it add it
# themselves otherwise (karmada.sh).
if [[ ${KUBESEARCH_TESTBED_KARMADA:-0} == 1 ]]; then
  "$here/karmada.sh"
fi
if [[ $SERVICES == all ]]; then
  log "ready in $(( $(date +%s) - started ))s: ${clusters[*]}, Kafka $kafka_brokers, OpenSearch $os_urls"
else
  log "ready in $(( $(date +%s) - started ))s: ${clusters[*]} (members only)"
fi
log "source $STATE_DIR/env to use it; logs in $LOG_DIR"
