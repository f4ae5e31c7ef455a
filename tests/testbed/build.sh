#!/usr/bin/env bash
# Builds the test bed's binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok) from the Go module proxy into the version-keyed cache. A no-op when they are there.
# KUBESEARCH_TESTBED_BUILD_PARALLEL=1 builds kwok beside Kubernetes instead of after it (the demo does):
# the two share few packages, and each one's link steps leave a core idle that the other can use.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
missing=0
for b in "${want[@]}"; do [[ -x "$BIN_DIR/$b" ]] || missing=1; done
[[ -d "$BIN_DIR/kwok-stages" ]] || missing=1
if [[ $missing == 0 ]]; then log "binaries cached in $BIN_DIR"; exit 0; fi

mkdir -p "$BIN_DIR.tmp"
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
start=$(date +%s)
build_kwok() {
  log "building kwok $KWOK_VERSION"
  # kwok has its own dependency graph, so it is installed as its own module, not from the tools module.
  GOBIN="$BIN_DIR.tmp" GOFLAGS=-trimpath go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}
kwok_job=""
if [[ ${KUBESEARCH_TESTBED_BUILD_PARALLEL:-} == 1 ]]; then
  log "building kwok $KWOK_VERSION"
  # In a session of its own, so that an interrupted build stops it and its compilers with it (a
  # background job of a script ignores the terminal's Ctrl-C).
  GOBIN="$BIN_DIR.tmp" GOFLAGS=-trimpath setsid go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" & kwok_job=$!
  stop_kwok() { [[ -z $kwok_job ]] || kill -TERM -- "-$kwok_job" 2>/dev/null || true; }
  trap stop_kwok EXIT
  trap 'stop_kwok; exit 130' INT
  trap 'stop_kwok; exit 143' TERM
fi
log "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION (about 15 minutes cold on 2 cores)"
build_kubernetes() {
  (cd "$TOOLS_DIR" && go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR.tmp/" \
    ./etcd \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl)
}
if [[ -n $kwok_job ]]; then
  build_kubernetes || status=$?
  wait "$kwok_job" || status=${status:-$?} # a failed Kubernetes build still waits for kwok's
  kwok_job=""
  [[ -z ${status:-} ]] || die "build failed (exit status $status)"
else
  build_kubernetes
  build_kwok
fi
# kwok needs Stage definitions to move fake nodes and pods through their lifecycle; its module ships them.
kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
mkdir -p "$BIN_DIR.tmp/kwok-stages"
cp "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml \
  "$kwok_dir"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
  "$kwok_dir"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$BIN_DIR.tmp/kwok-stages/"
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
log "built in $(( $(date +%s) - start ))s into $BIN_DIR"
