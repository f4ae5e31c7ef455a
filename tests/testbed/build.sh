#!/usr/bin/env bash
# Builds the test bed's binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok) from the Go module proxy into the version-keyed cache. A no-op when they are there.
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
log "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION (about 15 minutes cold on 2 cores)"
(cd "$TOOLS_DIR" && go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR.tmp/" \
  ./etcd \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl)
log "building kwok $KWOK_VERSION"
# kwok has its own dependency graph, so it is installed as its own module, not from the tools module.
GOBIN="$BIN_DIR.tmp" GOFLAGS=-trimpath go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
# kwok needs Stage definitions to move fake nodes and pods through their lifecycle; its module ships them.
kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
mkdir -p "$BIN_DIR.tmp/kwok-stages"
cp "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml \
  "$kwok_dir"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
  "$kwok_dir"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$BIN_DIR.tmp/kwok-stages/"
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
log "built in $(( $(date +%s) - start ))s into $BIN_DIR"
