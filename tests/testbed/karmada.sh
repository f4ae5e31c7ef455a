#!/usr/bin/env bash
# Adds a "Karmada control plane" to a running test bed: a fourth kube-apiserver (service
# karmada-apiserver) with an etcd of its own (karmada-etcd), on loopback, with the aggregation layer
# configured as Karmada's installers configure it, so an APIService for v1alpha1.search.karmada.io
# routes requests to kubesearch's query API:
#   --requestheader-client-ca-file    the front proxy CA (karmada/front-proxy-ca.crt), whose
#                                     certificates the query API trusts to name users
#   --requestheader-allowed-names     front-proxy-client, the common name of ...
#   --proxy-client-cert-file/-key     the certificate the aggregation layer presents to the query API
# The control plane authenticates admin's token (system:masters) and client certificates of the test
# bed's CA (pki/ca.crt; a test makes one per user), and authorizes with RBAC.
#
# --enable-aggregator-routing stays off: with it, kube-apiserver sends an APIService's requests to the
# endpoints of its Service, and endpoints may not hold loopback addresses (their validation refuses
# 127.0.0.0/8). Without it, it sends them to the Service itself, and a Service of type ExternalName
# (externalName localhost, the query API's port as the APIService's port) is https://localhost:<port>,
# the query API on loopback. The aggregation layer checks the query API's certificate for the name
# <service>.<namespace>.svc against the APIService's caBundle.
#
# Idempotent and safe to run concurrently (a lock): a control plane already up is left as it is.
# Writes to $STATE_DIR/env: KUBESEARCH_TESTBED_KARMADA_KUBECONFIG (context karmada, user admin) and
# KUBESEARCH_TESTBED_KARMADA_FRONT_PROXY_CA. up.sh runs it when KUBESEARCH_TESTBED_KARMADA=1; the e2e
# tests that need the control plane run it themselves (testbed.Env.Karmada), so a test bed started
# without it gets it when such a test runs.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/lib.sh"

[[ -f $STATE_DIR/env ]] || die "no test bed in $STATE_DIR: start one with up.sh first"
dir="$STATE_DIR/karmada"
pki="$STATE_DIR/pki"
mkdir -p "$dir"
# The lock's descriptor is closed for the services (9>&- below): they would hold the lock for life.
exec 9>"$dir/lock"
flock 9

admin_token_file="$dir/admin.token"
ready() { curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $(cat "$admin_token_file")" "https://127.0.0.1:$1/readyz"; }
# alive NAME says whether the recorded process of service NAME still runs.
alive() {
  local pid started
  [[ -f $PID_DIR/$1.pid ]] || return 1
  read -r pid started < "$PID_DIR/$1.pid"
  [[ $(proc_start "$pid") == "$started" ]]
}
# A control plane whose two processes run is waited for, never started over: a test may be using it.
if grep -q '^export KUBESEARCH_TESTBED_KARMADA_KUBECONFIG=' "$STATE_DIR/env" && [[ -f $dir/port ]] &&
  alive karmada-etcd && alive karmada-apiserver; then
  wait_service karmada-apiserver "the Karmada control plane's kube-apiserver /readyz" 120 ready "$(cat "$dir/port")" 9>&-
  log "the Karmada control plane runs already"
  exit 0
fi

# A CA of its own for the front proxy: a certificate it signs may name any user to the query API,
# so it must never be the CA that signs users' certificates.
if [[ ! -f $dir/front-proxy-client.crt ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=karmada-front-proxy-ca \
    -keyout "$dir/front-proxy-ca.key" -out "$dir/front-proxy-ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=front-proxy-client -keyout "$dir/front-proxy-client.key" \
    -out "$dir/front-proxy-client.csr" 2>/dev/null
  openssl x509 -req -in "$dir/front-proxy-client.csr" -CA "$dir/front-proxy-ca.crt" -CAkey "$dir/front-proxy-ca.key" \
    -CAcreateserial -days 30 -extfile <(printf 'extendedKeyUsage=clientAuth') -out "$dir/front-proxy-client.crt" 2>/dev/null
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  openssl rand -hex 24 > "$admin_token_file"
  echo "$(cat "$admin_token_file"),admin,admin,system:masters" > "$dir/tokens.csv"
fi

# Whatever is left of an earlier control plane (one of its two services died) starts over: its
# objects are the tests' own, made again by each test.
stop_service karmada-apiserver 10 9>&-
stop_service karmada-etcd 10 9>&-
rm -rf "$dir/etcd"
etcd_port=$(free_port); peer=$(free_port); api_port=$(free_port)
run_service karmada-etcd "$BIN_DIR/etcd" --name karmada --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "karmada=http://127.0.0.1:$peer" --unsafe-no-fsync --log-level warn 9>&-
wait_service karmada-etcd "the Karmada control plane's etcd" 60 curl -sf "http://127.0.0.1:$etcd_port/health"

run_service karmada-apiserver "$BIN_DIR/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --cert-dir "$dir/apiserver-certs" \
  --token-auth-file "$dir/tokens.csv" --client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
  --requestheader-client-ca-file "$dir/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-uid-headers X-Remote-Uid --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$dir/front-proxy-client.crt" --proxy-client-key-file "$dir/front-proxy-client.key" \
  --service-account-issuer "https://kubernetes.default.svc" \
  --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
  --service-cluster-ip-range 10.97.0.0/16 \
  --enable-priority-and-fairness=false --shutdown-delay-duration 0s --endpoint-reconciler-type none 9>&-
echo "$api_port" > "$dir/port"
wait_service karmada-apiserver "the Karmada control plane's kube-apiserver /readyz" 120 ready "$api_port"

cat > "$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: karmada
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$pki/ca.crt"}
users:
- name: karmada-admin
  user: {token: "$(cat "$admin_token_file")"}
contexts:
- name: karmada
  context: {cluster: karmada, user: karmada-admin}
current-context: karmada
EOF

# The env file gains (or has replaced) the control plane's lines; written whole and renamed, as
# up.sh writes it, so a reader never sees half of it.
{
  grep -v '^export KUBESEARCH_TESTBED_KARMADA_' "$STATE_DIR/env" || true
  echo "export KUBESEARCH_TESTBED_KARMADA_KUBECONFIG=$dir/kubeconfig"
  echo "export KUBESEARCH_TESTBED_KARMADA_FRONT_PROXY_CA=$dir/front-proxy-ca.crt"
} > "$STATE_DIR/env.karmada.tmp"
mv "$STATE_DIR/env.karmada.tmp" "$STATE_DIR/env"
log "Karmada control plane ready on https://127.0.0.1:$api_port (kubeconfig $dir/kubeconfig)"
