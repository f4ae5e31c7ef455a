#!/usr/bin/env bash
# `make run`: kubesearch on a laptop, nothing to install but Go. It
#   1. builds bin/kubesearch and the member clusters' binaries (kube-apiserver, etcd,
#      kube-controller-manager, kube-scheduler, kwok, kubectl) into the test bed's version-keyed cache
#      (~/.cache/kubesearch; a machine that ran the tests builds nothing);
#   2. starts 3 demo member clusters on free loopback ports, without Kafka or OpenSearch, in .demo/
#      (never the test bed's .testbed/), and writes .demo/kubeconfig with a context per member;
#   3. loads the sample workloads of demo/workloads/ (all/ into every member, memberN/ into that one);
#   4. runs `kubesearch standalone` over them in the foreground and, once it is ready, prints queries
#      to paste into another terminal.
# Ctrl-C stops everything it started, by the PIDs it recorded, and removes .demo/.
#
# Settings: KUBESEARCH_DEMO_DIR (state, default .demo), KUBESEARCH_DEMO_LISTEN (default 127.0.0.1:8080,
# or a free port when that is taken), KUBESEARCH_DEMO_MEMBERS (default 3), KUBESEARCH_DEMO_LOG_LEVEL
# (default info), KUBESEARCH_CACHE (the build cache, as for the test bed).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
demo_dir=${KUBESEARCH_DEMO_DIR:-$root/.demo}
mkdir -p "$demo_dir"
demo_dir=$(cd "$demo_dir" && pwd)
if [[ $demo_dir == "$(realpath -m "$root/.testbed")" ]]; then
  echo "demo: KUBESEARCH_DEMO_DIR is the test bed's state; pick another folder" >&2
  exit 1
fi
# Every test bed script below works in the demo's folder, whatever the caller's environment says.
export KUBESEARCH_TESTBED_DIR=$demo_dir
source "$root/tests/testbed/lib.sh"
members=${KUBESEARCH_DEMO_MEMBERS:-3}
say() { printf '%s demo: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ks_pid="" build_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # Ctrl-C of `make run | tee run.log` stops tee too: writing to its pipe must neither kill this
  # cleanup (SIGPIPE, ignored by the children too) nor stop it on a failed write (set -e). What is
  # left to say goes nowhere when the terminal's pipe is gone.
  set +e
  trap '' PIPE
  say "stopping (status $status)" 2>/dev/null || exec >/dev/null 2>&1
  if [[ -n $build_pid ]]; then # interrupted while building: stop the go build and its compilers
    kill -TERM -- "-$build_pid" 2>/dev/null || true
    wait "$build_pid" 2>/dev/null || true
  fi
  if [[ -n $ks_pid ]] && kill -0 "$ks_pid" 2>/dev/null; then
    say "stopping kubesearch (PID $ks_pid)"
    kill -TERM "$ks_pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$ks_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$ks_pid" 2>/dev/null || true
    wait "$ks_pid" 2>/dev/null || true
  fi
  say "stopping the member clusters"
  bash "$root/tests/testbed/down.sh" || status=1
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$(date +%s)
say "building bin/kubesearch, bin/kubectl-search and the member clusters' binaries"
# bin/kubesearch builds beside the Kubernetes binaries (and kwok beside Kubernetes): on a cold cache
# the go builds together keep both cores busy through each other's link steps. In a session of its
# own, so that cleanup can stop it with its compilers (a background job ignores the terminal's Ctrl-C).
setsid go build -C "$root" -o bin/ ./cmd/kubesearch ./cmd/kubectl-search & build_pid=$!
KUBESEARCH_TESTBED_BUILD_PARALLEL=1 bash "$root/tests/testbed/build.sh"
wait "$build_pid" || { build_pid=""; say "building bin/kubesearch failed"; exit 1; }
build_pid=""
built=$(date +%s)

say "starting $members member clusters in $demo_dir"
KUBESEARCH_TESTBED_SERVICES=members KUBESEARCH_TESTBED_MEMBERS=$members \
  KUBESEARCH_TESTBED_KWOK_STAGES="$root/demo/kwok" bash "$root/tests/testbed/up.sh"
kubectl="$BIN_DIR/kubectl"
clusters=()
for ((m = 1; m <= members; m++)); do clusters+=("member$m"); done

# crds_established KUBECONFIG DIR succeeds once every CRD of DIR has the condition Established=True.
crds_established() {
  local crd
  for crd in $("$kubectl" --kubeconfig "$1" get -f "$2" -o name); do
    [[ $("$kubectl" --kubeconfig "$1" get "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}') == True ]] || return 1
  done
}

say "loading the sample workloads of demo/workloads"
for name in "${clusters[@]}"; do
  kc="$demo_dir/$name/kubeconfig"
  "$kubectl" --kubeconfig "$kc" apply -f "$root/demo/workloads/all/" >/dev/null
  dir="$root/demo/workloads/$name"
  [[ -d $dir ]] || continue
  if [[ -d $dir/crds ]]; then
    "$kubectl" --kubeconfig "$kc" apply -f "$dir/crds/" >/dev/null
    # Polled rather than `kubectl wait --for condition=Established`, which fails outright on a CRD
    # whose status the apiserver has not filled in yet (a busy machine).
    wait_for "$name's CRDs Established" 300 crds_established "$kc" "$dir/crds/" ||
      { say "$name's CRDs were not Established within 5 minutes"; exit 1; }
  fi
  "$kubectl" --kubeconfig "$kc" apply -f "$dir/" >/dev/null
done

# settled KUBECONFIG succeeds once the controllers have made every workload's pods and kwok has moved
# every pod that has a node out of its first Pending (pods no node fits stay Pending, as they should).
settled() {
  local kc=$1 out
  out=$("$kubectl" --kubeconfig "$kc" get deployments,daemonsets,jobs -A -o jsonpath='{range .items[*]}{.kind} {.spec.replicas} {.status.replicas} {.status.desiredNumberScheduled} {.status.currentNumberScheduled} {.status.active}{.status.failed}{.status.succeeded}{"\n"}{end}')
  while read -r kind a b c; do
    case $kind in
      Deployment) [[ $a == "$b" ]] || return 1 ;;
      DaemonSet) [[ -n $a && $a != 0 && $a == "$b" ]] || return 1 ;;
      Job) [[ -n $a ]] || return 1 ;;
    esac
  done <<<"$out"
  out=$("$kubectl" --kubeconfig "$kc" get pods -A -o jsonpath='{range .items[*]}{.spec.nodeName}/{.status.phase}/{.status.containerStatuses[0].state.waiting.reason}{"\n"}{end}')
  ! grep -qE '^[^/]+/Pending/$' <<<"$out"
}
for name in "${clusters[@]}"; do
  wait_for "$name workloads to settle" 120 settled "$demo_dir/$name/kubeconfig" ||
    say "WARNING: $name's workloads have not settled; going on"
done

listen=${KUBESEARCH_DEMO_LISTEN:-}
if [[ -z $listen ]]; then
  if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
    listen=127.0.0.1:$(free_port)
    say "127.0.0.1:8080 is taken; kubesearch listens on $listen"
  else
    listen=127.0.0.1:8080
  fi
fi
url=http://$listen
say "starting kubesearch standalone on $url"
# Its log goes to a file: the terminal keeps the queries to paste readable.
ks_log=$demo_dir/kubesearch.log
"$root/bin/kubesearch" standalone --kubeconfig "$demo_dir/kubeconfig" --registry "$root/demo/registry.yaml" \
  --data-dir "$demo_dir/data" --listen "$listen" --log-level "${KUBESEARCH_DEMO_LOG_LEVEL:-info}" >"$ks_log" 2>&1 &
ks_pid=$!
# Recorded like the members, so down.sh stops it too should this script itself be killed.
echo "$ks_pid $(proc_start "$ks_pid")" > "$PID_DIR/kubesearch.pid"

ready() { curl -sf "$url/readyz"; }
until ready >/dev/null 2>&1; do
  kill -0 "$ks_pid" 2>/dev/null || { wait "$ks_pid" || true; say "kubesearch exited before it was ready; the end of its log:"; tail -n 30 "$ks_log" >&2; exit 1; }
  (( $(date +%s) - built < 600 )) || { say "kubesearch not ready after 10 minutes"; exit 1; }
  sleep 0.2
done
"$root/bin/kubesearch" kubeconfig --server "$url" > "$demo_dir/fleet.kubeconfig"
now=$(date +%s)

if command -v jq >/dev/null; then
  by_cluster=" | jq -r '.items[] | .metadata.annotations[\"resource.karmada.io/cached-from-cluster\"] + \"  \" + .metadata.namespace + \"/\" + .metadata.name'"
  broken=" | jq -r '.items[] | .metadata.annotations[\"resource.karmada.io/cached-from-cluster\"] + \"  \" + .metadata.name + \"  \" + .status.phase + \"  \" + ([.status.containerStatuses[]?.state.waiting.reason, .status.containerStatuses[]?.state.terminated.reason, (.status.conditions[]? | select(.status == \"False\") | .reason)] | map(select(. != null)) | first // \"\")'"
  facets=" | jq -c '.facets'"
else
  by_cluster="" broken="" facets=""
fi
q="$url/v1alpha1/search"
cat <<EOF

==> kubesearch is ready at $url: ${#clusters[@]} member clusters (${clusters[*]}), built in $((built - started))s, ready $((now - built))s later.
    Paste these into another terminal; Ctrl-C here stops everything. kubesearch logs to
    $ks_log (tail -f it to follow).

# The search page, in a browser (/ to search, arrows and Enter to open an object):
page: $url/ui/?q=kind%3Apods+app.kubernetes.io%2Fpart-of%3Dshop

# Where does app "web" run? One Deployment per member:
curl -s '$q?resources=deployments.apps&labelSelector=app.kubernetes.io/name%3Dweb&metadataOnly=true'$by_cluster
# ... and how many pods of each app does each cluster run?
curl -s '$q?resources=pods&labelSelector=app.kubernetes.io/part-of%3Dshop&facets=cluster,label:app.kubernetes.io/name&limit=1&metadataOnly=true'$facets
# Which pods use image nginx:1.27.3?
curl -s '$q?resources=pods&fieldSelector=spec.containers.image%3Dnginx:1.27.3&metadataOnly=true'$by_cluster
# What is broken in namespace shop? (any condition False: crash loops, unschedulable pods)
curl -s '$q?resources=pods&namespaces=shop&fieldSelector=status.conditions.status%3DFalse'$broken
# What is not Running anywhere?
curl -s '$q?resources=pods&fieldSelector=status.phase!%3DRunning'$broken
# Free text: everything that mentions "payments"
curl -s '$q?q=payments&metadataOnly=true'$by_cluster
# Collection state and freshness per cluster and resource
curl -s '$url/v1alpha1/fleet'

# kubectl through the facade: the fleet as one read-only cluster (no kubectl? PATH=$BIN_DIR:\$PATH)
export KUBECONFIG=$demo_dir/fleet.kubeconfig
kubectl get pods -A -o wide
kubectl get deployments -n shop -l app.kubernetes.io/part-of=shop
kubectl get pods -A --field-selector status.phase=Pending
kubectl get databases -A
kubectl --context kubesearch-qualified get deployments -n shop -o name
kubectl --context kubesearch-qualified get deployment web_member2 -n shop
kubectl --context kubesearch-member3 get pods -n payments
# (kubectl get deployment web -n shop answers 409: web is in 3 clusters; the error names them)
# (kubectl get pods -A --watch follows changes in every member)

# kubectl search (bin/kubectl-search, a kubectl plugin): the REST search printed as kubectl get prints
export PATH=$root/bin:\$PATH
kubectl search pods --image nginx:1.27.3
kubectl search deployments -l app.kubernetes.io/part-of=shop --count-by cluster

# The members themselves, to change something and watch it arrive:
#   $kubectl --kubeconfig $demo_dir/kubeconfig --context member2 -n shop scale deployment web --replicas 4
# Ctrl-C here stops kubesearch and the member clusters.
EOF

if ! wait "$ks_pid"; then
  say "kubesearch stopped; the end of its log:"
  tail -n 30 "$ks_log" >&2
  exit 1
fi
